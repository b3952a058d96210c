// The offline HTML viewer (write_html_viewer, `molaccel orbital view`):
//  * the page is self-contained: no network address, no external script, style or import;
//  * its scene decodes, with a decoder written here from the format in display.hpp (JSON, base64,
//    quantised little-endian arrays), to the meshes given: the same indices, positions within half
//    a quantisation step, normals within half of 1/127;
//  * Debian's chromium, headless with software WebGL (SwiftShader), loads it from a file:// URL
//    and its screenshot shows the lobe colours in the middle, the background at the corners, and
//    matches the CPU renderer's image of the same scene (test_html_viewer_screenshot.py); skipped
//    where chromium or Python is absent;
//  * the command as a process: one file, a trajectory (natural order, the orbital followed), and
//    bad input as an error with nothing written.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>

#include "display_test_util.hpp"

namespace molaccel::display {
namespace {

namespace fs = std::filesystem;

// ---- A decoder of the page's scene, from the format description alone ------------------------

std::string from_base64(const std::string& text) {
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) throw std::runtime_error("base64 length not a multiple of 4");
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      const int d = digit(c);
      if (d < 0 || pad > 0) throw std::runtime_error("bad base64 digit");
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    for (int k = 0; k < 3 - pad; ++k) out += static_cast<char>((v >> (16 - 8 * k)) & 0xff);
  }
  return out;
}

std::uint64_t little_endian(const std::string& bytes, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int b = width - 1; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(bytes[at + b]);
  return v;
}

const std::string kSceneOpen = "<script type=\"application/json\" id=\"molaccel-scene\">";

nlohmann::json scene_of(const std::string& page) {
  const std::size_t open = page.find(kSceneOpen);
  if (open == std::string::npos) throw std::runtime_error("no scene element");
  const std::size_t start = open + kSceneOpen.size();
  const std::size_t end = page.find("</script>", start);
  return nlohmann::json::parse(page.substr(start, end - start));
}

struct DecodedPart {
  std::string name;
  std::array<double, 4> colour{};
  std::vector<double> positions, normals;
  std::vector<std::uint32_t> indices;
  double position_tolerance = 0;  // half a quantisation step along the widest axis
};

DecodedPart decode_part(const nlohmann::json& part) {
  DecodedPart d;
  d.name = part["name"];
  for (int k = 0; k < 4; ++k) d.colour[k] = part["colour"][k];
  const std::size_t n = part["vertex_count"], t = part["triangle_count"];
  const int index_bytes = part["index_bytes"];
  EXPECT_EQ(index_bytes, n <= 65536 ? 2 : 4);
  const std::string positions = from_base64(part["positions"]), normals = from_base64(part["normals"]),
                    indices = from_base64(part["indices"]);
  EXPECT_EQ(positions.size(), 6 * n);
  EXPECT_EQ(normals.size(), 3 * n);
  EXPECT_EQ(indices.size(), 3 * t * static_cast<std::size_t>(index_bytes));
  for (std::size_t v = 0; v < n; ++v)
    for (int x = 0; x < 3; ++x) {
      const double q = static_cast<double>(little_endian(positions, 2 * (3 * v + x), 2));
      d.positions.push_back(part["origin"][x].get<double>() + part["extent"][x].get<double>() * q / 65535);
      d.normals.push_back(static_cast<std::int8_t>(normals[3 * v + x]) / 127.0);
      d.position_tolerance = std::max(d.position_tolerance, part["extent"][x].get<double>() / 65535 / 2);
    }
  for (std::size_t i = 0; i < 3 * t; ++i)
    d.indices.push_back(static_cast<std::uint32_t>(little_endian(indices, index_bytes * i, index_bytes)));
  return d;
}

// Every part of `expected` with triangles, in order, decoded from frame `f` of the page's scene.
void expect_frame_matches(const nlohmann::json& scene, std::size_t f, const Scene& expected) {
  const auto& parts = scene["frames"][f]["parts"];
  std::size_t p = 0;
  for (const ScenePart& want : expected.parts) {
    if (want.mesh.empty()) continue;
    ASSERT_LT(p, parts.size());
    const DecodedPart got = decode_part(parts[p++]);
    SCOPED_TRACE("frame " + std::to_string(f) + ", part " + want.name);
    EXPECT_EQ(got.name, want.name);
    EXPECT_FLOAT_EQ(static_cast<float>(got.colour[0]), want.colour.r);
    EXPECT_FLOAT_EQ(static_cast<float>(got.colour[2]), want.colour.b);
    EXPECT_EQ(got.indices, want.mesh.indices);  // the same triangles, the same winding
    ASSERT_EQ(got.positions.size(), want.mesh.positions.size());
    double worst_position = 0, worst_normal = 0;
    for (std::size_t i = 0; i < got.positions.size(); ++i) {
      worst_position = std::max(worst_position, std::abs(got.positions[i] - want.mesh.positions[i]));
      worst_normal = std::max(worst_normal, std::abs(got.normals[i] - want.mesh.normals[i]));
    }
    // Rounding to the nearest step: half a step, plus float rounding of the stored position.
    EXPECT_LE(worst_position, got.position_tolerance * 1.001 + 1e-6);
    EXPECT_LE(worst_normal, 0.5 / 127 + 1e-6);
  }
  EXPECT_EQ(p, parts.size());
}

// Whether the page could reach anything outside itself.
std::string outside_reference(const std::string& page) {
  std::string lower = page;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* bad : {"http:", "https:", "//cdn", "<link", "@import", "url(", " src=", "fetch(",
                          "xmlhttprequest", "import(", "websocket", "<iframe", "<img"})
    if (lower.find(bad) != std::string::npos) return bad;
  // Two script elements: the scene's JSON and the inline viewer code, no other.
  std::size_t scripts = 0;
  for (std::size_t at = lower.find("<script"); at != std::string::npos; at = lower.find("<script", at + 1)) {
    const std::string tag = lower.substr(at, lower.find('>', at) - at + 1);
    if (tag != "<script>" && tag != "<script type=\"application/json\" id=\"molaccel-scene\">") return tag;
    ++scripts;
  }
  if (scripts != 2 || lower.find("</script>") == std::string::npos) return "script count";
  std::size_t closes = 0;
  for (std::size_t at = lower.find("</script"); at != std::string::npos; at = lower.find("</script", at + 1))
    ++closes;
  return closes == 2 ? "" : "a text closes a script element";
}

// ---- Scenes -----------------------------------------------------------------------------------

// A p-like lobe pair (blue +x, red -x) shifted by `dx`, with two atoms between the lobes.
Scene lobe_pair(double dx) {
  Scene scene = test::lobe_pair_scene(dx);
  for (ScenePart& p : ball_and_stick({{dx, 0.6, 0}, {dx, -0.6, 0.2}}, {8, 1}, 1.0))
    scene.parts.push_back(std::move(p));
  return scene;
}

// A part of more than 65536 vertices (32-bit indices) with random positions and triangles.
ScenePart large_part() {
  std::mt19937 rng(20);
  std::uniform_real_distribution<float> u(-5.0f, 7.0f);
  ScenePart part{"large", {}, {0.2f, 0.7f, 0.3f, 1}};
  const std::uint32_t n = 70001;
  for (std::uint32_t v = 0; v < n; ++v) {
    const float p[3] = {u(rng), u(rng) * 0.5f, u(rng) * 2.0f};
    const float l = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
    for (int x = 0; x < 3; ++x) {
      part.mesh.positions.push_back(p[x]);
      part.mesh.normals.push_back(p[x] / l);
    }
  }
  std::uniform_int_distribution<std::uint32_t> pick(0, n - 1);
  for (int t = 0; t < 3000; ++t)
    part.mesh.indices.insert(part.mesh.indices.end(), {pick(rng), pick(rng), n - 1});
  return part;
}

TEST(DisplayHtmlViewer, SelfContainedAndDecodesToTheMeshes) {
  molaccel::testing::TempDir dir;
  std::vector<Scene> frames{lobe_pair(0), lobe_pair(0.4)};
  frames[1].parts.push_back(large_part());
  frames[1].parts.push_back({"empty", {}, {}});  // parts without triangles are left out
  ViewerOptions options;
  options.title = "a </script><script>alert(1)</script> title";
  options.frame_labels = {"first", "second <b>"};
  options.view = parse_view("rx=10,ry=-20,zoom=1.5");
  write_html_viewer(dir / "v.html", frames, options);
  const std::string page = molaccel::testing::read_file(dir / "v.html");
  EXPECT_EQ(outside_reference(page), "");
  const nlohmann::json scene = scene_of(page);
  EXPECT_EQ(scene["format"], "molaccel-viewer");
  EXPECT_EQ(scene["version"], 1);
  EXPECT_EQ(scene["title"], options.title);
  EXPECT_EQ(scene["frames"][1]["label"], "second <b>");
  EXPECT_EQ(scene["view"]["ry"], -20.0);
  EXPECT_EQ(scene["view"]["zoom"], 1.5);
  EXPECT_EQ(scene["fps"], 10);
  // The framing encloses both frames.
  const Framing both = enclose(framing_of(frames[0]), framing_of(frames[1]));
  EXPECT_NEAR(scene["framing"]["radius"].get<double>(), both.radius, 1e-9);
  ASSERT_EQ(scene["frames"].size(), 2u);
  expect_frame_matches(scene, 0, frames[0]);
  expect_frame_matches(scene, 1, frames[1]);
  EXPECT_EQ(scene["frames"][1]["parts"].back()["index_bytes"], 4);
}

TEST(DisplayHtmlViewer, BadInputIsAnErrorWithNothingWritten) {
  molaccel::testing::TempDir dir;
  const fs::path path = dir / "v.html";
  EXPECT_THROW(write_html_viewer(path, {}), InputError);
  Scene empty;
  empty.parts.push_back({"nothing", {}, {}});
  EXPECT_THROW(write_html_viewer(path, {lobe_pair(0), empty}), InputError);
  ViewerOptions labels;
  labels.frame_labels = {"one", "two"};
  EXPECT_THROW(write_html_viewer(path, {lobe_pair(0)}, labels), InputError);
  ViewerOptions fps;
  fps.frames_per_second = 0;
  EXPECT_THROW(write_html_viewer(path, {lobe_pair(0)}, fps), InputError);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// ---- In a real browser ------------------------------------------------------------------------

int run(const std::string& command) {
  const int status = std::system((command + " > /dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string shell_quoted(const fs::path& p) {
  return "'" + p.string() + "'";
}

// Debian's chromium (or a chromium-browser) on PATH; empty when there is none.
fs::path find_chromium() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (const char* name : {"chromium", "chromium-browser"})
    for (std::size_t start = 0; start <= dirs.size();) {
      std::size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
      if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
  return {};
}

// Loads the page headless, software WebGL (SwiftShader), and takes a screenshot of the window.
int screenshot(const fs::path& chromium, const fs::path& page, const fs::path& png, int width, int height,
               const fs::path& profile) {
  return run("timeout 120 " + shell_quoted(chromium) +
             " --headless --no-sandbox --no-first-run --disable-extensions --hide-scrollbars --mute-audio "
             "--disable-dev-shm-usage"
             " --use-angle=swiftshader --enable-unsafe-swiftshader --user-data-dir=" +
             shell_quoted(profile) + " --window-size=" + std::to_string(width) + "," +
             std::to_string(height) + " --screenshot=" + shell_quoted(png) + " " +
             shell_quoted("file://" + fs::absolute(page).string()));
}

class DisplayHtmlViewerBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty()) GTEST_SKIP() << "no chromium on PATH (Debian package chromium)";
    if (std::string(MOLACCEL_PYTHON).empty())
      GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  }
  fs::path chromium_;
};

TEST_F(DisplayHtmlViewerBrowser, ScreenshotShowsTheLobesAsTheRendererDoes) {
  molaccel::testing::TempDir dir;
  constexpr int kWidth = 320, kHeight = 240;
  ViewerOptions options;
  options.title = "lobes";
  options.view = parse_view("rx=20,ry=35");
  const std::vector<Scene> frames{lobe_pair(0), lobe_pair(0.4)};  // two: the slider is on the page
  write_html_viewer(dir / "v.html", frames, options);
  ASSERT_EQ(screenshot(chromium_, dir / "v.html", dir / "shot.png", kWidth, kHeight, dir / "profile"), 0);
  std::string reference;
  RenderOptions render;
  render.width = kWidth;
  render.height = kHeight;
  render.view = options.view;
  render.framing = enclose(framing_of(frames[0]), framing_of(frames[1]));
  try {
    write_png(dir / "cpu.png", render_scene(frames[0], render));
    reference = " --reference " + shell_quoted(dir / "cpu.png");
  } catch (const NotCompiled&) {
    // A build without libpng: the content checks alone.
  }
  EXPECT_EQ(run(std::string(MOLACCEL_PYTHON) + " " + shell_quoted(MOLACCEL_SCREENSHOT_CHECKER) + " " +
                shell_quoted(dir / "shot.png") + " " + std::to_string(kWidth) + " " +
                std::to_string(kHeight) + reference),
            0)
      << "see " << MOLACCEL_SCREENSHOT_CHECKER << " on " << (dir / "shot.png");
}

// ---- The command --------------------------------------------------------------------------------

class OrbitalViewCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOLACCEL_VIEW_CLI).empty()) GTEST_SKIP() << "this build has no orbital engine";
  }
  static std::string cli() {
    return std::string(MOLACCEL_VIEW_CLI) + " orbital view --device cpu --spacing 0.2 ";
  }
  static fs::path water() { return fs::path(MOLACCEL_SOURCE_DIR) / "data" / "orbital" / "h2o_631gs.molden"; }
};

TEST_F(OrbitalViewCli, OneFileEachOrbitalAndTheDensityAFrame) {
  molaccel::testing::TempDir dir;
  ASSERT_EQ(run(cli() + shell_quoted(water()) + " --orbital homo-1:homo --density total -o " +
                shell_quoted(dir / "w.html") + " --json " + shell_quoted(dir / "r.json")),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  const std::string page = molaccel::testing::read_file(dir / "w.html");
  EXPECT_EQ(outside_reference(page), "");
  const nlohmann::json scene = scene_of(page);
  ASSERT_EQ(scene["frames"].size(), 3u);
  ASSERT_EQ(report["frames"].size(), 3u);
  EXPECT_EQ(report["frames"][1]["orbital"], 5);  // water's HOMO
  EXPECT_EQ(report["frames"][2]["negative_triangles"], 0);
  EXPECT_EQ(scene["title"], "h2o_631gs.molden");
  for (std::size_t f = 0; f < 3; ++f) {
    const auto& parts = scene["frames"][f]["parts"];
    const bool orbital = f < 2;
    EXPECT_EQ(parts[0]["name"], orbital ? "positive lobe" : "surface");
    EXPECT_EQ(parts[0]["triangle_count"], report["frames"][f]["positive_triangles"]);
    if (orbital) {
      EXPECT_EQ(parts[1]["name"], "negative lobe");
      EXPECT_EQ(parts[1]["triangle_count"], report["frames"][f]["negative_triangles"]);
    }
    EXPECT_GT(parts.size(), orbital ? 3u : 2u);  // atoms and bonds
  }
  ASSERT_EQ(run(cli() + shell_quoted(water()) + " --no-atoms -o " + shell_quoted(dir / "h.html")), 0);
  const nlohmann::json homo = scene_of(molaccel::testing::read_file(dir / "h.html"));
  EXPECT_EQ(homo["frames"].size(), 1u);  // homo by default
  EXPECT_EQ(homo["frames"][0]["parts"].size(), 2u);
}

// Water and a rigidly moved copy as frames f10 and f2 (natural order puts f2 first); the HOMO is
// followed; a frame of another molecule, two orbitals for a trajectory, no surface at the
// isovalue and a file name that is not .html are errors with nothing written.
TEST_F(OrbitalViewCli, TrajectoryInNaturalOrderAndBadInput) {
  molaccel::testing::TempDir dir;
  const std::string text = molaccel::testing::read_file(water());
  molaccel::testing::write_file(dir / "f2.molden", text);
  std::string moved = text;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"0.221097956679", "0.421097956679"},
                                 {"-0.882502100589", "-0.682502100589"}})
    for (std::size_t at = moved.find(from); at != std::string::npos; at = moved.find(from, at + 1))
      moved.replace(at, from.size(), to);
  molaccel::testing::write_file(dir / "f10.molden", moved);
  const std::string frames = shell_quoted(dir / "f10.molden") + " " + shell_quoted(dir / "f2.molden");
  ASSERT_EQ(run(cli() + frames + " --orbital homo --fps 4 -o " + shell_quoted(dir / "t.html") + " --json " +
                shell_quoted(dir / "r.json")),
            0);
  const auto report = nlohmann::json::parse(molaccel::testing::read_file(dir / "r.json"));
  ASSERT_EQ(report["frames"].size(), 2u);
  EXPECT_EQ(report["frames"][0]["file"], (dir / "f2.molden").string());
  EXPECT_EQ(report["frames"][1]["orbital"], 5);
  EXPECT_GT(report["frames"][1]["overlap"].get<double>(), 0.9);
  const nlohmann::json scene = scene_of(molaccel::testing::read_file(dir / "t.html"));
  ASSERT_EQ(scene["frames"].size(), 2u);
  EXPECT_EQ(scene["fps"], 4);
  EXPECT_NE(scene["frames"][1]["label"].get<std::string>().find("f10.molden"), std::string::npos);
  EXPECT_EQ(scene["title"], "f2.molden ... f10.molden (2 frames)");
  // The density in every frame, in the order given.
  ASSERT_EQ(run(cli() + frames + " --as-listed --density total -o " + shell_quoted(dir / "d.html") +
                " --json " + shell_quoted(dir / "d.json")),
            0);
  const auto density = nlohmann::json::parse(molaccel::testing::read_file(dir / "d.json"));
  ASSERT_EQ(density["frames"].size(), 2u);
  EXPECT_EQ(density["frames"][0]["file"], (dir / "f10.molden").string());
  EXPECT_EQ(density["frames"][1]["negative_triangles"], 0);
  EXPECT_EQ(scene_of(molaccel::testing::read_file(dir / "d.html"))["frames"].size(), 2u);

  for (const std::string& bad :
       {frames + " " +
            shell_quoted(fs::path(MOLACCEL_SOURCE_DIR) / "data" / "orbital" / "threonine_631gs.molden"),
        frames + " --orbital homo --orbital lumo", frames + " --iso 5", shell_quoted(water()) + " --iso 5"}) {
    EXPECT_EQ(run(cli() + bad + " -o " + shell_quoted(dir / "bad.html")), 1) << bad;
    EXPECT_FALSE(fs::exists(dir / "bad.html")) << bad;
  }
  EXPECT_EQ(run(cli() + shell_quoted(water()) + " -o " + shell_quoted(dir / "bad.png")), 1);
  EXPECT_FALSE(fs::exists(dir / "bad.png"));
}

}  // namespace
}  // namespace molaccel::display

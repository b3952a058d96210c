// The library's display pipeline (orbital::display_fields) on the CPU against the calls it joins
// (evaluate_orbitals / evaluate_density, extract_isosurface, framing_of, render_scene): the same
// triangles, scenes and pictures; negation, densities, batches, bad input. And the commands'
// output groups as processes: a write failing in the middle of `orbital surface` (several files)
// or `orbital animate -o DIR` (PNG frames) leaves no new file and every older one as it was.

#include "display_test_util.hpp"
#include "molaccel/orbital_display.hpp"
#include "testing/processes.hpp"

namespace molaccel::orbital {
namespace {

namespace display = molaccel::display;

Wavefunction water() {
  return read_wavefunction(molaccel::testing::source_dir() / "data/orbital/h2o_631gs.molden");
}

display::Mesh surface_of(const Resources& r, const GridSpec& grid, const std::vector<float>& values,
                         float level, display::Inside inside) {
  const display::ScalarGrid view{grid.origin, grid.axes, grid.counts, values.data()};
  return display::extract_isosurface(r, view, level, inside, display::SurfaceBackend::cpu);
}

TEST(DisplayPipeline, OrbitalsEqualTheCallsItJoins) {
  const Resources cpu = Resources::cpu(2);
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.2);
  const OrbitalRef homo = parse_orbital("homo", wfn), lumo = parse_orbital("lumo", wfn);
  DisplayOptions options;
  options.framing = true;
  DisplayInfo info;
  const std::vector<DisplayResult> results =
      display_fields(cpu, {{&wfn, orbital_field(homo)}, {&wfn, orbital_field(lumo)}}, grid, options, &info);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(info.on_device);
  EXPECT_FALSE(display_on_device(cpu, options));
  EXPECT_EQ(info.surface_backend, "cpu");
  // The orbitals of one wavefunction are one grid request (screening is relative to the largest
  // coefficient of the request, so a request of one orbital may round differently).
  const std::vector<float> both = evaluate_orbitals(cpu, wfn, grid, {homo, lumo});
  const std::size_t n = grid.point_count();
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const std::vector<float> values(both.begin() + static_cast<std::ptrdiff_t>(i * n),
                                    both.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
    const display::Mesh positive = surface_of(cpu, grid, values, 0.05f, display::Inside::above);
    const display::Mesh negative = surface_of(cpu, grid, values, -0.05f, display::Inside::below);
    const DisplayResult& r = results[i];
    EXPECT_FLOAT_EQ(r.iso, 0.05f);
    ASSERT_GE(r.scene.parts.size(), 3u);
    EXPECT_EQ(r.scene.parts[0].name, "positive lobe");
    EXPECT_EQ(r.scene.parts[1].name, "negative lobe");
    EXPECT_EQ(r.scene.parts[0].mesh.indices, positive.indices);
    EXPECT_EQ(r.scene.parts[0].mesh.positions, positive.positions);
    EXPECT_EQ(r.scene.parts[1].mesh.indices, negative.indices);
    EXPECT_EQ(r.positive_triangles, positive.triangle_count());
    EXPECT_EQ(r.negative_triangles, negative.triangle_count());
    // Then the molecule: three balls (two elements) and the bonds, in bohr like the grid.
    EXPECT_EQ(r.scene.parts.size(), 2 + 3u);
    const display::Framing framing = display::framing_of(r.scene);
    EXPECT_EQ(r.framing.centre, framing.centre);
    EXPECT_EQ(r.framing.radius, framing.radius);
    EXPECT_TRUE(r.image.rgba.empty());
  }
}

TEST(DisplayPipeline, NegatedOrbitalSwapsTheLobesAndTheImageIsTheRenderersPicture) {
  const Resources cpu = Resources::cpu(2);
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.2);
  const OrbitalRef homo = parse_orbital("homo", wfn);
  DisplayOptions options;
  options.atoms = false;
  options.image = true;
  options.render.width = 96;
  options.render.height = 72;
  options.render.backend = display::RenderBackend::cpu;
  const auto results =
      display_fields(cpu, {{&wfn, orbital_field(homo)}, {&wfn, orbital_field(homo, true)}}, grid, options);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].positive_triangles, results[0].negative_triangles);
  EXPECT_EQ(results[1].negative_triangles, results[0].positive_triangles);
  EXPECT_EQ(results[0].scene.parts.size(), 2u);  // --no-atoms: the lobes only
  // The image is render_scene's of the returned scene, exactly (the same CPU rasteriser).
  const display::Image expected = display::render_scene(results[0].scene, options.render);
  EXPECT_EQ(results[0].image.width, 96);
  EXPECT_EQ(results[0].image.rgba, expected.rgba);
  // Without meshes the scene is left empty, the image and counts stay.
  options.meshes = false;
  const auto bare = display_fields(cpu, {{&wfn, orbital_field(homo)}}, grid, options);
  EXPECT_TRUE(bare[0].scene.parts.empty());
  EXPECT_EQ(bare[0].image.rgba, expected.rgba);
  EXPECT_EQ(bare[0].positive_triangles, results[0].positive_triangles);
}

// Into a kept results vector (resized to the items), the same results as returned ones.
TEST(DisplayPipeline, IntoKeptResultsAsReturned) {
  const Resources cpu = Resources::cpu(2);
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.3);
  DisplayOptions options;
  options.iso = 0.03;
  options.image = true;
  options.render.width = 48;
  options.render.height = 32;
  const std::vector<DisplayItem> items{{&wfn, orbital_field({Spin::alpha, 3})},
                                       {&wfn, orbital_field({Spin::alpha, 4})}};
  const auto returned = display_fields(cpu, items, grid, options);
  std::vector<DisplayResult> kept(5);
  kept[0].image.rgba.assign(7, 1);
  for (int round = 0; round < 2; ++round) {
    display_fields(cpu, items, grid, options, kept);
    ASSERT_EQ(kept.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(kept[i].image.rgba, returned[i].image.rgba);
      EXPECT_EQ(kept[i].positive_triangles, returned[i].positive_triangles);
      ASSERT_EQ(kept[i].scene.parts.size(), returned[i].scene.parts.size());
      EXPECT_EQ(kept[i].scene.parts[0].mesh.indices, returned[i].scene.parts[0].mesh.indices);
    }
  }
  display_fields(cpu, {}, grid, options, kept);
  EXPECT_TRUE(kept.empty());
}

TEST(DisplayPipeline, DensityIsOneSurfaceAndBatchesKeepItemOrder) {
  const Resources cpu = Resources::cpu(2);
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.3);
  // 12 orbitals (more than one grid request of the host path), a density in the middle.
  std::vector<DisplayItem> items;
  for (std::size_t i = 0; i < 12; ++i) {
    if (i == 6) items.push_back({&wfn, density_field(DensityKind::total)});
    items.push_back({&wfn, orbital_field({Spin::alpha, i})});
  }
  DisplayOptions options;
  options.iso = 0.02;
  const auto results = display_fields(cpu, items, grid, options);
  ASSERT_EQ(results.size(), items.size());
  const std::vector<float> rho = evaluate_density(cpu, wfn, grid);
  const display::Mesh surface = surface_of(cpu, grid, rho, 0.02f, display::Inside::above);
  EXPECT_EQ(results[6].scene.parts[0].name, "surface");
  EXPECT_EQ(results[6].scene.parts[0].mesh.indices, surface.indices);
  EXPECT_EQ(results[6].negative_triangles, 0u);
  // The orbitals before and after the density are two grid requests, as display_fields makes them.
  const std::size_t n = grid.point_count();
  for (std::size_t group = 0; group < 2; ++group) {
    std::vector<OrbitalRef> refs;
    for (std::size_t i = 0; i < 6; ++i) refs.push_back({Spin::alpha, 6 * group + i});
    const std::vector<float> values = evaluate_orbitals(cpu, wfn, grid, refs);
    for (std::size_t i = 0; i < 6; ++i) {
      SCOPED_TRACE(6 * group + i);
      const std::vector<float> one(values.begin() + static_cast<std::ptrdiff_t>(i * n),
                                   values.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
      const DisplayResult& r = results[group == 0 ? i : 7 + i];
      EXPECT_EQ(r.positive_triangles,
                surface_of(cpu, grid, one, 0.02f, display::Inside::above).triangle_count());
      EXPECT_EQ(r.negative_triangles,
                surface_of(cpu, grid, one, -0.02f, display::Inside::below).triangle_count());
    }
  }
}

TEST(DisplayPipeline, NoSurfaceNamesTheFirstFieldAndBadInputThrows) {
  const Resources cpu = Resources::cpu(2);
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.3);
  DisplayOptions options;
  options.iso = 5;
  DisplayItem named{&wfn, orbital_field(parse_orbital("homo", wfn))};
  named.field.description = "frame 7";
  try {
    (void)display_fields(cpu, {named, {&wfn, density_field(DensityKind::total)}}, grid, options);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("frame 7: no surface at +/-5"), std::string::npos) << e.what();
  }
  options.iso = -1;
  EXPECT_THROW((void)display_fields(cpu, {named}, grid, options), InputError);
  options.iso = 0;
  EXPECT_THROW((void)display_fields(cpu, {{&wfn, orbital_field({Spin::alpha, 999})}}, grid, options),
               InputError);
  EXPECT_THROW((void)display_fields(cpu, {{&wfn, orbital_field({Spin::beta, 0})}}, grid, options),
               InputError);
  options.image = true;
  options.render.width = 0;
  EXPECT_THROW((void)display_fields(cpu, {named}, grid, options), InputError);
  EXPECT_TRUE(display_fields(cpu, {}, grid, options).empty());
}

// ---------------------------------------------------------------------------------------------
// Output groups of the commands, as processes.
// ---------------------------------------------------------------------------------------------
using molaccel::testing::quoted;

// The CLI with files limited to `kib` KiB (0: no limit).
int run_limited(const std::string& arguments, int kib) {
  return molaccel::testing::exit_code_with_file_limit(MOLACCEL_CLI_PATH, arguments, kib);
}

std::map<std::string, std::string> contents(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    out[entry.path().filename().string()] = molaccel::testing::read_file(entry.path());
  return out;
}

class DisplayOutputGroups : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOLACCEL_CLI_PATH).empty()) GTEST_SKIP() << "no orbital engine in this build";
  }
};

// Three orbitals, one file each: the core orbital's lobe (about 11 KB of PLY) fits under a 64 KiB
// limit, the HOMO's (about 125 KB) does not, so the run fails at its second file.
TEST_F(DisplayOutputGroups, SurfaceFailingAtItsSecondFileLeavesTheOldFiles) {
  molaccel::testing::TempDir dir;
  const std::string command =
      "orbital surface " + quoted(molaccel::testing::source_dir() / "data/orbital/h2o_631gs.molden") +
      " --device cpu --spacing 0.2 --no-atoms --orbital 1 --orbital homo --orbital lumo -o " +
      quoted(dir / "x.ply");
  ASSERT_EQ(run_limited(command, 0), 0);
  ASSERT_LT(std::filesystem::file_size(dir / "x.1.ply"), 64u << 10);
  ASSERT_GT(std::filesystem::file_size(dir / "x.homo.ply"), 64u << 10);
  std::filesystem::remove(dir / "x.lumo.ply");
  molaccel::testing::write_file(dir / "x.1.ply", "old 1");
  molaccel::testing::write_file(dir / "x.homo.ply", "old homo");
  const auto before = contents(dir.path());
  EXPECT_EQ(run_limited(command, 64), 4);
  EXPECT_EQ(contents(dir.path()), before);  // no new file, no temporary, the old ones unchanged
  // Without the limit all three appear.
  ASSERT_EQ(run_limited(command, 0), 0);
  EXPECT_EQ(contents(dir.path()).size(), 3u);
  EXPECT_NE(contents(dir.path())["x.1.ply"], "old 1");
}

// Frames 1 and 3 are water, frame 2 the molecule with a stretched bond, whose picture compresses
// less: a limit just above frame 1's PNG stops the run at frame 2.
TEST_F(DisplayOutputGroups, AnimateFailingAtItsSecondFrameLeavesTheOldFrames) {
  molaccel::testing::TempDir dir;
  const auto molden = molaccel::testing::source_dir() / "data/orbital/h2o_631gs.molden";
  std::string moved = molaccel::testing::read_file(molden);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"0.221097956679", "0.421097956679"},
                                 {"-0.882502100589", "-0.682502100589"}})
    for (std::size_t at = moved.find(from); at != std::string::npos; at = moved.find(from, at + 1))
      moved.replace(at, from.size(), to);
  molaccel::testing::write_file(dir / "moved.molden", moved);
  const auto frames = dir / "frames";
  auto animate = [&](const std::filesystem::path& out) {
    return "orbital animate --as-listed --device cpu --spacing 0.2 --size 640x480 " + quoted(molden) + " " +
           quoted(dir / "moved.molden") + " " + quoted(molden) + " -o " +
           quoted(std::filesystem::path(out.string() + "/"));
  };
  ASSERT_EQ(run_limited(animate(frames), 0), 0);
  const auto first = std::filesystem::file_size(frames / "frame_0001.png");
  const int kib = static_cast<int>((first + 1023) / 1024);
  ASSERT_GT(std::filesystem::file_size(frames / "frame_0002.png"), static_cast<std::uintmax_t>(kib) << 10);
  std::filesystem::remove(frames / "frame_0003.png");
  molaccel::testing::write_file(frames / "frame_0001.png", "old 1");
  molaccel::testing::write_file(frames / "frame_0002.png", "old 2");
  const auto before = contents(frames);
  EXPECT_EQ(run_limited(animate(frames), kib), 4);
  EXPECT_EQ(contents(frames), before);
  // A folder the failed run made is removed again.
  EXPECT_EQ(run_limited(animate(dir / "fresh"), kib), 4);
  EXPECT_FALSE(std::filesystem::exists(dir / "fresh"));
}

}  // namespace
}  // namespace molaccel::orbital

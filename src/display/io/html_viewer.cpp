// The offline HTML viewer: the page (html_viewer.html, compiled in by CMake) with the frames'
// meshes as quantised, base64-encoded arrays in its JSON scene block. Format: display.hpp.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "html_viewer_page.hpp"  // generated: kViewerPage
#include "molaccel/display.hpp"

namespace molaccel::display {
namespace {

constexpr std::string_view kSceneMarker = "MOLACCEL_SCENE_JSON";
static_assert(kViewerPage.find(kSceneMarker) != std::string_view::npos &&
              kViewerPage.find(kSceneMarker) == kViewerPage.rfind(kSceneMarker));

std::string base64(const std::string& bytes) {
  static constexpr char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 3; ++k)
      v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (std::size_t k = 0; k < 4; ++k) out += k <= n ? digits[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out += static_cast<char>((v >> (8 * b)) & 0xff);
}

nlohmann::json encode_part(const std::filesystem::path& path, const ScenePart& part) {
  const Mesh& m = part.mesh;
  if (m.positions.size() != m.normals.size())
    throw Error(fmt::format("{}: part '{}' has {} positions and {} normals", path.string(), part.name,
                            m.positions.size() / 3, m.normals.size() / 3));
  const std::size_t n = m.vertex_count();
  std::array<double, 3> lo, extent;
  for (int x = 0; x < 3; ++x) {
    double low = std::numeric_limits<double>::infinity(), high = -low;
    for (std::size_t v = 0; v < n; ++v) {
      low = std::min(low, static_cast<double>(m.positions[3 * v + x]));
      high = std::max(high, static_cast<double>(m.positions[3 * v + x]));
    }
    lo[x] = low;
    extent[x] = high - low;
  }
  std::string positions, normals, indices;
  positions.reserve(6 * n);
  normals.reserve(3 * n);
  for (std::size_t v = 0; v < n; ++v)
    for (int x = 0; x < 3; ++x) {
      const double t = extent[x] > 0 ? (m.positions[3 * v + x] - lo[x]) / extent[x] : 0.0;
      put_le(positions, static_cast<std::uint64_t>(std::clamp(std::lround(t * 65535), 0L, 65535L)), 2);
      const long q = std::clamp(std::lround(127.0 * m.normals[3 * v + x]), -127L, 127L);
      normals += static_cast<char>(static_cast<std::int8_t>(q));
    }
  const int index_bytes = n <= 65536 ? 2 : 4;
  indices.reserve(static_cast<std::size_t>(index_bytes) * m.indices.size());
  for (std::uint32_t i : m.indices) {
    if (i >= n)
      throw Error(fmt::format("{}: part '{}' indexes vertex {} of {}", path.string(), part.name, i, n));
    put_le(indices, i, index_bytes);
  }
  return {{"name", part.name},
          {"colour", {part.colour.r, part.colour.g, part.colour.b, part.colour.a}},
          {"vertex_count", n},
          {"triangle_count", m.triangle_count()},
          {"origin", lo},
          {"extent", extent},
          {"positions", base64(positions)},
          {"normals", base64(normals)},
          {"index_bytes", index_bytes},
          {"indices", base64(indices)}};
}

}  // namespace

void write_html_viewer(const std::filesystem::path& path, const std::vector<Scene>& frames,
                       const ViewerOptions& options) {
  if (frames.empty()) throw InputError(path.string(), 0, "nothing to show: no frame");
  if (!options.frame_labels.empty() && options.frame_labels.size() != frames.size())
    throw InputError(
        path.string(), 0,
        fmt::format("{} frame labels for {} frames", options.frame_labels.size(), frames.size()));
  if (options.frames_per_second < 1 || options.frames_per_second > 240)
    throw InputError("--fps", 0, fmt::format("must be 1..240 (got {})", options.frames_per_second));
  Framing framing = options.framing;
  nlohmann::json encoded = nlohmann::json::array();
  for (std::size_t f = 0; f < frames.size(); ++f) {
    nlohmann::json parts = nlohmann::json::array();
    for (const ScenePart& part : frames[f].parts)
      if (!part.mesh.empty()) parts.push_back(encode_part(path, part));
    if (parts.empty()) throw InputError(path.string(), 0, fmt::format("frame {} has no triangle", f + 1));
    if (options.framing.radius <= 0) framing = enclose(framing, framing_of(frames[f]));
    encoded.push_back(
        {{"label", options.frame_labels.empty() ? fmt::format("frame {}", f + 1) : options.frame_labels[f]},
         {"parts", std::move(parts)}});
  }
  const View& v = options.view;
  const nlohmann::json scene = {
      {"format", "molaccel-viewer"},
      {"version", 1},
      {"title", options.title.empty() ? std::string("molaccel viewer") : options.title},
      {"background", {options.background.r, options.background.g, options.background.b}},
      {"view", {{"rx", v.rotate_x}, {"ry", v.rotate_y}, {"rz", v.rotate_z}, {"zoom", v.zoom}}},
      {"framing", {{"centre", framing.centre}, {"radius", framing.radius}}},
      {"fps", options.frames_per_second},
      {"frames", std::move(encoded)}};
  // Inside a <script> element the text must not close it: '<' only occurs in strings, where
  // \u003c is the same character.
  std::string json;
  for (char c : scene.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) {
    if (c == '<')
      json += "\\u003c";
    else
      json += c;
  }
  const std::size_t at = kViewerPage.find(kSceneMarker);
  std::string page;
  page.reserve(kViewerPage.size() + json.size());
  page.append(kViewerPage.substr(0, at)).append(json).append(kViewerPage.substr(at + kSceneMarker.size()));
  write_file_atomically(path, [&](std::FILE* f) {
    errno = 0;
    if (std::fwrite(page.data(), 1, page.size(), f) != page.size())
      throw InputError(path.string(), 0, fmt::format("write failed: {}", std::strerror(errno ? errno : EIO)));
  });
}

}  // namespace molaccel::display

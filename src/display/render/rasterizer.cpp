// The CPU renderer: an orthographic camera fitted to the scene's bounding sphere; triangles binned
// to bands of rows, each band rasterised on a thread with edge functions into its own z-buffer at
// `supersampling`^2 samples per pixel keeping the nearest fragment's normal, then shaded once per
// sample (Blinn-Phong, two-sided: a face seen from behind is lit as its front) and box-filtered
// down to the image.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numbers>

#include "molaccel/display.hpp"

namespace molaccel::display {
namespace {

using Vec3 = std::array<double, 3>;

double dot(const Vec3& a, const Vec3& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
Vec3 normalised(Vec3 v) {
  const double l = std::sqrt(dot(v, v));
  return l > 0 ? Vec3{v[0] / l, v[1] / l, v[2] / l} : Vec3{0, 0, 1};
}

// Rows of R = Rz * Ry * Rx.
std::array<Vec3, 3> rotation(const View& v) {
  const double d = std::numbers::pi / 180;
  const double cx = std::cos(v.rotate_x * d), sx = std::sin(v.rotate_x * d);
  const double cy = std::cos(v.rotate_y * d), sy = std::sin(v.rotate_y * d);
  const double cz = std::cos(v.rotate_z * d), sz = std::sin(v.rotate_z * d);
  const std::array<Vec3, 3> rx{{{1, 0, 0}, {0, cx, -sx}, {0, sx, cx}}};
  const std::array<Vec3, 3> ry{{{cy, 0, sy}, {0, 1, 0}, {-sy, 0, cy}}};
  const std::array<Vec3, 3> rz{{{cz, -sz, 0}, {sz, cz, 0}, {0, 0, 1}}};
  auto multiply = [](const std::array<Vec3, 3>& a, const std::array<Vec3, 3>& b) {
    std::array<Vec3, 3> c{};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 3; ++k) c[i][j] += a[i][k] * b[k][j];
    return c;
  };
  return multiply(rz, multiply(ry, rx));
}

struct Shaded {
  double x, y, z;  // sample coordinates (x right, y down), z towards the viewer
  Vec3 normal;     // view space
};

}  // namespace

Framing framing_of(const Scene& scene) {
  Vec3 lo{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
          std::numeric_limits<double>::infinity()};
  Vec3 hi{-lo[0], -lo[1], -lo[2]};
  bool any = false;
  for (const ScenePart& part : scene.parts)
    for (std::size_t v = 0; v < part.mesh.vertex_count(); ++v) {
      any = true;
      for (int x = 0; x < 3; ++x) {
        lo[x] = std::min(lo[x], static_cast<double>(part.mesh.positions[3 * v + x]));
        hi[x] = std::max(hi[x], static_cast<double>(part.mesh.positions[3 * v + x]));
      }
    }
  Framing f;
  if (!any) return f;
  f.centre = {(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2};
  for (const ScenePart& part : scene.parts)
    for (std::size_t v = 0; v < part.mesh.vertex_count(); ++v) {
      const Vec3 d{part.mesh.positions[3 * v] - f.centre[0], part.mesh.positions[3 * v + 1] - f.centre[1],
                   part.mesh.positions[3 * v + 2] - f.centre[2]};
      f.radius = std::max(f.radius, std::sqrt(dot(d, d)));
    }
  return f;
}

Framing enclose(const Framing& a, const Framing& b) {
  if (a.radius <= 0) return b;
  if (b.radius <= 0) return a;
  const Vec3 d{b.centre[0] - a.centre[0], b.centre[1] - a.centre[1], b.centre[2] - a.centre[2]};
  const double distance = std::sqrt(dot(d, d));
  if (distance + b.radius <= a.radius) return a;
  if (distance + a.radius <= b.radius) return b;
  const double radius = (distance + a.radius + b.radius) / 2;
  const double shift = (radius - a.radius) / distance;  // from a's centre towards b's
  return {{a.centre[0] + shift * d[0], a.centre[1] + shift * d[1], a.centre[2] + shift * d[2]}, radius};
}

View parse_view(std::string_view text) {
  View view;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    const std::size_t eq = item.find('=');
    double value = 0;
    bool ok = eq != std::string_view::npos;
    if (ok) {
      const std::string number(item.substr(eq + 1));
      char* stop = nullptr;
      value = std::strtod(number.c_str(), &stop);
      ok = !number.empty() && stop == number.c_str() + number.size() && std::isfinite(value);
    }
    const std::string_view key = ok ? item.substr(0, eq) : std::string_view{};
    if (key == "rx")
      view.rotate_x = value;
    else if (key == "ry")
      view.rotate_y = value;
    else if (key == "rz")
      view.rotate_z = value;
    else if (key == "zoom" && value > 0)
      view.zoom = value;
    else
      throw InputError(
          "--view", 0,
          fmt::format("'{}': expected rx=DEG, ry=DEG, rz=DEG or zoom=FACTOR (> 0), comma-separated", item));
    start = end + 1;
  }
  return view;
}

std::array<int, 2> parse_image_size(std::string_view text) {
  const std::size_t x = text.find('x');
  int w = 0, h = 0;
  bool ok = x != std::string_view::npos;
  if (ok) {
    auto [p1, e1] = std::from_chars(text.data(), text.data() + x, w);
    auto [p2, e2] = std::from_chars(text.data() + x + 1, text.data() + text.size(), h);
    ok = e1 == std::errc() && p1 == text.data() + x && e2 == std::errc() && p2 == text.data() + text.size();
  }
  if (!ok || w < 1 || h < 1 || w > 16384 || h > 16384)
    throw InputError("--size", 0,
                     fmt::format("'{}': expected WIDTHxHEIGHT, each 1..16384 (e.g. 1920x1080)", text));
  return {w, h};
}

Image render_scene(const Scene& scene, const RenderOptions& options) {
  if (options.width < 1 || options.height < 1 || options.width > 16384 || options.height > 16384)
    throw InputError("--size", 0,
                     fmt::format("{} x {}: each side must be 1..16384", options.width, options.height));
  const int ss = std::clamp(options.supersampling, 1, 4);
  const int W = options.width * ss, H = options.height * ss;

  std::size_t triangles = 0;
  for (const ScenePart& part : scene.parts) triangles += part.mesh.triangle_count();
  if (triangles == 0) throw InputError("render", 0, "nothing to draw: the scene has no triangle");
  const Framing framing = options.framing.radius > 0 ? options.framing : framing_of(scene);
  const Vec3 centre = framing.centre;
  const double radius = std::max(framing.radius, 1e-6);
  // The sphere's diameter spans 90% of the shorter side at zoom 1.
  const double scale = 0.45 * std::min(W, H) / radius * options.view.zoom;
  const auto R = rotation(options.view);

  // Lighting in view space: a key light from the upper left front, Blinn-Phong with a white
  // specular highlight; the viewer looks down -z.
  const Vec3 light = normalised({-0.4, 0.5, 0.75});  // y up in view space
  const Vec3 half = normalised({light[0], light[1], light[2] + 1});
  const double ambient = 0.28, diffuse = 0.62, specular = 0.35, shininess = 48;

  // Vertices in sample coordinates.
  std::vector<std::vector<Shaded>> vertices(scene.parts.size());
  for (std::size_t part = 0; part < scene.parts.size(); ++part) {
    const Mesh& m = scene.parts[part].mesh;
    vertices[part].resize(m.vertex_count());
    for (std::size_t v = 0; v < m.vertex_count(); ++v) {
      const Vec3 p{m.positions[3 * v] - centre[0], m.positions[3 * v + 1] - centre[1],
                   m.positions[3 * v + 2] - centre[2]};
      const Vec3 n{m.normals[3 * v], m.normals[3 * v + 1], m.normals[3 * v + 2]};
      const Vec3 q{dot(R[0], p), dot(R[1], p), dot(R[2], p)};
      vertices[part][v] = {
          W / 2.0 + q[0] * scale, H / 2.0 - q[1] * scale, q[2], {dot(R[0], n), dot(R[1], n), dot(R[2], n)}};
    }
  }
  // Bands of image rows, drawn independently on threads: each triangle is listed in the bands its
  // rows cover, in scene order, so the picture does not depend on the thread count.
  constexpr int kBandRows = 8;
  const int bands = (options.height + kBandRows - 1) / kBandRows;
  struct TriangleRef {
    std::uint32_t part, triangle;
  };
  std::vector<std::vector<TriangleRef>> binned(static_cast<std::size_t>(bands));
  for (std::size_t part = 0; part < scene.parts.size(); ++part) {
    const Mesh& m = scene.parts[part].mesh;
    for (std::size_t t = 0; t < m.triangle_count(); ++t) {
      const Shaded& a = vertices[part][m.indices[3 * t]];
      const Shaded& b = vertices[part][m.indices[3 * t + 1]];
      const Shaded& c = vertices[part][m.indices[3 * t + 2]];
      const double lo = std::min({a.y, b.y, c.y}), hi = std::max({a.y, b.y, c.y});
      if (hi < 0 || lo >= H || std::max({a.x, b.x, c.x}) < 0 || std::min({a.x, b.x, c.x}) >= W) continue;
      const int first = std::max(0, static_cast<int>(std::floor(lo)) / (kBandRows * ss));
      const int last = std::min(bands - 1, static_cast<int>(std::ceil(hi)) / (kBandRows * ss));
      for (int band = first; band <= last; ++band)
        binned[static_cast<std::size_t>(band)].push_back(
            {static_cast<std::uint32_t>(part), static_cast<std::uint32_t>(t)});
    }
  }

  Image image;
  image.width = options.width;
  image.height = options.height;
  image.rgba.resize(static_cast<std::size_t>(image.width) * image.height * 4);
  parallel_for(
      static_cast<std::size_t>(bands), options.threads, 1, [&](std::size_t band_begin, std::size_t band_end) {
        const std::size_t samples = static_cast<std::size_t>(W) * kBandRows * ss;
        std::vector<float> depth(samples);
        std::vector<std::array<float, 3>> normal(samples);
        std::vector<std::int32_t> owner(samples);
        for (std::size_t band = band_begin; band < band_end; ++band) {
          const int row0 = static_cast<int>(band) * kBandRows * ss;
          const int row1 = std::min(H, row0 + kBandRows * ss);  // sample rows [row0, row1)
          std::fill(depth.begin(), depth.end(), -std::numeric_limits<float>::infinity());
          std::fill(owner.begin(), owner.end(), -1);
          // Depth pass: the nearest fragment's normal and part per sample (shaded once, below).
          for (const TriangleRef& ref : binned[band]) {
            const Mesh& m = scene.parts[ref.part].mesh;
            const Shaded& a = vertices[ref.part][m.indices[3 * ref.triangle]];
            const Shaded& b = vertices[ref.part][m.indices[3 * ref.triangle + 1]];
            const Shaded& c = vertices[ref.part][m.indices[3 * ref.triangle + 2]];
            const double area = (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x);
            if (area == 0) continue;
            const int x0 = std::max(0, static_cast<int>(std::floor(std::min({a.x, b.x, c.x}))));
            const int x1 = std::min(W - 1, static_cast<int>(std::ceil(std::max({a.x, b.x, c.x}))));
            const int y0 = std::max(row0, static_cast<int>(std::floor(std::min({a.y, b.y, c.y}))));
            const int y1 = std::min(row1 - 1, static_cast<int>(std::ceil(std::max({a.y, b.y, c.y}))));
            for (int y = y0; y <= y1; ++y)
              for (int x = x0; x <= x1; ++x) {
                const double px = x + 0.5, py = y + 0.5;
                // Barycentric weights from edge functions (either winding is drawn).
                const double wa = ((b.x - px) * (c.y - py) - (b.y - py) * (c.x - px)) / area;
                const double wb = ((c.x - px) * (a.y - py) - (c.y - py) * (a.x - px)) / area;
                const double wc = 1 - wa - wb;
                if (wa < 0 || wb < 0 || wc < 0) continue;
                const double z = wa * a.z + wb * b.z + wc * c.z;
                const std::size_t p = static_cast<std::size_t>(y - row0) * W + x;
                if (z <= depth[p]) continue;
                depth[p] = static_cast<float>(z);
                owner[p] = static_cast<std::int32_t>(ref.part);
                for (int k = 0; k < 3; ++k)
                  normal[p][k] = static_cast<float>(wa * a.normal[k] + wb * b.normal[k] + wc * c.normal[k]);
              }
          }
          // Shading and the box filter down to image pixels.
          for (int y = row0 / ss; y < (row1 + ss - 1) / ss; ++y)
            for (int x = 0; x < image.width; ++x) {
              double sum[3] = {0, 0, 0};
              for (int sy = 0; sy < ss; ++sy)
                for (int sx = 0; sx < ss; ++sx) {
                  const std::size_t p = static_cast<std::size_t>(y * ss + sy - row0) * W + (x * ss + sx);
                  if (owner[p] < 0) {
                    sum[0] += options.background.r;
                    sum[1] += options.background.g;
                    sum[2] += options.background.b;
                    continue;
                  }
                  const Colour& base = scene.parts[static_cast<std::size_t>(owner[p])].colour;
                  Vec3 n = normalised({normal[p][0], normal[p][1], normal[p][2]});
                  if (n[2] < 0) n = {-n[0], -n[1], -n[2]};  // two-sided
                  const double d = std::max(0.0, dot(n, light));
                  const double s = d > 0 ? std::pow(std::max(0.0, dot(n, half)), shininess) : 0.0;
                  const double rgb[3] = {base.r, base.g, base.b};
                  for (int k = 0; k < 3; ++k)
                    sum[k] += std::min(1.0, rgb[k] * (ambient + diffuse * d) + specular * s);
                }
              std::uint8_t* out = &image.rgba[4 * (static_cast<std::size_t>(y) * image.width + x)];
              for (int k = 0; k < 3; ++k)
                out[k] = static_cast<std::uint8_t>(std::lround(255.0 * sum[k] / (ss * ss)));
              out[3] = 255;
            }
        }
      });
  return image;
}

}  // namespace molaccel::display

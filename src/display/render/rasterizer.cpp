// The CPU renderer and the renderers' front (backend choice, options). The CPU renderer: an orthographic
// camera fitted to the scene's bounding sphere; triangles binned to bands of rows, each band rasterised on a
// thread with edge functions into its own z-buffer at `supersampling`^2 samples per pixel keeping the nearest
// fragment's normal, then shaded once per sample (Blinn-Phong, two-sided: a face seen from behind is lit as
// its front) and box-filtered down to the image.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>

#include "display/render/render_backends.hpp"

namespace molaccel::display {
namespace {

using Vec3 = std::array<double, 3>;

double dot(const Vec3& a, const Vec3& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
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

namespace detail {

void check_render_size(const RenderOptions& options) {
  if (options.width < 1 || options.height < 1 || options.width > 16384 || options.height > 16384)
    throw InputError("--size", 0,
                     fmt::format("{} x {}: each side must be 1..16384", options.width, options.height));
}

int samples_per_axis(const RenderOptions& options) {
  return std::clamp(options.supersampling, 1, 4);
}

Camera make_camera(const Framing& framing, const RenderOptions& options) {
  const int ss = samples_per_axis(options);
  const int W = options.width * ss, H = options.height * ss;
  Camera c{};
  const auto R = rotation(options.view);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) c.rotation[i][j] = R[i][j];
  for (int x = 0; x < 3; ++x) c.centre[x] = framing.centre[x];
  c.width = W;
  c.height = H;
  // The sphere's diameter spans 90% of the shorter side at zoom 1.
  c.scale = camera_scale(0.45 * std::min(W, H), framing.radius, options.view.zoom);
  return c;
}

}  // namespace detail

namespace {

Image render_cpu(const Scene& scene, const RenderOptions& options) {
  const int ss = detail::samples_per_axis(options);
  const int W = options.width * ss, H = options.height * ss;
  const Framing framing = options.framing.radius > 0 ? options.framing : framing_of(scene);
  const detail::Camera camera = detail::make_camera(framing, options);
  const detail::Lighting lighting = detail::default_lighting();

  // Vertices in sample coordinates.
  std::vector<std::vector<detail::SampleVertex>> vertices(scene.parts.size());
  for (std::size_t part = 0; part < scene.parts.size(); ++part) {
    const Mesh& m = scene.parts[part].mesh;
    vertices[part].resize(m.vertex_count());
    for (std::size_t v = 0; v < m.vertex_count(); ++v)
      vertices[part][v] = detail::to_samples(camera, &m.positions[3 * v], &m.normals[3 * v]);
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
      const auto& a = vertices[part][m.indices[3 * t]];
      const auto& b = vertices[part][m.indices[3 * t + 1]];
      const auto& c = vertices[part][m.indices[3 * t + 2]];
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
            const auto& a = vertices[ref.part][m.indices[3 * ref.triangle]];
            const auto& b = vertices[ref.part][m.indices[3 * ref.triangle + 1]];
            const auto& c = vertices[ref.part][m.indices[3 * ref.triangle + 2]];
            const double area = detail::edge_area(a, b, c);
            if (area == 0) continue;
            const int x0 = std::max(0, static_cast<int>(std::floor(std::min({a.x, b.x, c.x}))));
            const int x1 = std::min(W - 1, static_cast<int>(std::ceil(std::max({a.x, b.x, c.x}))));
            const int y0 = std::max(row0, static_cast<int>(std::floor(std::min({a.y, b.y, c.y}))));
            const int y1 = std::min(row1 - 1, static_cast<int>(std::ceil(std::max({a.y, b.y, c.y}))));
            for (int y = y0; y <= y1; ++y)
              for (int x = x0; x <= x1; ++x) {
                double w[3];
                if (!detail::covers(a, b, c, area, x + 0.5, y + 0.5, w)) continue;
                const double z = w[0] * a.z + w[1] * b.z + w[2] * c.z;
                const std::size_t p = static_cast<std::size_t>(y - row0) * W + x;
                if (z <= depth[p]) continue;
                depth[p] = static_cast<float>(z);
                owner[p] = static_cast<std::int32_t>(ref.part);
                detail::interpolate_normal(a, b, c, w, normal[p].data());
              }
          }
          // Shading and the box filter down to image pixels.
          const float background[3] = {options.background.r, options.background.g, options.background.b};
          for (int y = row0 / ss; y < (row1 + ss - 1) / ss; ++y)
            for (int x = 0; x < image.width; ++x) {
              double sum[3] = {0, 0, 0};
              for (int sy = 0; sy < ss; ++sy)
                for (int sx = 0; sx < ss; ++sx) {
                  const std::size_t p = static_cast<std::size_t>(y * ss + sy - row0) * W + (x * ss + sx);
                  if (owner[p] < 0) {
                    for (int k = 0; k < 3; ++k) sum[k] += background[k];
                    continue;
                  }
                  const Colour& base = scene.parts[static_cast<std::size_t>(owner[p])].colour;
                  const float rgb[3] = {base.r, base.g, base.b};
                  detail::shade(lighting, normal[p].data(), rgb, sum);
                }
              std::uint8_t* out = &image.rgba[4 * (static_cast<std::size_t>(y) * image.width + x)];
              for (int k = 0; k < 3; ++k) out[k] = detail::to_byte(sum[k], ss * ss);
              out[3] = 255;
            }
        }
      });
  return image;
}

}  // namespace

#if !MOLACCEL_HAVE_CUDA
namespace cuda {
Image render_on_device(WorkerContext&, const std::vector<DevicePart>&, const Scene&, const RenderOptions&,
                       void*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA renderer (this build has no CUDA)");
}
void render_on_device(WorkerContext&, const std::vector<DevicePart>&, const Scene&, const RenderOptions&,
                      Image&, void*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA renderer (this build has no CUDA)");
}
Framing framing_on_device(WorkerContext&, const std::vector<DevicePart>&, const Scene&, void*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA renderer (this build has no CUDA)");
}
}  // namespace cuda
#endif

std::string_view to_string(RenderBackend backend) {
  switch (backend) {
    case RenderBackend::automatic:
      return "auto";
    case RenderBackend::cpu:
      return "cpu";
    case RenderBackend::cuda:
      return "cuda";
  }
  return "?";
}

RenderBackend parse_render_backend(std::string_view text) {
  for (RenderBackend b : {RenderBackend::automatic, RenderBackend::cpu, RenderBackend::cuda})
    if (text == to_string(b)) return b;
  if (text == "gpu") return RenderBackend::cuda;
  throw InputError("--render-backend", 0, fmt::format("unknown renderer '{}' (auto, cpu, cuda)", text));
}

namespace {
void check_scene(const Scene& scene, const RenderOptions& options) {
  detail::check_render_size(options);
  std::size_t triangles = 0;
  for (const ScenePart& part : scene.parts) triangles += part.mesh.triangle_count();
  if (triangles == 0) throw InputError("render", 0, "nothing to draw: the scene has no triangle");
}
}  // namespace

Image render_scene(const Scene& scene, const RenderOptions& options) {
  check_scene(scene, options);
  if (options.backend != RenderBackend::cuda) return render_cpu(scene, options);
  WorkerInfo gpu;
  gpu.kind = WorkerInfo::Kind::gpu;
  gpu.device = 0;
  WorkerContext ctx(gpu);
  return cuda::render_on_device(ctx, {}, scene, options, nullptr);
}

Image render_scene(const Resources& resources, const Scene& scene, const RenderOptions& options,
                   RenderInfo* info) {
  check_scene(scene, options);
  RenderBackend backend = options.backend;
  if (backend == RenderBackend::automatic)
    backend = resources.uses_gpu() ? RenderBackend::cuda : RenderBackend::cpu;
  if (backend == RenderBackend::cuda && !resources.uses_gpu())
    throw DeviceUnavailable("--render-backend cuda: the selected devices have no GPU (use --device gpu)",
                            __FILE__, __LINE__);
  const auto start = std::chrono::steady_clock::now();
  Image image;
  if (backend == RenderBackend::cpu) {
    RenderOptions o = options;
    if (o.threads == 0) o.threads = resources.cpu_threads();
    image = render_cpu(scene, o);
  } else {
    // One tile on the scheduler: a GPU worker keeps its device buffers from call to call; a CPU
    // worker beside the GPUs draws with the CPU rasteriser.
    JobOptions job;
    job.name = "render";
    job.progress_bar = false;
    run_tiles(
        resources, 1,
        [&](WorkerContext& ctx, std::size_t) {
          image = ctx.worker().kind == WorkerInfo::Kind::gpu
                      ? cuda::render_on_device(ctx, {}, scene, options, nullptr)
                      : render_cpu(scene, options);
        },
        job);
  }
  if (info) {
    info->backend = std::string(to_string(backend));
    info->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return image;
}

}  // namespace molaccel::display

// The CUDA rasteriser: render_scene's CPU algorithm in four kernels on the GPU that holds the
// meshes (the lobes straight from the isosurface kernels, in device memory).
//   gather: every part's vertices and triangles into one list (device parts copied on the device,
//     host parts uploaded), triangle indices shifted to the joined vertex list;
//   fit (automatic framing only): the bounding box and the farthest vertex from its centre, as
//     framing_of computes them (exact: float minima and maxima, double distances), reduced per
//     block and then with atomics on order-preserving integer codes;
//   transform: each vertex into sample coordinates (camera.hpp, double precision);
//   rasterise: one warp per triangle, its lanes over the covered samples of the bounding box, the
//     nearest fragment per sample by a 64-bit atomic maximum of (depth as an ordered float code,
//     ~triangle id): nearer wins, at equal float depth the triangle first in scene order;
//   resolve: one thread per pixel, each sample's triangle gives its weights again (the same edge
//     functions), the interpolated normal is shaded (camera.hpp) and the samples box-filtered.
// Built with --fmad=false, so coverage, normals and shading are the CPU's operations.
#include <cub/block/block_reduce.cuh>

#include "display/render/render_backends.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::display::cuda {
namespace {

using detail::Camera;
using detail::SampleVertex;

constexpr int kBlock = 256;

// Order-preserving codes: a < b as floats exactly when code(a) < code(b) as unsigned integers.
__device__ unsigned float_code(float f) {
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}
__device__ float code_float(unsigned c) {
  return __uint_as_float((c & 0x80000000u) ? c & 0x7fffffffu : ~c);
}

struct Minimum {
  __device__ float operator()(float a, float b) const { return fminf(a, b); }
};
struct Maximum {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

// The automatic framing as integer codes (float box corners; the radius as the bits of a
// non-negative double, which order like the values).
struct Fit {
  unsigned lo[3], hi[3];
  unsigned long long radius_bits;
};

__global__ void fit_box(const float* positions, std::size_t vertices, Fit* fit) {
  using Reduce = cub::BlockReduce<float, kBlock>;
  __shared__ typename Reduce::TempStorage storage;
  float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < vertices;
       v += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    for (int x = 0; x < 3; ++x) {
      lo[x] = fminf(lo[x], positions[3 * v + x]);
      hi[x] = fmaxf(hi[x], positions[3 * v + x]);
    }
  for (int x = 0; x < 3; ++x) {
    const float block_lo = Reduce(storage).Reduce(lo[x], Minimum());
    __syncthreads();
    const float block_hi = Reduce(storage).Reduce(hi[x], Maximum());
    __syncthreads();
    if (threadIdx.x == 0) {
      atomicMin(&fit->lo[x], float_code(block_lo));
      atomicMax(&fit->hi[x], float_code(block_hi));
    }
  }
}

__device__ void fit_centre(const Fit& fit, double centre[3]) {
  for (int x = 0; x < 3; ++x)
    centre[x] = (static_cast<double>(code_float(fit.lo[x])) + static_cast<double>(code_float(fit.hi[x]))) / 2;
}

__global__ void fit_radius(const float* positions, std::size_t vertices, Fit* fit) {
  using Reduce = cub::BlockReduce<double, kBlock>;
  __shared__ typename Reduce::TempStorage storage;
  double centre[3];
  fit_centre(*fit, centre);
  double radius = 0;
  for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < vertices;
       v += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double d[3] = {positions[3 * v] - centre[0], positions[3 * v + 1] - centre[1],
                         positions[3 * v + 2] - centre[2]};
    radius = fmax(radius, sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]));
  }
  const double block_radius = Reduce(storage).Reduce(radius, Maximum());
  if (threadIdx.x == 0)
    atomicMax(&fit->radius_bits, static_cast<unsigned long long>(__double_as_longlong(block_radius)));
}

__global__ void fit_framing(const Fit* fit, double* out) {
  fit_centre(*fit, out);
  out[3] = __longlong_as_double(static_cast<long long>(fit->radius_bits));
}

// `fit` null: the camera as given; else its centre and scale from the fitted sphere.
__global__ void transform(Camera camera, const Fit* fit, double scale_numerator, double zoom,
                          const float* positions, const float* normals, std::size_t vertices,
                          SampleVertex* out) {
  if (fit) {
    fit_centre(*fit, camera.centre);
    camera.scale = detail::camera_scale(scale_numerator,
                                        __longlong_as_double(static_cast<long long>(fit->radius_bits)), zoom);
  }
  for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < vertices;
       v += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[v] = detail::to_samples(camera, positions + 3 * v, normals + 3 * v);
}

__global__ void shift_indices(const std::uint32_t* in, std::uint32_t* out, std::size_t n,
                              std::uint32_t offset) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = in[i] + offset;
}

__global__ void rasterise(const SampleVertex* vertices, const std::uint32_t* indices, std::size_t triangles,
                          int width, int height, unsigned long long* keys) {
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (std::size_t t = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32; t < triangles;
       t += warps) {
    const SampleVertex a = vertices[indices[3 * t]], b = vertices[indices[3 * t + 1]],
                       c = vertices[indices[3 * t + 2]];
    const double area = detail::edge_area(a, b, c);
    if (area == 0) continue;
    const double min_x = fmin(a.x, fmin(b.x, c.x)), max_x = fmax(a.x, fmax(b.x, c.x));
    const double min_y = fmin(a.y, fmin(b.y, c.y)), max_y = fmax(a.y, fmax(b.y, c.y));
    if (max_y < 0 || min_y >= height || max_x < 0 || min_x >= width) continue;
    const int x0 = max(0, static_cast<int>(floor(min_x))), x1 = min(width - 1, static_cast<int>(ceil(max_x)));
    const int y0 = max(0, static_cast<int>(floor(min_y))),
              y1 = min(height - 1, static_cast<int>(ceil(max_y)));
    if (x0 > x1 || y0 > y1) continue;
    const std::int64_t span = x1 - x0 + 1, samples = span * (y1 - y0 + 1);
    const unsigned long long id = 0xffffffffull - t;
    for (std::int64_t s = lane; s < samples; s += 32) {
      const int x = x0 + static_cast<int>(s % span), y = y0 + static_cast<int>(s / span);
      double w[3];
      if (!detail::covers(a, b, c, area, x + 0.5, y + 0.5, w)) continue;
      const double z = w[0] * a.z + w[1] * b.z + w[2] * c.z;
      const unsigned long long key =
          static_cast<unsigned long long>(float_code(static_cast<float>(z))) << 32 | id;
      atomicMax(keys + static_cast<std::size_t>(y) * width + x, key);
    }
  }
}

struct Palette {
  const std::uint32_t* part_first_triangle;  // parts + 1 entries
  const float* colours;                      // r g b per part
  int parts;
  float background[3];
};

__global__ void resolve(const SampleVertex* vertices, const std::uint32_t* indices,
                        const unsigned long long* keys, int width, int height, int ss, Palette palette,
                        detail::Lighting lighting, uchar4* image) {
  const int image_width = width / ss;
  const std::size_t pixels = static_cast<std::size_t>(image_width) * (height / ss);
  for (std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; p < pixels;
       p += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int px = static_cast<int>(p % image_width), py = static_cast<int>(p / image_width);
    double sum[3] = {0, 0, 0};
    for (int sy = 0; sy < ss; ++sy)
      for (int sx = 0; sx < ss; ++sx) {
        const int x = px * ss + sx, y = py * ss + sy;
        const unsigned long long key = keys[static_cast<std::size_t>(y) * width + x];
        if (key == 0) {
          for (int k = 0; k < 3; ++k) sum[k] += palette.background[k];
          continue;
        }
        const std::uint32_t t = 0xffffffffu - static_cast<std::uint32_t>(key & 0xffffffffu);
        int lo = 0, hi = palette.parts - 1;  // the part whose triangles hold t
        while (lo < hi) {
          const int mid = (lo + hi + 1) / 2;
          if (palette.part_first_triangle[mid] <= t)
            lo = mid;
          else
            hi = mid - 1;
        }
        const SampleVertex a = vertices[indices[3 * static_cast<std::size_t>(t)]];
        const SampleVertex b = vertices[indices[3 * static_cast<std::size_t>(t) + 1]];
        const SampleVertex c = vertices[indices[3 * static_cast<std::size_t>(t) + 2]];
        double w[3];
        detail::covers(a, b, c, detail::edge_area(a, b, c), x + 0.5, y + 0.5, w);
        float normal[3];
        detail::interpolate_normal(a, b, c, w, normal);
        detail::shade(lighting, normal, palette.colours + 3 * lo, sum);
      }
    image[p] = make_uchar4(detail::to_byte(sum[0], ss * ss), detail::to_byte(sum[1], ss * ss),
                           detail::to_byte(sum[2], ss * ss), 255);
  }
}

// A GPU worker's render buffers, kept from call to call (they grow, never shrink).
struct RenderWorkspace {
  molaccel::cuda::DeviceBuffer<float> positions, normals, colours;
  molaccel::cuda::DeviceBuffer<std::uint32_t> indices, staging_indices, part_first_triangle;
  molaccel::cuda::DeviceBuffer<SampleVertex> vertices;
  molaccel::cuda::DeviceBuffer<unsigned long long> keys;
  molaccel::cuda::DeviceBuffer<Fit> fit;
  molaccel::cuda::DeviceBuffer<double> framing;
  molaccel::cuda::DeviceBuffer<uchar4> image;
};

int blocks_for(std::size_t threads) {
  return static_cast<int>(std::clamp<std::size_t>((threads + kBlock - 1) / kBlock, 1, 65535u * 16u));
}

// The parts joined into the workspace's vertex and triangle lists (device parts first); returns
// the number of vertices, triangles and each part's first triangle and colour.
struct Gathered {
  std::size_t vertices = 0, triangles = 0;
  std::vector<std::uint32_t> first_triangle;  // parts + 1
  std::vector<float> colours;                 // r g b per part
};
Gathered gather(RenderWorkspace& w, const std::vector<DevicePart>& device_parts, const Scene& host_parts,
                cudaStream_t stream) {
  Gathered g;
  auto add_part = [&](std::size_t part_vertices, std::size_t part_triangles, const Colour& colour) {
    g.first_triangle.push_back(static_cast<std::uint32_t>(g.triangles));
    g.colours.insert(g.colours.end(), {colour.r, colour.g, colour.b});
    g.vertices += part_vertices;
    g.triangles += part_triangles;
  };
  for (const DevicePart& part : device_parts) add_part(part.mesh.vertices, part.mesh.triangles, part.colour);
  for (const ScenePart& part : host_parts.parts)
    add_part(part.mesh.vertex_count(), part.mesh.triangle_count(), part.colour);
  if (g.triangles == 0) throw InputError("render", 0, "nothing to draw: the scene has no triangle");
  if (g.vertices > 0xffffffffull || g.triangles >= 0xffffffffull)
    throw Error("render (cuda): more than 2^32 vertices or triangles");
  g.first_triangle.push_back(static_cast<std::uint32_t>(g.triangles));
  w.positions.resize(3 * g.vertices);
  w.normals.resize(3 * g.vertices);
  w.indices.resize(3 * g.triangles);
  std::size_t vertex_offset = 0, triangle_offset = 0;
  auto place = [&](const float* positions, const float* normals, const std::uint32_t* indices,
                   std::size_t part_vertices, std::size_t part_triangles, cudaMemcpyKind kind) {
    const std::size_t floats = 3 * part_vertices;
    if (floats) {
      MOLACCEL_CUDA_TRY(cudaMemcpyAsync(w.positions.data() + 3 * vertex_offset, positions,
                                        floats * sizeof(float), kind, stream));
      MOLACCEL_CUDA_TRY(cudaMemcpyAsync(w.normals.data() + 3 * vertex_offset, normals, floats * sizeof(float),
                                        kind, stream));
    }
    if (part_triangles) {
      const std::uint32_t* source = indices;
      if (kind == cudaMemcpyHostToDevice) {
        w.staging_indices.resize(3 * part_triangles);
        w.staging_indices.copy_from_host(indices, 3 * part_triangles, stream);
        source = w.staging_indices.data();
      }
      shift_indices<<<blocks_for(3 * part_triangles), kBlock, 0, stream>>>(
          source, w.indices.data() + 3 * triangle_offset, 3 * part_triangles,
          static_cast<std::uint32_t>(vertex_offset));
      MOLACCEL_CUDA_CHECK_LAUNCH("render shift_indices");
    }
    vertex_offset += part_vertices;
    triangle_offset += part_triangles;
  };
  for (const DevicePart& part : device_parts)
    place(part.mesh.positions, part.mesh.normals, part.mesh.indices, part.mesh.vertices, part.mesh.triangles,
          cudaMemcpyDeviceToDevice);
  for (const ScenePart& part : host_parts.parts)
    place(part.mesh.positions.data(), part.mesh.normals.data(), part.mesh.indices.data(),
          part.mesh.vertex_count(), part.mesh.triangle_count(), cudaMemcpyHostToDevice);
  return g;
}

// framing_of the gathered vertices, into w.fit.
void fit_sphere(RenderWorkspace& w, std::size_t vertices, cudaStream_t stream) {
  Fit start{};
  for (int x = 0; x < 3; ++x) {
    start.lo[x] = 0xffffffffu;
    start.hi[x] = 0;
  }
  w.fit.resize(1);
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(w.fit.data(), &start, sizeof(Fit), cudaMemcpyHostToDevice, stream));
  const int blocks = std::min(blocks_for(vertices), 1024);
  fit_box<<<blocks, kBlock, 0, stream>>>(w.positions.data(), vertices, w.fit.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("render fit_box");
  fit_radius<<<blocks, kBlock, 0, stream>>>(w.positions.data(), vertices, w.fit.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("render fit_radius");
}

}  // namespace

Framing framing_on_device(WorkerContext& ctx, const std::vector<DevicePart>& device_parts,
                          const Scene& host_parts, void* stream_handle) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  RenderWorkspace& w = ctx.kept<RenderWorkspace>();
  const Gathered g = gather(w, device_parts, host_parts, stream);
  fit_sphere(w, g.vertices, stream);
  w.framing.resize(4);
  fit_framing<<<1, 1, 0, stream>>>(w.fit.data(), w.framing.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("render fit_framing");
  double f[4];
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(f, w.framing.data(), sizeof(f), cudaMemcpyDeviceToHost, stream));
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));
  return {{f[0], f[1], f[2]}, f[3]};
}

Image render_on_device(WorkerContext& ctx, const std::vector<DevicePart>& device_parts,
                       const Scene& host_parts, const RenderOptions& options, void* stream_handle) {
  Image image;
  render_on_device(ctx, device_parts, host_parts, options, image, stream_handle);
  return image;
}

void render_on_device(WorkerContext& ctx, const std::vector<DevicePart>& device_parts,
                      const Scene& host_parts, const RenderOptions& options, Image& image,
                      void* stream_handle) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  RenderWorkspace& w = ctx.kept<RenderWorkspace>();
  const int ss = detail::samples_per_axis(options);
  const int W = options.width * ss, H = options.height * ss;
  const Gathered g = gather(w, device_parts, host_parts, stream);
  const std::size_t vertices = g.vertices, triangles = g.triangles;
  w.vertices.resize(vertices);
  w.part_first_triangle.upload(g.first_triangle, stream);
  w.colours.upload(g.colours, stream);

  // The camera, fitted on the device unless the options give the framing.
  const bool fit_here = !(options.framing.radius > 0);
  const detail::Camera camera =
      detail::make_camera(fit_here ? Framing{{0, 0, 0}, 1} : options.framing, options);
  const Fit* fit = nullptr;
  if (fit_here) {
    fit_sphere(w, vertices, stream);
    fit = w.fit.data();
  }
  transform<<<blocks_for(vertices), kBlock, 0, stream>>>(camera, fit, 0.45 * std::min(W, H),
                                                         options.view.zoom, w.positions.data(),
                                                         w.normals.data(), vertices, w.vertices.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("render transform");

  w.keys.resize(static_cast<std::size_t>(W) * H);
  w.keys.fill_zero(stream);
  rasterise<<<blocks_for(32 * triangles), kBlock, 0, stream>>>(w.vertices.data(), w.indices.data(), triangles,
                                                               W, H, w.keys.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("render rasterise");

  image.width = options.width;
  image.height = options.height;
  const std::size_t pixels = static_cast<std::size_t>(image.width) * image.height;
  image.rgba.resize(4 * pixels);  // the same size: the memory of the caller's last frame
  w.image.resize(pixels);
  Palette palette{w.part_first_triangle.data(),
                  w.colours.data(),
                  static_cast<int>(g.first_triangle.size() - 1),
                  {options.background.r, options.background.g, options.background.b}};
  resolve<<<blocks_for(pixels), kBlock, 0, stream>>>(w.vertices.data(), w.indices.data(), w.keys.data(), W, H,
                                                     ss, palette, detail::default_lighting(), w.image.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("render resolve");
  MOLACCEL_CUDA_TRY(
      cudaMemcpyAsync(image.rgba.data(), w.image.data(), 4 * pixels, cudaMemcpyDeviceToHost, stream));
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));
}

}  // namespace molaccel::display::cuda

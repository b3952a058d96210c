// display::extract_isosurface: checks the grid, picks a backend, times it; mesh measures.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "display/backends.hpp"

namespace molaccel::display {

namespace detail {

GridGeometry make_geometry(const ScalarGrid& grid, float level, Inside inside) {
  for (std::size_t n : grid.counts)
    if (n < 2)
      throw InputError(
          "isosurface", 0,
          fmt::format("the grid must have at least 2 points along each axis (it has {} x {} x {})",
                      grid.counts[0], grid.counts[1], grid.counts[2]));
  if (!grid.values) throw InputError("isosurface", 0, "the grid has no values");
  if (!std::isfinite(level))
    throw InputError("--iso", 0, fmt::format("the level must be finite (got {})", level));
  const auto& A = grid.axes;
  const double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
                     A[1][0] * (A[0][1] * A[2][2] - A[0][2] * A[2][1]) +
                     A[2][0] * (A[0][1] * A[1][2] - A[0][2] * A[1][1]);
  if (!std::isfinite(det) || det == 0) throw InputError("isosurface", 0, "the grid's axes span no volume");
  GridGeometry g{};
  for (int x = 0; x < 3; ++x) {
    g.origin[x] = static_cast<float>(grid.origin[x]);
    g.counts[x] = static_cast<std::int64_t>(grid.counts[x]);
    for (int a = 0; a < 3; ++a) g.axes[a][x] = static_cast<float>(A[a][x]);
  }
  // inverse_axes[r][c] = (M^-1)[r][c] for M[x][a] = A[a][x] (axes as columns), by cofactors.
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      const int r1 = (r + 1) % 3, r2 = (r + 2) % 3, c1 = (c + 1) % 3, c2 = (c + 2) % 3;
      g.inverse_axes[r][c] = static_cast<float>((A[r1][c1] * A[r2][c2] - A[r2][c1] * A[r1][c2]) / det);
    }
  g.sign = inside == Inside::above ? 1.0f : -1.0f;
  g.level = g.sign * level;
  g.flip_winding = det < 0;
  return g;
}

void check_index_range(std::uint64_t vertices, const char* backend) {
  if (vertices > std::numeric_limits<std::uint32_t>::max())
    throw Error(fmt::format("isosurface ({}): {} vertices exceed 32-bit indices; use a coarser grid", backend,
                            vertices));
}

}  // namespace detail

#if !MOLACCEL_HAVE_CUDA
namespace cuda {
DeviceSurfaces extract_surfaces_on_device(WorkerContext&, const detail::GridGeometry*, int, const float*,
                                          void*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
void synchronize(WorkerContext&, void*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
Mesh download(const DeviceMesh&, void*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
Mesh extract_isosurface_on_device(WorkerContext&, const detail::GridGeometry&, const float*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
const float* upload_grid(WorkerContext&, const float*, std::size_t) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
float* device_grid(WorkerContext&, std::size_t) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
std::vector<float> download_grid(WorkerContext&, const float*, std::size_t) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
Mesh extract_isosurface(WorkerContext&, const detail::GridGeometry&, const float*) {
  MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
}
}  // namespace cuda
#endif

std::string_view to_string(SurfaceBackend backend) {
  switch (backend) {
    case SurfaceBackend::automatic:
      return "auto";
    case SurfaceBackend::reference:
      return "reference";
    case SurfaceBackend::cpu:
      return "cpu";
    case SurfaceBackend::cuda:
      return "cuda";
  }
  return "?";
}

SurfaceBackend parse_surface_backend(std::string_view text) {
  for (SurfaceBackend b :
       {SurfaceBackend::automatic, SurfaceBackend::reference, SurfaceBackend::cpu, SurfaceBackend::cuda})
    if (text == to_string(b)) return b;
  if (text == "gpu") return SurfaceBackend::cuda;
  throw InputError("--surface-backend", 0,
                   fmt::format("unknown backend '{}' (auto, cpu, cuda, reference)", text));
}

Mesh extract_isosurface(const Resources& resources, const ScalarGrid& grid, float level, Inside inside,
                        SurfaceBackend backend, SurfaceInfo* info) {
  const detail::GridGeometry geometry = detail::make_geometry(grid, level, inside);
  if (backend == SurfaceBackend::automatic)
    backend = resources.uses_gpu() ? SurfaceBackend::cuda : SurfaceBackend::cpu;
  const auto start = std::chrono::steady_clock::now();
  Mesh mesh;
  switch (backend) {
    case SurfaceBackend::reference:
      mesh = reference::extract_isosurface(grid, level, inside);
      break;
    case SurfaceBackend::cuda: {
#if !MOLACCEL_HAVE_CUDA
      MOLACCEL_THROW(NotCompiled, "the CUDA isosurface backend (this build has no CUDA)");
#else
      if (!resources.uses_gpu())
        throw DeviceUnavailable("--surface-backend cuda: the selected devices have no GPU (use --device gpu)",
                                __FILE__, __LINE__);
      // One tile on the scheduler: a GPU worker keeps its device scratch from call to call; a CPU
      // worker beside the GPUs (or a retry there) runs the CPU path, which gives the same mesh.
      JobOptions job;
      job.name = "isosurface";
      job.progress_bar = false;
      run_tiles(
          resources, 1,
          [&](WorkerContext& ctx, std::size_t) {
            mesh = ctx.worker().kind == WorkerInfo::Kind::gpu
                       ? cuda::extract_isosurface(ctx, geometry, grid.values)
                       : cpu::extract_isosurface(geometry, grid.values, ctx.worker().cpu_threads);
          },
          job);
#endif
      break;
    }
    default:
      mesh = cpu::extract_isosurface(geometry, grid.values, resources.cpu_threads());
      break;
  }
  if (info) {
    info->backend = std::string(to_string(backend));
    info->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return mesh;
}

std::vector<std::array<std::uint64_t, 3>> canonical_triangles(const Mesh& mesh) {
  std::vector<std::array<std::uint64_t, 3>> out;
  out.reserve(mesh.triangle_count());
  for (std::size_t t = 0; t < mesh.triangle_count(); ++t) {
    std::array<std::uint64_t, 3> tri;
    for (int v = 0; v < 3; ++v) tri[v] = mesh.edge_ids.at(mesh.indices[3 * t + v]);
    const auto smallest = std::min_element(tri.begin(), tri.end());
    std::rotate(tri.begin(), smallest, tri.end());
    out.push_back(tri);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
template <class F>
double sum_over_triangles(const Mesh& mesh, F f) {
  double sum = 0;
  for (std::size_t t = 0; t < mesh.triangle_count(); ++t) {
    double p[3][3];
    for (int v = 0; v < 3; ++v)
      for (int x = 0; x < 3; ++x) p[v][x] = mesh.positions[3 * mesh.indices[3 * t + v] + x];
    sum += f(p);
  }
  return sum;
}
}  // namespace

double mesh_area(const Mesh& mesh) {
  return sum_over_triangles(mesh, [](const double(&p)[3][3]) {
    const double u[3] = {p[1][0] - p[0][0], p[1][1] - p[0][1], p[1][2] - p[0][2]};
    const double w[3] = {p[2][0] - p[0][0], p[2][1] - p[0][1], p[2][2] - p[0][2]};
    const double c[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
    return 0.5 * std::sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
  });
}

double mesh_volume(const Mesh& mesh) {
  // Sum of signed tetrahedra (origin, triangle): p0 . (p1 x p2) / 6.
  return sum_over_triangles(mesh, [](const double(&p)[3][3]) {
    return (p[0][0] * (p[1][1] * p[2][2] - p[1][2] * p[2][1]) -
            p[0][1] * (p[1][0] * p[2][2] - p[1][2] * p[2][0]) +
            p[0][2] * (p[1][0] * p[2][1] - p[1][1] * p[2][0])) /
           6.0;
  });
}

}  // namespace molaccel::display

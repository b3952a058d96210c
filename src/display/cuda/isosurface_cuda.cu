// CUDA isosurface, straight from a grid in device memory. The CPU path's three passes as kernels,
// one thread per grid point: crossed-edge masks -> scan (vertex numbers in edge-id order) -> cell
// triangle counts -> scan -> triangles; then vertices. The cell tables are the CPU path's, copied
// to constant memory; vertex arithmetic is the shared surface_math.hpp (compiled with --fmad=false),
// so the mesh equals the CPU one bit for bit. Host round trips: the two totals (to size the mesh)
// and the mesh itself. Device scratch lives in the worker's kept state (ctx.kept<Workspace>()).
#include <cub/device/device_scan.cuh>

#include "display/backends.hpp"
#include "display/cell_tables.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::display::cuda {
namespace {

using detail::GridGeometry;

__constant__ std::uint8_t c_triangle_count[256];
__constant__ std::uint8_t c_triangle_edges[256][detail::kMaxCellTriangles * 3];

constexpr int kBlock = 256;

__device__ bool inside(const GridGeometry& g, const float* values, std::int64_t p) {
  return g.sign * values[p] > g.level;
}

// 32-bit division: the grid has fewer than 2^32 / 12 points (checked on entry).
__device__ void point_of(const GridGeometry& g, std::int64_t p, std::int64_t& i, std::int64_t& j,
                         std::int64_t& k) {
  const auto point = static_cast<std::uint32_t>(p);
  const auto n2 = static_cast<std::uint32_t>(g.counts[2]);
  const std::uint32_t n12 = static_cast<std::uint32_t>(g.counts[1]) * n2;
  const std::uint32_t i32 = point / n12, rest = point - i32 * n12, j32 = rest / n2;
  i = i32;
  j = j32;
  k = rest - j32 * n2;
}

__global__ void edge_masks(GridGeometry g, const float* values, std::uint8_t* mask, std::uint32_t* count) {
  const std::int64_t points = g.counts[0] * g.counts[1] * g.counts[2];
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < points;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t i, j, k;
    point_of(g, p, i, j, k);
    const bool in = inside(g, values, p);
    unsigned m = 0;
    for (int step = 1; step < 8; ++step) {
      const std::int64_t di = step & 1, dj = (step >> 1) & 1, dk = (step >> 2) & 1;
      if (i + di >= g.counts[0] || j + dj >= g.counts[1] || k + dk >= g.counts[2]) continue;
      if (inside(g, values, detail::point_index(g, i + di, j + dj, k + dk)) != in) m |= 1u << (step - 1);
    }
    mask[p] = static_cast<std::uint8_t>(m);
    count[p] = static_cast<std::uint32_t>(__popc(m));
  }
}

__device__ unsigned cell_case(const GridGeometry& g, const float* values, std::int64_t i, std::int64_t j,
                              std::int64_t k) {
  unsigned c = 0;
  for (int corner = 0; corner < 8; ++corner)
    if (inside(g, values,
               detail::point_index(g, i + (corner & 1), j + ((corner >> 1) & 1), k + (corner >> 2))))
      c |= 1u << corner;
  return c;
}

__global__ void cell_triangle_counts(GridGeometry g, const float* values, std::uint32_t* count) {
  const std::int64_t points = g.counts[0] * g.counts[1] * g.counts[2];
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < points;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t i, j, k;
    point_of(g, p, i, j, k);
    const bool cell = i + 1 < g.counts[0] && j + 1 < g.counts[1] && k + 1 < g.counts[2];
    count[p] = cell ? c_triangle_count[cell_case(g, values, i, j, k)] : 0u;
  }
}

__global__ void cell_triangles(GridGeometry g, const float* values, const std::uint8_t* mask,
                               const std::uint32_t* vertex_base, const std::uint32_t* triangle_base,
                               std::uint32_t* indices) {
  const std::int64_t points = g.counts[0] * g.counts[1] * g.counts[2];
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < points;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t i, j, k;
    point_of(g, p, i, j, k);
    if (i + 1 >= g.counts[0] || j + 1 >= g.counts[1] || k + 1 >= g.counts[2]) continue;
    const unsigned c = cell_case(g, values, i, j, k);
    std::uint32_t* out = indices + 3 * static_cast<std::size_t>(triangle_base[p]);
    for (int t = 0; t < c_triangle_count[c]; ++t) {
      std::uint32_t v[3];
      for (int x = 0; x < 3; ++x) {
        const int code = c_triangle_edges[c][3 * t + x];
        const int corner = code >> 3, step = code & 7;
        const std::int64_t q =
            detail::point_index(g, i + (corner & 1), j + ((corner >> 1) & 1), k + (corner >> 2));
        v[x] = vertex_base[q] + static_cast<std::uint32_t>(__popc(mask[q] & ((1u << (step - 1)) - 1)));
      }
      out[3 * t] = v[0];
      out[3 * t + 1] = g.flip_winding ? v[2] : v[1];
      out[3 * t + 2] = g.flip_winding ? v[1] : v[2];
    }
  }
}

__global__ void edge_vertices(GridGeometry g, const float* values, const std::uint8_t* mask,
                              const std::uint32_t* vertex_base, float* positions, float* normals,
                              std::uint64_t* edge_ids) {
  const std::int64_t points = g.counts[0] * g.counts[1] * g.counts[2];
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < points;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned m = mask[p];
    if (!m) continue;
    std::int64_t i, j, k;
    point_of(g, p, i, j, k);
    std::uint32_t v = vertex_base[p];
    for (int step = 1; step < 8; ++step) {
      if (!(m >> (step - 1) & 1)) continue;
      detail::edge_vertex(g, values, i, j, k, step, positions + 3 * static_cast<std::size_t>(v),
                          normals + 3 * static_cast<std::size_t>(v));
      edge_ids[v] = static_cast<std::uint64_t>(p) * 7 + static_cast<std::uint64_t>(step - 1);
      ++v;
    }
  }
}

// A GPU worker's scratch, kept from call to call (buffers grow, never shrink).
struct Workspace {
  bool tables_uploaded = false;
  molaccel::cuda::DeviceBuffer<float> values;
  molaccel::cuda::DeviceBuffer<std::uint8_t> mask;
  molaccel::cuda::DeviceBuffer<std::uint32_t> count, vertex_base, triangle_base, indices;
  molaccel::cuda::DeviceBuffer<unsigned char> scan_scratch;
  molaccel::cuda::DeviceBuffer<float> positions, normals;
  molaccel::cuda::DeviceBuffer<std::uint64_t> edge_ids;
  molaccel::cuda::DeviceBuffer<std::uint32_t> totals;  // the last base and count of a scan
};

// Exclusive sum of `n` counts into `out`; returns the total (one small copy to the host).
std::uint64_t exclusive_scan(Workspace& w, const std::uint32_t* in, std::uint32_t* out, std::size_t n) {
  std::size_t bytes = 0;
  MOLACCEL_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, static_cast<int>(n)));
  if (w.scan_scratch.size() < bytes) w.scan_scratch.resize(bytes);
  MOLACCEL_CUDA_TRY(
      cub::DeviceScan::ExclusiveSum(w.scan_scratch.data(), bytes, in, out, static_cast<int>(n)));
  w.totals.resize(2);
  MOLACCEL_CUDA_TRY(
      cudaMemcpyAsync(w.totals.data(), out + n - 1, sizeof(std::uint32_t), cudaMemcpyDeviceToDevice));
  MOLACCEL_CUDA_TRY(
      cudaMemcpyAsync(w.totals.data() + 1, in + n - 1, sizeof(std::uint32_t), cudaMemcpyDeviceToDevice));
  std::uint32_t last[2] = {0, 0};
  MOLACCEL_CUDA_TRY(cudaMemcpy(last, w.totals.data(), sizeof(last), cudaMemcpyDeviceToHost));
  return static_cast<std::uint64_t>(last[0]) + last[1];
}

int blocks_for(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>((n + kBlock - 1) / kBlock, 65535u * 8u));
}

// Grows a kept buffer to at least n elements (resize keeps the allocation when it is large enough).
template <class T>
void ensure(molaccel::cuda::DeviceBuffer<T>& buffer, std::size_t n) {
  buffer.resize(n);
}

}  // namespace

Mesh extract_isosurface_on_device(WorkerContext& ctx, const GridGeometry& g, const float* device_values) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  Workspace& w = ctx.kept<Workspace>();
  const std::size_t points = static_cast<std::size_t>(g.counts[0] * g.counts[1] * g.counts[2]);
  // Counts are 32-bit: at most 7 crossed edges and 12 triangles per point.
  if (points * 12 > 0xffffffffull)
    throw Error(
        fmt::format(fmt::runtime("isosurface (cuda): a grid of {} points is too large for 32-bit counts; "
                                 "use the cpu backend or a coarser grid"),
                    points));
  if (!w.tables_uploaded) {
    const detail::CellTables& tables = detail::cell_tables();
    MOLACCEL_CUDA_TRY(cudaMemcpyToSymbol(c_triangle_count, tables.count, sizeof(tables.count)));
    MOLACCEL_CUDA_TRY(cudaMemcpyToSymbol(c_triangle_edges, tables.edges, sizeof(tables.edges)));
    w.tables_uploaded = true;
  }
  ensure(w.mask, points);
  ensure(w.count, points);
  ensure(w.vertex_base, points);
  ensure(w.triangle_base, points);
  const int blocks = blocks_for(points);
  edge_masks<<<blocks, kBlock>>>(g, device_values, w.mask.data(), w.count.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("edge_masks");
  const std::uint64_t vertices = exclusive_scan(w, w.count.data(), w.vertex_base.data(), points);
  cell_triangle_counts<<<blocks, kBlock>>>(g, device_values, w.count.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("cell_triangle_counts");
  const std::uint64_t triangles = exclusive_scan(w, w.count.data(), w.triangle_base.data(), points);
  detail::check_index_range(vertices, "cuda");

  Mesh mesh;
  if (triangles == 0) return mesh;
  ensure(w.indices, 3 * triangles);
  ensure(w.positions, 3 * vertices);
  ensure(w.normals, 3 * vertices);
  ensure(w.edge_ids, vertices);
  cell_triangles<<<blocks, kBlock>>>(g, device_values, w.mask.data(), w.vertex_base.data(),
                                     w.triangle_base.data(), w.indices.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("cell_triangles");
  edge_vertices<<<blocks, kBlock>>>(g, device_values, w.mask.data(), w.vertex_base.data(), w.positions.data(),
                                    w.normals.data(), w.edge_ids.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("edge_vertices");
  mesh.indices.resize(3 * triangles);
  mesh.positions.resize(3 * vertices);
  mesh.normals.resize(3 * vertices);
  mesh.edge_ids.resize(vertices);
  w.indices.copy_to_host(mesh.indices.data(), mesh.indices.size());
  w.positions.copy_to_host(mesh.positions.data(), mesh.positions.size());
  w.normals.copy_to_host(mesh.normals.data(), mesh.normals.size());
  w.edge_ids.copy_to_host(mesh.edge_ids.data(), mesh.edge_ids.size());
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(nullptr));
  return mesh;
}

const float* upload_grid(WorkerContext& ctx, const float* host_values, std::size_t count) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  Workspace& w = ctx.kept<Workspace>();
  ensure(w.values, count);
  w.values.copy_from_host(host_values, count);
  return w.values.data();
}

Mesh extract_isosurface(WorkerContext& ctx, const GridGeometry& g, const float* host_values) {
  const float* device_values =
      upload_grid(ctx, host_values, static_cast<std::size_t>(g.counts[0] * g.counts[1] * g.counts[2]));
  return extract_isosurface_on_device(ctx, g, device_values);
}

}  // namespace molaccel::display::cuda

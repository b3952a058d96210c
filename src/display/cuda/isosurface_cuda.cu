// CUDA isosurface, straight from a grid in device memory, for one level or both phases of an
// orbital (two levels) at once. Three steps per call, one thread per grid point:
//   classify: per level, the cell's corner case (missing corners past the faces count as outside)
//     and the crossed forward edges, as bytes, and the vertex and triangle counts as one 16-byte
//     record for all levels;
//   scan: one exclusive sum of those records (CUB): each point's first vertex and first triangle
//     per level, in edge-id and cell order;
//   emit: each point writes its vertices and its cell's triangles for every level.
// The emit step writes only into the kept output buffers' capacity and the last point writes the
// totals; the host reads the totals once (the only synchronisation), and grows the buffers and
// emits again only when a surface outgrew them (the first frames). The meshes stay in device
// memory (DeviceMesh) for the GPU renderer; download() copies one to the host. The cell tables are
// the CPU path's, in device memory; vertex arithmetic is the shared surface_math.hpp (compiled
// with --fmad=false), so the mesh equals the CPU one bit for bit.
#include <cub/device/device_scan.cuh>

#include "display/backends.hpp"
#include "display/cell_tables.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::display::cuda {
namespace {

using detail::GridGeometry;

// In global memory, read through the read-only cache: neighbouring threads look up different
// cases (constant memory would serialise them).
__device__ std::uint8_t d_triangle_count[256];
__device__ std::uint8_t d_triangle_edges[256][detail::kMaxCellTriangles * 3];

__device__ int triangle_count(unsigned cell) {
  return __ldg(&d_triangle_count[cell]);
}
__device__ int triangle_edge(unsigned cell, int i) {
  return __ldg(&d_triangle_edges[cell][i]);
}

constexpr int kBlock = 256;

// Vertex and triangle counts of one point for both levels; summed by the scan.
struct alignas(16) Counts {
  std::uint32_t vertices[kMaxLevels];
  std::uint32_t triangles[kMaxLevels];
};
struct AddCounts {
  __device__ Counts operator()(const Counts& a, const Counts& b) const {
    Counts c;
    for (int l = 0; l < kMaxLevels; ++l) {
      c.vertices[l] = a.vertices[l] + b.vertices[l];
      c.triangles[l] = a.triangles[l] + b.triangles[l];
    }
    return c;
  }
};

// Per level: the cell case (corner bits) and the crossed-edge mask (bits 0..6 = steps 1..7).
struct alignas(4) Codes {
  std::uint8_t cell[kMaxLevels];
  std::uint8_t mask[kMaxLevels];
};

struct Levels {
  GridGeometry g[kMaxLevels];  // same grid, own sign and level
  int count;
};

// Where one level's mesh goes: capacities in vertices and triangles.
struct Output {
  float* positions[kMaxLevels];
  float* normals[kMaxLevels];
  std::uint64_t* edge_ids[kMaxLevels];
  std::uint32_t* indices[kMaxLevels];
  std::uint64_t vertex_capacity[kMaxLevels], triangle_capacity[kMaxLevels];
};

// 32-bit division: the grid has fewer than 2^32 / 12 points (checked on entry).
__device__ void point_of(const GridGeometry& g, std::uint32_t point, std::int64_t& i, std::int64_t& j,
                         std::int64_t& k) {
  const auto n2 = static_cast<std::uint32_t>(g.counts[2]);
  const std::uint32_t n12 = static_cast<std::uint32_t>(g.counts[1]) * n2;
  const std::uint32_t i32 = point / n12, rest = point - i32 * n12, j32 = rest / n2;
  i = i32;
  j = j32;
  k = rest - j32 * n2;
}

__global__ void classify(Levels levels, const float* values, Codes* codes, Counts* counts) {
  const GridGeometry& g = levels.g[0];
  const std::int64_t points = g.counts[0] * g.counts[1] * g.counts[2];
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < points;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t i, j, k;
    point_of(g, static_cast<std::uint32_t>(p), i, j, k);
    const bool last_i = i + 1 >= g.counts[0], last_j = j + 1 >= g.counts[1], last_k = k + 1 >= g.counts[2];
    float corner_values[8];
    unsigned present = 0;
    for (int c = 0; c < 8; ++c) {
      if (((c & 1) && last_i) || ((c & 2) && last_j) || ((c & 4) && last_k)) {
        corner_values[c] = 0;
        continue;
      }
      present |= 1u << c;
      corner_values[c] =
          values[p + (c & 1) * g.counts[1] * g.counts[2] + ((c >> 1) & 1) * g.counts[2] + (c >> 2)];
    }
    Codes code{};
    Counts count{};
    for (int l = 0; l < levels.count; ++l) {
      const GridGeometry& gl = levels.g[l];
      unsigned cell = 0;
      for (int c = 0; c < 8; ++c)
        if ((present >> c & 1) && gl.sign * corner_values[c] > gl.level) cell |= 1u << c;
      // Edge `step` joins corner 0 to corner `step`: crossed when their flags differ.
      const unsigned mask = ((cell ^ ((cell & 1u) ? 0xffu : 0u)) & present) >> 1;
      code.cell[l] = static_cast<std::uint8_t>(cell);
      code.mask[l] = static_cast<std::uint8_t>(mask);
      count.vertices[l] = static_cast<std::uint32_t>(__popc(mask));
      count.triangles[l] = present == 0xffu ? static_cast<std::uint32_t>(triangle_count(cell)) : 0u;
    }
    codes[p] = code;
    counts[p] = count;
  }
}

__global__ void emit(Levels levels, const float* values, const Codes* codes, const Counts* counts,
                     const Counts* bases, Output out, Counts* totals) {
  const GridGeometry& g = levels.g[0];
  const std::int64_t points = g.counts[0] * g.counts[1] * g.counts[2];
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < points;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (p == points - 1) *totals = AddCounts()(bases[p], counts[p]);
    const Codes code = codes[p];
    // A cell with corners on both sides has a triangle (the tetrahedra hold every cube edge).
    bool any = false;
    for (int l = 0; l < levels.count; ++l)
      any |= code.mask[l] != 0 || (code.cell[l] != 0 && code.cell[l] != 0xff);
    if (!any) continue;
    std::int64_t i, j, k;
    point_of(g, static_cast<std::uint32_t>(p), i, j, k);
    const Counts base = bases[p];
    const bool full_cell = i + 1 < g.counts[0] && j + 1 < g.counts[1] && k + 1 < g.counts[2];
    for (int l = 0; l < levels.count; ++l) {
      const GridGeometry& gl = levels.g[l];
      // Vertices, in step order.
      std::uint32_t v = base.vertices[l];
      const unsigned mask = code.mask[l];
      for (int step = 1; step < 8; ++step) {
        if (!(mask >> (step - 1) & 1)) continue;
        if (v < out.vertex_capacity[l]) {
          detail::edge_vertex(gl, values, i, j, k, step, out.positions[l] + 3 * static_cast<std::size_t>(v),
                              out.normals[l] + 3 * static_cast<std::size_t>(v));
          out.edge_ids[l][v] = static_cast<std::uint64_t>(p) * 7 + static_cast<std::uint64_t>(step - 1);
        }
        ++v;
      }
      // Triangles of the cell whose lowest corner this point is.
      if (!full_cell) continue;
      const unsigned cell = code.cell[l];
      const int triangles = triangle_count(cell);
      for (int t = 0; t < triangles; ++t) {
        const std::uint64_t triangle = base.triangles[l] + static_cast<std::uint64_t>(t);
        if (triangle >= out.triangle_capacity[l]) break;
        std::uint32_t corner_vertex[3];
        for (int x = 0; x < 3; ++x) {
          const int edge = triangle_edge(cell, 3 * t + x);
          const int corner = edge >> 3, step = edge & 7;
          const std::int64_t q =
              detail::point_index(g, i + (corner & 1), j + ((corner >> 1) & 1), k + (corner >> 2));
          corner_vertex[x] = bases[q].vertices[l] +
                             static_cast<std::uint32_t>(__popc(codes[q].mask[l] & ((1u << (step - 1)) - 1)));
        }
        std::uint32_t* o = out.indices[l] + 3 * triangle;
        o[0] = corner_vertex[0];
        o[1] = gl.flip_winding ? corner_vertex[2] : corner_vertex[1];
        o[2] = gl.flip_winding ? corner_vertex[1] : corner_vertex[2];
      }
    }
  }
}

// A GPU worker's scratch, kept from call to call (buffers grow, never shrink).
struct Workspace {
  bool tables_uploaded = false;
  molaccel::cuda::DeviceBuffer<float> values;
  molaccel::cuda::DeviceBuffer<Codes> codes;
  molaccel::cuda::DeviceBuffer<Counts> counts, bases, totals;
  molaccel::cuda::DeviceBuffer<unsigned char> scan_scratch;
  molaccel::cuda::DeviceBuffer<float> positions[kMaxLevels], normals[kMaxLevels];
  molaccel::cuda::DeviceBuffer<std::uint64_t> edge_ids[kMaxLevels];
  molaccel::cuda::DeviceBuffer<std::uint32_t> indices[kMaxLevels];
  molaccel::cuda::PinnedBuffer<Counts> host_totals;
};

int blocks_for(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>((n + kBlock - 1) / kBlock, 65535u * 8u));
}

void check_same_grid(const GridGeometry& a, const GridGeometry& b) {
  bool same = true;
  for (int x = 0; x < 3; ++x) {
    same = same && a.counts[x] == b.counts[x] && a.origin[x] == b.origin[x];
    for (int y = 0; y < 3; ++y) same = same && a.axes[x][y] == b.axes[x][y];
  }
  if (!same) throw Error("isosurface (cuda): the levels of one call must share the grid");
}

}  // namespace

DeviceSurfaces extract_surfaces_on_device(WorkerContext& ctx, const GridGeometry* levels, int count,
                                          const float* device_values, void* stream_handle) {
  if (count < 1 || count > kMaxLevels) throw Error("isosurface (cuda): one or two levels per call");
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  Workspace& w = ctx.kept<Workspace>();
  const GridGeometry& g = levels[0];
  const std::size_t points = static_cast<std::size_t>(g.counts[0] * g.counts[1] * g.counts[2]);
  // Counts are 32-bit: at most 7 crossed edges and 12 triangles per point.
  if (points * 12 > 0xffffffffull)
    throw Error(
        fmt::format(fmt::runtime("isosurface (cuda): a grid of {} points is too large for 32-bit counts; "
                                 "use the cpu backend or a coarser grid"),
                    points));
  Levels l{};
  l.count = count;
  for (int i = 0; i < count; ++i) {
    check_same_grid(g, levels[i]);
    l.g[i] = levels[i];
  }
  if (!w.tables_uploaded) {
    const detail::CellTables& tables = detail::cell_tables();
    MOLACCEL_CUDA_TRY(cudaMemcpyToSymbol(d_triangle_count, tables.count, sizeof(tables.count)));
    MOLACCEL_CUDA_TRY(cudaMemcpyToSymbol(d_triangle_edges, tables.edges, sizeof(tables.edges)));
    w.tables_uploaded = true;
  }
  w.codes.resize(points);
  w.counts.resize(points);
  w.bases.resize(points);
  w.totals.resize(1);
  w.host_totals.resize(1, &ctx.pinned_pool());
  const int blocks = blocks_for(points);
  classify<<<blocks, kBlock, 0, stream>>>(l, device_values, w.codes.data(), w.counts.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("isosurface classify");
  std::size_t bytes = 0;
  const Counts zero{};
  MOLACCEL_CUDA_TRY(cub::DeviceScan::ExclusiveScan(nullptr, bytes, w.counts.data(), w.bases.data(),
                                                   AddCounts{}, zero, static_cast<int>(points), stream));
  w.scan_scratch.resize(bytes);
  MOLACCEL_CUDA_TRY(cub::DeviceScan::ExclusiveScan(w.scan_scratch.data(), bytes, w.counts.data(),
                                                   w.bases.data(), AddCounts{}, zero,
                                                   static_cast<int>(points), stream));
  DeviceSurfaces out;
  out.count = count;
  // Emit into the kept capacity; once more after growing when a surface did not fit.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Output o{};
    for (int i = 0; i < count; ++i) {
      o.positions[i] = w.positions[i].data();
      o.normals[i] = w.normals[i].data();
      o.edge_ids[i] = w.edge_ids[i].data();
      o.indices[i] = w.indices[i].data();
      o.vertex_capacity[i] = w.edge_ids[i].size();
      o.triangle_capacity[i] = w.indices[i].size() / 3;
    }
    emit<<<blocks, kBlock, 0, stream>>>(l, device_values, w.codes.data(), w.counts.data(), w.bases.data(), o,
                                        w.totals.data());
    MOLACCEL_CUDA_CHECK_LAUNCH("isosurface emit");
    w.totals.copy_to_host(w.host_totals.data(), 1, stream);
    MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));
    const Counts totals = w.host_totals[0];
    bool fits = true;
    for (int i = 0; i < count; ++i) {
      detail::check_index_range(totals.vertices[i], "cuda");
      if (totals.vertices[i] > o.vertex_capacity[i] || totals.triangles[i] > o.triangle_capacity[i]) {
        fits = false;
        // A quarter more than needed: frames of an animation vary a little.
        const std::size_t vertices = totals.vertices[i] + totals.vertices[i] / 4;
        const std::size_t triangles = totals.triangles[i] + totals.triangles[i] / 4;
        w.positions[i].resize(3 * vertices);
        w.normals[i].resize(3 * vertices);
        w.edge_ids[i].resize(vertices);
        w.indices[i].resize(3 * triangles);
      }
      out.mesh[i] = {w.positions[i].data(), w.normals[i].data(), w.edge_ids[i].data(),
                     w.indices[i].data(),   totals.vertices[i],  totals.triangles[i]};
    }
    if (fits) return out;
  }
  throw Error("isosurface (cuda): the surface outgrew its buffers twice");  // cannot happen
}

void synchronize(WorkerContext& ctx, void* stream) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

Mesh download(const DeviceMesh& m, void* stream_handle) {
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  Mesh mesh;
  if (m.triangles == 0) return mesh;
  mesh.indices.resize(3 * m.triangles);
  mesh.positions.resize(3 * m.vertices);
  mesh.normals.resize(3 * m.vertices);
  mesh.edge_ids.resize(m.vertices);
  auto copy = [&](void* dst, const void* src, std::size_t bytes) {
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  };
  copy(mesh.indices.data(), m.indices, mesh.indices.size() * sizeof(std::uint32_t));
  copy(mesh.positions.data(), m.positions, mesh.positions.size() * sizeof(float));
  copy(mesh.normals.data(), m.normals, mesh.normals.size() * sizeof(float));
  copy(mesh.edge_ids.data(), m.edge_ids, mesh.edge_ids.size() * sizeof(std::uint64_t));
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));
  return mesh;
}

Mesh extract_isosurface_on_device(WorkerContext& ctx, const GridGeometry& g, const float* device_values) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  return download(extract_surfaces_on_device(ctx, &g, 1, device_values, nullptr).mesh[0], nullptr);
}

const float* upload_grid(WorkerContext& ctx, const float* host_values, std::size_t count) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  Workspace& w = ctx.kept<Workspace>();
  w.values.resize(count);
  w.values.copy_from_host(host_values, count);
  return w.values.data();
}

float* device_grid(WorkerContext& ctx, std::size_t count) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  Workspace& w = ctx.kept<Workspace>();
  w.values.resize(count);
  return w.values.data();
}

std::vector<float> download_grid(WorkerContext& ctx, const float* device_values, std::size_t count) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  std::vector<float> values(count);
  MOLACCEL_CUDA_TRY(cudaMemcpy(values.data(), device_values, count * sizeof(float), cudaMemcpyDeviceToHost));
  return values;
}

Mesh extract_isosurface(WorkerContext& ctx, const GridGeometry& g, const float* host_values) {
  const float* device_values =
      upload_grid(ctx, host_values, static_cast<std::size_t>(g.counts[0] * g.counts[1] * g.counts[2]));
  return extract_isosurface_on_device(ctx, g, device_values);
}

}  // namespace molaccel::display::cuda

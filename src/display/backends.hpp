// The isosurface backends behind display::extract_isosurface (internal; tests call them directly).
#pragma once

#include "display/surface_math.hpp"
#include "molaccel/display.hpp"

namespace molaccel::display::detail {

// The kernels' view of a grid and a level (checks the grid: InputError when it is unusable).
GridGeometry make_geometry(const ScalarGrid& grid, float level, Inside inside);

// Assigns vertex numbers in edge-id order and checks the counts fit 32-bit indices.
void check_index_range(std::uint64_t vertices, const char* backend);

}  // namespace molaccel::display::detail

namespace molaccel::display::reference {
// Double precision, one thread, no tables: the oracle.
Mesh extract_isosurface(const ScalarGrid& grid, float level, Inside inside);
}  // namespace molaccel::display::reference

namespace molaccel::display::cpu {
Mesh extract_isosurface(const detail::GridGeometry& geometry, const float* values, int threads);
}  // namespace molaccel::display::cpu

namespace molaccel::display::cuda {
inline constexpr int kMaxLevels = 2;  // levels extracted in one pass (the two phases of an orbital)

// A surface in the device memory of a worker's GPU: the worker's kept scratch, valid until the next
// extraction on that worker. The canonical layout of Mesh (positions, normals: 3 floats per vertex).
struct DeviceMesh {
  const float* positions = nullptr;
  const float* normals = nullptr;
  const std::uint64_t* edge_ids = nullptr;
  const std::uint32_t* indices = nullptr;
  std::size_t vertices = 0, triangles = 0;
};
struct DeviceSurfaces {
  DeviceMesh mesh[kMaxLevels];
  int count = 0;
};

// The surfaces of `count` (1 or 2) levels of one grid in device memory (each geometry from
// make_geometry for the same grid), on the worker's GPU, enqueued on `stream` (a cudaStream_t;
// nullptr = the default stream): one classify pass, one scan and one emit pass for all levels,
// one synchronisation (the totals), no allocation once the kept buffers are large enough. The
// meshes stay on the device; each equals the CPU path's mesh of that level.
DeviceSurfaces extract_surfaces_on_device(WorkerContext& ctx, const detail::GridGeometry* levels, int count,
                                          const float* device_values, void* stream = nullptr);
// Waits for the work enqueued on `stream` on the worker's GPU.
void synchronize(WorkerContext& ctx, void* stream);
// A device mesh copied to the host (the device current must be the mesh's).
Mesh download(const DeviceMesh& mesh, void* stream = nullptr);

// On the worker's GPU (ctx.worker().device current), with device scratch kept in ctx.kept<>() from
// call to call (no allocation once it is large enough). Throws NotCompiled in a build without CUDA.
//
// `device_values` is the grid in that GPU's memory (no copy of the grid to the host); the mesh
// comes back to the host.
Mesh extract_isosurface_on_device(WorkerContext& ctx, const detail::GridGeometry& geometry,
                                  const float* device_values);
// Copies a host grid into the worker's kept device buffer and returns its device address (valid
// until the next upload on that worker).
const float* upload_grid(WorkerContext& ctx, const float* host_values, std::size_t count);
// The worker's kept device buffer (upload_grid's) sized for `count` floats, for a grid written on
// the device (by an engine's kernels); and a device grid copied back to the host (for messages).
float* device_grid(WorkerContext& ctx, std::size_t count);
std::vector<float> download_grid(WorkerContext& ctx, const float* device_values, std::size_t count);
// upload_grid, then extract_isosurface_on_device.
Mesh extract_isosurface(WorkerContext& ctx, const detail::GridGeometry& geometry, const float* host_values);
}  // namespace molaccel::display::cuda

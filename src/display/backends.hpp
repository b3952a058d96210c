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
// upload_grid, then extract_isosurface_on_device.
Mesh extract_isosurface(WorkerContext& ctx, const detail::GridGeometry& geometry, const float* host_values);
}  // namespace molaccel::display::cuda

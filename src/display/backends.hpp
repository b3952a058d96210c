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
// `device_values` is the grid in the memory of GPU `device` (no copy of the grid to the host);
// the mesh comes back to the host. Throws NotCompiled in a build without CUDA.
Mesh extract_isosurface_on_device(const detail::GridGeometry& geometry, const float* device_values,
                                  int device);
// The same from a host grid: one upload, then the device path.
Mesh extract_isosurface(const detail::GridGeometry& geometry, const float* host_values, int device);
}  // namespace molaccel::display::cuda

// The display loop's GPU stages with the grid kept in device memory (CUDA-free interface; the
// implementation is display_on_device.cu, built with CUDA only).
#pragma once

#include "display/backends.hpp"
#include "orbital/cuda/orbital_cuda.hpp"

namespace molaccel::bench_display {

struct DeviceLoop {
  double grid_ms = 0;      // the orbital kernel over the whole grid into device memory (median)
  double surfaces_ms = 0;  // both surfaces from that device grid, meshes copied to the host (median)
  display::Mesh positive, negative;
};

// Runs grid kernel -> +iso surface -> -iso surface on `device`, `repeats` times after a warm-up;
// no copy of the grid to the host between the stages.
DeviceLoop time_device_loop(int device, const orbital::cuda_backend::GpuJob& job,
                            const display::detail::GridGeometry& above,
                            const display::detail::GridGeometry& below, int repeats);

}  // namespace molaccel::bench_display

// The display loop on one GPU with no host round trip of the grid: the orbital engine's kernel
// (through its DeviceState, as time_kernel does) writes the grid into device memory, and the display
// module's isosurface kernels read it there.
#include <algorithm>
#include <chrono>
#include <vector>

#include "display_on_device.hpp"
#include "orbital/cuda/device_state.cuh"

namespace molaccel::bench_display {

DeviceLoop time_device_loop(int device, const orbital::cuda_backend::GpuJob& job,
                            const display::detail::GridGeometry& above,
                            const display::detail::GridGeometry& below, int repeats) {
  using Clock = std::chrono::steady_clock;
  cuda::DeviceGuard guard(device);
  orbital::cuda_backend::DeviceState st;
  st.init(job, device, job.jit);
  const orbital::GridSpec& grid = *job.grid;
  st.result.resize(grid.point_count());
  WorkerInfo worker;
  worker.kind = WorkerInfo::Kind::gpu;
  worker.device = device;
  WorkerContext ctx(worker);
  std::vector<double> grid_ms, surface_ms;
  DeviceLoop out;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms up (JIT load, scratch)
    const auto t0 = Clock::now();
    orbital::cuda_backend::launch_planes(st, job, 0, grid.counts[0], st.result.data());
    MOLACCEL_CUDA_TRY(cudaStreamSynchronize(st.stream->get()));
    const auto t1 = Clock::now();
    out.positive = display::cuda::extract_isosurface_on_device(ctx, above, st.result.data());
    out.negative = display::cuda::extract_isosurface_on_device(ctx, below, st.result.data());
    const auto t2 = Clock::now();
    if (r == 0) continue;
    grid_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    surface_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::sort(grid_ms.begin(), grid_ms.end());
  std::sort(surface_ms.begin(), surface_ms.end());
  out.grid_ms = grid_ms[grid_ms.size() / 2];
  out.surfaces_ms = surface_ms[surface_ms.size() / 2];
  return out;
}

}  // namespace molaccel::bench_display

// The display loop on one GPU with no host round trip of the grid: the orbital engine writes the
// grid into device memory (cuda_backend::evaluate_on_device), and the display module's isosurface
// kernels read it there.
#include <algorithm>
#include <chrono>
#include <vector>

#include "display_on_device.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::bench_display {

DeviceLoop time_device_loop(int device, const orbital::cuda_backend::GpuJob& job,
                            const display::detail::GridGeometry& above,
                            const display::detail::GridGeometry& below, int repeats) {
  using Clock = std::chrono::steady_clock;
  cuda::DeviceGuard guard(device);
  const orbital::GridSpec& grid = *job.grid;
  cuda::DeviceBuffer<float> values(grid.point_count());
  WorkerInfo worker;
  worker.kind = WorkerInfo::Kind::gpu;
  worker.device = device;
  WorkerContext ctx(worker);
  std::vector<double> grid_ms, surface_ms;
  DeviceLoop out;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms up (JIT load, scratch)
    const auto t0 = Clock::now();
    void* stream = orbital::cuda_backend::evaluate_on_device(ctx, job, values.data());
    MOLACCEL_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    const auto t1 = Clock::now();
    out.positive = display::cuda::extract_isosurface_on_device(ctx, above, values.data());
    out.negative = display::cuda::extract_isosurface_on_device(ctx, below, values.data());
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

#include "device_timing.hpp"

#include <algorithm>
#include <vector>

#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::orbital_bench {

double median_device_ms(int device, std::size_t floats, const std::function<void*(float* out)>& enqueue,
                        int repeats) {
  cuda::DeviceGuard guard(device);
  cuda::DeviceBuffer<float> out(floats);
  std::vector<float> times;
  // The stream is known once the call has returned it: the warm-up run learns it, the timed runs
  // record `start` on it before enqueueing.
  cudaStream_t stream = nullptr;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms up (JIT load, caches)
    cuda::Event start, stop;
    if (r > 0) start.record(stream);
    stream = static_cast<cudaStream_t>(enqueue(out.data()));
    stop.record(stream);
    stop.synchronize();
    if (r > 0) times.push_back(stop.elapsed_ms_since(start));
  }
  std::sort(times.begin(), times.end());
  return times.empty() ? 0.0 : times[times.size() / 2];
}

}  // namespace molaccel::orbital_bench

// CUDA event timing of work that a library call enqueues on a stream of its own (CUDA-free header).
#pragma once

#include <cstddef>
#include <functional>

namespace molaccel::orbital_bench {

// Median milliseconds of `repeats` runs of `enqueue(out)` after one warm-up run, each timed by CUDA
// events around it on the stream it returns (a cudaStream_t); `out` is a device buffer of `floats`
// on `device`, allocated once.
double median_device_ms(int device, std::size_t floats, const std::function<void*(float* out)>& enqueue,
                        int repeats);

}  // namespace molaccel::orbital_bench

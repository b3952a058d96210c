// The narrow, CUDA-free interface between the runtime's host code and its CUDA translation unit
// (cuda/cuda_support.cu, or no_cuda.cpp in a CPU-only build).
#pragma once

#include <string>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::detail {

// Enumerates usable GPUs and their properties without creating any context (free_memory = 0);
// on none, `reason` says why.
std::vector<GpuInfo> query_gpus(std::string& reason);
// Current free memory of each listed GPU: creates the contexts that do not exist yet (in parallel;
// microseconds per device once they do); the calling thread's current device is left as it was.
void refresh_free_memory(std::vector<GpuInfo>& gpus) noexcept;
// Makes `device` current on the calling thread (GPU worker start-up).
void bind_thread_to_device(int device);
// Drops per-thread CUDA state on worker exit (no-op without CUDA).
void release_thread_device() noexcept;
// Page-locked host memory, or nullptr when it cannot be had (no CUDA, no driver, refused).
void* allocate_page_locked(std::size_t bytes) noexcept;
void free_page_locked(void* p) noexcept;

}  // namespace molaccel::detail

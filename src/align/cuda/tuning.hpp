// Settings of the CUDA backend that a search may change (plain types: included by the C++20 engine
// and by the CUDA translation units). tuning_for() in dispatch.cu picks them per device; tests and
// benchmarks pass another one through the engine's internal entries (align/kernels.hpp).
#pragma once

#include <cstdint>

namespace molaccel::align::gpu_entry {

struct Tuning {
  // Subjects longer than this go to the intra-task kernel, the others to the inter-task kernel.
  // Side by side on 1 / 4 GPUs: 3000 -> 1.363 / 0.411 s, 2048 -> 1.478 / 0.431 s, 1024 -> 1.858 /
  // 0.479 s. Higher thresholds lengthen the inter-task kernel's longest item (one thread: query
  // length x subject length).
  unsigned long_threshold = 3000;
  // Residues per pipeline chunk; 0 = automatic (chunk_residues_for in dispatch.cu).
  std::uint64_t chunk_residues = 0;
};

}  // namespace molaccel::align::gpu_entry

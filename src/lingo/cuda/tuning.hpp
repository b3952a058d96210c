// How the CUDA backend runs a job: pass sizes, block steps and host copy threads, chosen in one
// place (tuning_for). CUDA-free: tests and benchmarks build another Tuning and hand it to GpuJob.
#pragma once

#include <cstddef>
#include <string_view>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::cuda_backend {

struct Tuning {
  // fp32 elements per pipelined pass through the pinned staging buffers (128 MiB); fp16 / u8
  // passes take 2x / 4x the rows, so every type stages the same bytes.
  std::size_t staged_pass_elements = std::size_t{1} << 25;
  // Elements per pass when the copy engine writes a page-locked destination directly: no staging
  // to size, and fewer, larger passes measured faster (32,768^2 fp32: 93 ms against 100 ms).
  std::size_t direct_pass_elements = std::size_t{1} << 27;
  // Pipelined passes start at 1/8 of the pass size and double, so that the first computation,
  // which no copy overlaps, is short; false: all passes equal.
  bool grow_passes = true;
  // Window pairs (2 x 256 database columns) one block walks at most with its query table (amortises
  // the table build); fewer when a pass has few query groups, so a launch still fills the GPU.
  std::size_t block_steps = 4;
  // GpuJob::on_device only: elements per pass; 0 = the whole rect in one pass when its results
  // fit in a quarter of the free memory (one prologue and one tail), else the dense budget's passes.
  std::size_t device_pass_elements = 0;
  // Host threads copying staged passes into ordinary memory (one cannot keep up with PCIe);
  // 0 = min(16, logical cores).
  int drain_threads = 0;
};

// What tuning_for may look at.
struct Problem {
  Metric metric = Metric::tanimoto;
  std::size_t queries = 0, database = 0;
};

// The tuning of `problem` on CUDA device `device`. Every setting is the same on every device and
// problem measured so far; this is where a device- or size-dependent choice would go.
Tuning tuning_for(int device, const Problem& problem);

// Sets one field from "name=value" (the field names above; grow_passes takes 0 or 1), for the
// benchmarks' --tuning. Throws molaccel::Error for an unknown name or a malformed value.
void set_tuning(Tuning& tuning, std::string_view name_value);

}  // namespace molaccel::lingo::cuda_backend

// Plain-type boundary between the C++20 engine and its CUDA translation unit (nvcc builds the
// project's .cu files as C++17, so no std::span or engine headers cross this line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "molaccel/runtime.hpp"

namespace molaccel::align::gpu_entry {

struct QueryView {
  const std::uint8_t* codes = nullptr;
  std::size_t length = 0;
};

struct TileRequest {
  const std::uint8_t* residues = nullptr;  // subject i = residues[offsets[i], offsets[i+1])
  const std::uint64_t* offsets = nullptr;  // count+1 absolute offsets, sorted by length
  std::size_t count = 0;
  const QueryView* queries = nullptr;
  std::size_t query_count = 0;
  const int* matrix = nullptr;  // 32x32, [query letter][subject letter], padding row/column set
  int gap_open = 11, gap_extend = 1;
  int saturation_threshold = 32767;
  int* const* scores = nullptr;  // per query: `count` outputs
};

struct TileResult {
  std::string kernel;
  std::uint64_t rescored = 0;
  double device_seconds = 0;  // kernel launch to results on the host, summed over queries
};

// Scores every query against every subject of the tile on the worker's GPU.
void score_tile(WorkerContext& ctx, const TileRequest& request, TileResult& result);

}  // namespace molaccel::align::gpu_entry

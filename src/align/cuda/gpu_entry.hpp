// Plain-type boundary between the C++20 engine and its CUDA translation unit (nvcc builds the
// project's .cu files as C++17, so no std::span or engine headers cross this line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "align/cuda/tuning.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::align::gpu_entry {

struct QueryView {
  const std::uint8_t* codes = nullptr;
  std::size_t length = 0;
};

struct TileRequest {
  const std::uint8_t* residues = nullptr;  // subject i = residues[offsets[i], offsets[i+1])
  const std::uint64_t* offsets = nullptr;  // absolute offsets, sorted by length
  // Subjects of the tile, ascending in length: sorted positions (into offsets) of each tile
  // subject, or nullptr for the contiguous range [0, count) of offsets (count+1 entries).
  const std::uint32_t* subjects = nullptr;
  std::size_t count = 0;
  const QueryView* queries = nullptr;
  std::size_t query_count = 0;
  const int* matrix = nullptr;  // 32x32, [query letter][subject letter], padding row/column set
  int gap_open = 11, gap_extend = 1;
  int saturation_threshold = 32767;
  // Per query: the score of tile subject i goes to scores[q][subjects ? subjects[i] : i].
  int* const* scores = nullptr;
  int layout_threads = 1;          // host threads for the tile layout
  const Tuning* tuning = nullptr;  // nullptr: tuning_for(the worker's device)
};

struct TileResult {
  std::string kernel;
  std::uint64_t rescored = 0;
  // From the first kernel launch to the last score on the host (the pipeline overlaps the layout
  // and upload of later chunks with it).
  double device_seconds = 0;
};

// Scores every query against every subject of the tile on the worker's GPU.
void score_tile(WorkerContext& ctx, const TileRequest& request, TileResult& result);

// The worker's GPU ready for score_tile ahead of a search: the kernels loaded into its context,
// the pipeline's streams and events created (kept in ctx.kept, as score_tile keeps them).
void prepare(WorkerContext& ctx);

}  // namespace molaccel::align::gpu_entry

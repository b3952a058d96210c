// Adapter from the engine's kernel interface to the CUDA translation unit's plain-type entry.
#include <vector>

#include "align/cuda/gpu_entry.hpp"
#include "align/kernels.hpp"

namespace molaccel::align::detail::cuda {

void score_batch(WorkerContext& ctx, const std::vector<std::span<const std::uint8_t>>& queries,
                 const SubjectBatch& batch, const std::uint32_t* index, const Scoring& scoring,
                 std::vector<int*>& scores, int layout_threads, const gpu_entry::Tuning* tuning,
                 KernelCounters& counters) {
  std::vector<gpu_entry::QueryView> views;
  for (const auto& q : queries) views.push_back({q.data(), q.size()});
  std::vector<int> matrix(kMatrixStride * kMatrixStride, kPaddingScore);
  for (int a = 0; a < kAlphabetSize; ++a)
    for (int b = 0; b < kAlphabetSize; ++b) matrix[a * kMatrixStride + b] = scoring.matrix.at(a, b);
  gpu_entry::TileRequest request;
  request.residues = batch.residues;
  request.offsets = batch.offsets;
  request.subjects = index;
  request.count = batch.count;
  request.layout_threads = layout_threads;
  request.queries = views.data();
  request.query_count = views.size();
  request.matrix = matrix.data();
  request.gap_open = scoring.gap_open;
  request.gap_extend = scoring.gap_extend;
  request.saturation_threshold = saturation_threshold16(scoring);
  request.scores = scores.data();
  request.tuning = tuning;
  gpu_entry::TileResult result;
  gpu_entry::score_tile(ctx, request, result);
  counters.kernel = result.kernel;
  counters.rescored += result.rescored;
  counters.device_seconds += result.device_seconds;
}

void prepare(WorkerContext& ctx) {
  gpu_entry::prepare(ctx);
}

}  // namespace molaccel::align::detail::cuda

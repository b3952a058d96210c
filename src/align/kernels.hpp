// Internal interface between the front file (search.cpp) and the backends: each backend scores
// one query set against a batch of database subjects (a contiguous range of the length-sorted
// order). The reference backend is reference_score() in the public header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "align/cuda/tuning.hpp"
#include "molaccel/align.hpp"

namespace molaccel::align::detail {

// Subjects [0, count): subject i is residues[offsets[i], offsets[i+1]) (absolute offsets).
struct SubjectBatch {
  const std::uint8_t* residues = nullptr;
  const std::uint64_t* offsets = nullptr;
  std::size_t count = 0;
  std::span<const std::uint8_t> subject(std::size_t i) const {
    return {residues + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i])};
  }
  std::uint64_t residue_count() const { return count ? offsets[count] - offsets[0] : 0; }
};

struct KernelCounters {
  std::string kernel;
  std::uint64_t rescored = 0;
  double device_seconds = 0;
};

// Saturation threshold of 16-bit lanes: a lane whose running maximum reaches it may have
// overflowed (each cell exceeds its predecessors by at most the matrix maximum), so its pair is
// rescored in 32 bits. Shared by the CPU and GPU kernels so both flag the same pairs.
inline int saturation_threshold16(const Scoring& scoring) {
  return 32767 - std::max(1, scoring.matrix.max_score());
}
inline int saturation_threshold8(const Scoring& scoring) {
  return 127 - std::max(1, scoring.matrix.max_score());
}
// 8-bit lanes are exact below their threshold only when gap values (>= -open - extend) and
// substitution scores cannot wrap, and useful only when the threshold leaves room.
inline bool eight_bit_lanes_apply(const Scoring& scoring) {
  return scoring.gap_open + scoring.gap_extend <= 127 && scoring.matrix.max_score() <= 63 &&
         scoring.matrix.min_score() >= -127;
}
// Score of the padding residue that fills short lanes: low enough that a padded cell can never
// beat the real cells it derives from, high enough to stay far from 16-bit wrap-around.
inline constexpr int kPaddingScore = -1024;

namespace cpu {
// Scores of one query against every subject of the batch (multi-threaded, vectorised).
void score_batch(std::span<const std::uint8_t> query, const SubjectBatch& batch, const Scoring& scoring,
                 int threads, int* scores, KernelCounters& counters);
}  // namespace cpu

namespace cuda {
// Scores of every query against every subject of the batch on `device`; scores[q][i].
// Throws NotCompiled in a CPU-only build.
// Device buffers are kept per worker across tiles through ctx.local().
// With `index`, tile subject i is batch subject index[i] (ascending lengths) and its score goes to
// scores[q][index[i]]; without, subject i of the contiguous batch, to scores[q][i].
// `layout_threads` host threads lay the tile out for the device. `tuning`: nullptr for the
// device's own (gpu_entry::tuning_for).
void score_batch(WorkerContext& ctx, const std::vector<std::span<const std::uint8_t>>& queries,
                 const SubjectBatch& batch, const std::uint32_t* index, const Scoring& scoring,
                 std::vector<int*>& scores, int layout_threads, const gpu_entry::Tuning* tuning,
                 KernelCounters& counters);
// The worker's GPU ready for score_batch (gpu_entry::prepare); nothing in a CPU-only build.
void prepare(WorkerContext& ctx);
}  // namespace cuda

// score_database_batch with explicit GPU settings (tests and benchmarks; nullptr: tuning_for).
std::vector<std::vector<int>> score_database_batch(const Resources& resources, const SequenceSet& queries,
                                                   const Database& database, const Scoring& scoring,
                                                   Backend backend, ScoreStats* stats,
                                                   const gpu_entry::Tuning* tuning);

// score_database_batch on a given worker pool (tests: e.g. two workers on the same GPU exercise
// the multi-device path on a one-GPU machine). `job_stats` receives the scheduler's statistics.
std::vector<std::vector<int>> score_database_batch_on(WorkerPool& pool, int cpu_threads,
                                                      const SequenceSet& queries, const Database& database,
                                                      const Scoring& scoring, Backend backend,
                                                      ScoreStats* stats = nullptr,
                                                      JobStats* job_stats = nullptr,
                                                      const gpu_entry::Tuning* tuning = nullptr);

// The hits TSV with subject ids from a function of (query, rank in the query's list): a whole
// database's ids, or the ids that ranks sent with their merged winners.
void write_hits_tsv(const std::filesystem::path& path, const SequenceSet& queries, const SearchResult& result,
                    const std::function<const std::string&(std::size_t query, std::size_t rank)>& subject_id);

}  // namespace molaccel::align::detail

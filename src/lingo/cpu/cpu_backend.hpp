// CPU backend: the database as chunks of inverted indexes (built once per job), and the block
// routines the front file's tiles call. Multi-threaded with molaccel::parallel_for over queries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lingo/cpu/score_chunk.hpp"
#include "lingo/encoding.hpp"

namespace molaccel::lingo::cpu {

struct Chunk {
  std::uint32_t begin = 0, end = 0;          // positions in CpuDatabase::order
  std::uint32_t min_size = 0, max_size = 0;  // of the metric's size (magnitude or distinct)
  std::vector<std::uint32_t> keys, offsets, member_counts, magnitudes, distinct;
  std::vector<std::uint16_t> members;
  ChunkView view() const;
};

struct CpuDatabase {
  std::vector<std::uint32_t> order;  // position -> database molecule
  std::vector<Chunk> chunks;
  std::size_t chunk_size = 0;
};

constexpr std::size_t kDefaultChunk = 8192;  // 32 KiB of counters: stays in L1

// sort_by_size: positions ordered by the metric's size (for the length bound); else identity.
CpuDatabase build_database(const detail::EncodedSet& db, Metric metric, bool sort_by_size,
                           std::size_t chunk_size, int threads);

// Dense rows [row_begin, row_end) x chunks [chunk_begin, chunk_end) of an identity-ordered
// database, row-major into out with leading dimension ld.
void score_dense(const CpuDatabase& db, const detail::EncodedSet& queries, Metric metric,
                 std::size_t row_begin, std::size_t row_end, std::size_t chunk_begin, std::size_t chunk_end,
                 float* out, std::size_t ld, int threads);

// Pairs with similarity >= threshold for rows [row_begin, row_end) against a size-sorted
// database; self: only targets > query. Chunks outside the length bound are skipped.
struct ThresholdResult {
  std::vector<Hit> hits;
  std::size_t evaluated = 0, skipped = 0;
};
ThresholdResult score_threshold(const CpuDatabase& db, const detail::EncodedSet& queries, Metric metric,
                                float threshold, bool self, std::size_t row_begin, std::size_t row_end,
                                int threads);

QueryView query_view(const detail::EncodedSet& set, std::size_t i);
std::uint32_t metric_size(const detail::EncodedSet& set, std::size_t i, Metric metric);

// Whether a pair of sizes can reach `threshold`: similarity <= min/max for every metric
// (tanimoto on magnitudes, set and vidal on distinct counts). Conservative by a margin, so a pair
// is never skipped because of rounding.
bool within_length_bound(std::uint32_t size_a, std::uint32_t size_b, float threshold);

}  // namespace molaccel::lingo::cpu

// Helpers shared by the LINGO functions across MPI ranks (distributed_read.cpp,
// distributed_replicated.cpp, distributed_ring.cpp; defined in distributed_util.cpp): ranges of
// about equal work, the reported order of hits, hits as bytes, the neighbour threshold's check and
// the pairs at or above it between two slices of molecules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::detail {

static_assert(std::is_trivially_copyable_v<Hit>);

// Boundaries [b_r, b_{r+1}) of `ranks` contiguous ranges of `weights` with about equal sums.
std::vector<std::size_t> balanced_ranges(const std::vector<std::uint64_t>& weights, int ranks);

inline std::vector<std::size_t> iota_range(std::size_t begin, std::size_t end) {
  std::vector<std::size_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

inline bool reported_before(const Hit& a, const Hit& b) {
  if (a.similarity != b.similarity) return a.similarity > b.similarity;
  return a.target < b.target;
}

inline std::vector<Hit> from_bytes(const std::vector<std::byte>& bytes) {
  std::vector<Hit> hits(bytes.size() / sizeof(Hit));
  if (!hits.empty()) std::memcpy(hits.data(), bytes.data(), hits.size() * sizeof(Hit));
  return hits;
}

inline void add_info(RunInfo* info, const RunInfo& local) {
  if (!info) return;
  *info = local;
}

void check_threshold(float threshold);

// butina_clusters, its time added to info->seconds (a cluster call's seconds are the whole call:
// the neighbour search and the Butina pass). Every cluster path, one process or across ranks.
Clustering timed_butina(std::size_t molecules, const std::vector<Hit>& pairs, RunInfo* info);

void sort_pairs(std::vector<Hit>& pairs);

// The pairs at or above `threshold` between `rows` (molecules row_first...) and `columns`
// (column_first...), each as (lower index, higher index), appended to `out`: every pair of the
// block when `disjoint` (two different slices), else only those with the row's index below the
// column's (a triangle). The size bound of the single-process run: similarity <= min(|A|,|B|) /
// max(|A|,|B|) (magnitudes for tanimoto, distinct Lingos for set and vidal), with the same 1e-6
// relative margin for fp32 rounding, so no pair at or above T is skipped. Rows go by increasing
// size in chunks; each chunk is computed as a dense block against only the columns whose size its
// rows can reach. Threshold 0: every pair, no bound.
void pairs_between(const Resources& resources, const MoleculeSet& rows, std::size_t row_first,
                   const MoleculeSet& columns, std::size_t column_first, bool disjoint, float threshold,
                   const ComputeOptions& options, RunInfo& info, std::vector<Hit>& out);

}  // namespace molaccel::lingo::detail

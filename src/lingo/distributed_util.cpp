// The helpers of distributed_util.hpp that are not inline there.

#include <algorithm>

#include "lingo/distributed_util.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::lingo::detail {

std::vector<std::size_t> balanced_ranges(const std::vector<std::uint64_t>& weights, int ranks) {
  std::vector<std::uint64_t> prefix(weights.size() + 1, 0);
  for (std::size_t i = 0; i < weights.size(); ++i) prefix[i + 1] = prefix[i] + weights[i];
  std::vector<std::size_t> bounds(static_cast<std::size_t>(ranks) + 1, weights.size());
  bounds[0] = 0;
  for (int r = 1; r < ranks; ++r) {
    const std::uint64_t target =
        prefix.back() * static_cast<std::uint64_t>(r) / static_cast<std::uint64_t>(ranks);
    bounds[static_cast<std::size_t>(r)] =
        static_cast<std::size_t>(std::lower_bound(prefix.begin(), prefix.end() - 1, target) - prefix.begin());
  }
  for (int r = 1; r <= ranks; ++r)
    bounds[static_cast<std::size_t>(r)] =
        std::max(bounds[static_cast<std::size_t>(r)], bounds[static_cast<std::size_t>(r) - 1]);
  return bounds;
}

Clustering timed_butina(std::size_t molecules, const std::vector<Hit>& pairs, RunInfo* info) {
  const double t0 = now_seconds();
  Clustering c = butina_clusters(molecules, pairs);
  if (info) info->seconds += now_seconds() - t0;
  return c;
}

void check_threshold(float threshold) {
  if (!(threshold >= 0.0f && threshold <= 1.0f))
    throw InputError("--threshold", 0, fmt::format("threshold must be in [0, 1], got {}", threshold));
}

void sort_pairs(std::vector<Hit>& pairs) {
  std::sort(pairs.begin(), pairs.end(), [](const Hit& x, const Hit& y) {
    return x.query != y.query ? x.query < y.query : x.target < y.target;
  });
}
void pairs_between(const Resources& resources, const MoleculeSet& rows, std::size_t row_first,
                   const MoleculeSet& columns, std::size_t column_first, bool disjoint, float threshold,
                   const ComputeOptions& options, RunInfo& info, std::vector<Hit>& out) {
  if (rows.size() == 0 || columns.size() == 0) return;
  auto size_in = [&](const MoleculeSet& set, std::size_t i) -> double {
    return static_cast<double>(options.metric == Metric::tanimoto ? set.magnitudes[i] : set.distinct(i));
  };
  const double t = static_cast<double>(threshold) * (1.0 - 1e-6);
  std::vector<std::size_t> rows_by_size = iota_range(0, rows.size()),
                           columns_by_size = iota_range(0, columns.size());
  std::stable_sort(rows_by_size.begin(), rows_by_size.end(),
                   [&](std::size_t x, std::size_t y) { return size_in(rows, x) < size_in(rows, y); });
  std::stable_sort(columns_by_size.begin(), columns_by_size.end(),
                   [&](std::size_t x, std::size_t y) { return size_in(columns, x) < size_in(columns, y); });
  // Rows per block: at most 512, and a block of at most ~64 M similarities.
  const std::size_t chunk_rows = std::clamp<std::size_t>((std::size_t{64} << 20) / columns.size(), 1, 512);
  std::vector<float> block;
  for (std::size_t c0 = 0; c0 < rows_by_size.size(); c0 += chunk_rows) {
    const std::vector<std::size_t> row_ids(
        rows_by_size.begin() + static_cast<std::ptrdiff_t>(c0),
        rows_by_size.begin() + static_cast<std::ptrdiff_t>(std::min(rows_by_size.size(), c0 + chunk_rows)));
    std::vector<std::size_t> column_ids;
    if (t > 0) {
      const double smin = size_in(rows, row_ids.front()), smax = size_in(rows, row_ids.back());
      if (smax == 0) continue;  // molecules without Lingos reach nothing above 0
      const auto first = std::partition_point(columns_by_size.begin(), columns_by_size.end(),
                                              [&](std::size_t j) { return size_in(columns, j) < t * smin; });
      const auto last = std::partition_point(first, columns_by_size.end(),
                                             [&](std::size_t j) { return t * size_in(columns, j) <= smax; });
      column_ids.assign(first, last);
    } else {
      column_ids = columns_by_size;
    }
    if (column_ids.empty()) continue;
    const MoleculeSet chunk = subset(rows, row_ids), chunk_columns = subset(columns, column_ids);
    block.resize(row_ids.size() * column_ids.size());
    RunInfo part;
    similarity_matrix(resources, chunk, &chunk_columns, block.data(), options, &part);
    info.pairs += part.pairs;
    info.job.seconds += part.job.seconds;
    info.backend = part.backend;
    for (std::size_t r = 0; r < row_ids.size(); ++r)
      for (std::size_t c = 0; c < column_ids.size(); ++c) {
        const float s = block[r * column_ids.size() + c];
        const auto i = static_cast<std::uint32_t>(row_first + row_ids[r]),
                   j = static_cast<std::uint32_t>(column_first + column_ids[c]);
        if (s >= threshold && (i < j || (disjoint && i != j)))
          out.push_back({std::min(i, j), std::max(i, j), s});
      }
  }
}

}  // namespace molaccel::lingo::detail

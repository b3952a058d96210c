#include "lingo/reference/reference.hpp"

namespace molaccel::lingo::reference {

float pair_similarity(const MoleculeSet& a, std::size_t i, const MoleculeSet& b, std::size_t j,
                      Metric metric) {
  std::uint64_t ia = a.offsets[i], ea = a.offsets[i + 1];
  std::uint64_t ib = b.offsets[j], eb = b.offsets[j + 1];
  std::uint64_t intersection = 0;     // sum of min counts
  std::uint64_t shared_distinct = 0;  // Lingos present in both
  std::uint64_t vidal_fixed_sum = 0;  // sum of floor(2^32 * 2 min / (ca + cb))
  while (ia < ea && ib < eb) {
    const std::uint64_t ka = a.key(ia), kb = b.key(ib);
    if (ka == kb) {
      const std::uint64_t ca = a.counts[ia], cb = b.counts[ib];
      const std::uint64_t m = ca < cb ? ca : cb;
      intersection += m;
      shared_distinct += 1;
      vidal_fixed_sum += ((2 * m) << 32) / (ca + cb);
      ++ia;
      ++ib;
    } else if (ka < kb) {
      ++ia;
    } else {
      ++ib;
    }
  }
  std::uint64_t union_size = 0;
  switch (metric) {
    case Metric::tanimoto:
      union_size = a.magnitudes[i] + b.magnitudes[j] - intersection;
      if (union_size == 0) return 0.0f;
      return static_cast<float>(intersection) / static_cast<float>(union_size);
    case Metric::set:
      union_size = a.distinct(i) + b.distinct(j) - shared_distinct;
      if (union_size == 0) return 0.0f;
      return static_cast<float>(shared_distinct) / static_cast<float>(union_size);
    case Metric::vidal:
      union_size = a.distinct(i) + b.distinct(j) - shared_distinct;
      if (union_size == 0) return 0.0f;
      return static_cast<float>(static_cast<double>(vidal_fixed_sum) / 4294967296.0 /
                                static_cast<double>(union_size));
  }
  return 0.0f;
}

void score_block(const MoleculeSet& queries, const MoleculeSet& db, std::size_t row_begin,
                 std::size_t row_end, std::size_t col_begin, std::size_t col_end, Metric metric, float* out) {
  const std::size_t ld = col_end - col_begin;
  for (std::size_t r = row_begin; r < row_end; ++r)
    for (std::size_t c = col_begin; c < col_end; ++c)
      out[(r - row_begin) * ld + (c - col_begin)] = pair_similarity(queries, r, db, c, metric);
}

}  // namespace molaccel::lingo::reference

// Compiled per ISA by molaccel_add_multiversion (MOLACCEL_ISA_NAMESPACE = isa_scalar, isa_avx2...).
// The accumulation is a scatter (postings of one Lingo hit distinct molecules); the final loop over
// the chunk converts counts to similarities and is what the wider ISAs vectorise.
#include <algorithm>
#include <cstring>

#include "lingo/cpu/score_chunk.hpp"
#include "lingo/similarity_math.hpp"

namespace molaccel::lingo::cpu::MOLACCEL_ISA_NAMESPACE {
namespace {

template <Metric metric>
void accumulate(const QueryView& query, const ChunkView& chunk, std::uint32_t* shared,
                std::uint64_t* fixed_sum) {
  const std::uint32_t* key = chunk.keys;
  const std::uint32_t* const keys_end = chunk.keys + chunk.key_count;
  for (std::uint32_t t = 0; t < query.length && key != keys_end; ++t) {
    const std::uint32_t id = query.ids[t];
    key = std::lower_bound(key, keys_end, id);  // query ids ascend: the search only moves forward
    if (key == keys_end || *key != id) continue;
    const std::uint32_t a = query.counts[t];
    const std::size_t k = static_cast<std::size_t>(key - chunk.keys);
    const std::uint16_t* member = chunk.members + chunk.offsets[k];
    const std::uint16_t* const member_end = chunk.members + chunk.offsets[k + 1];
    const std::uint32_t* count = chunk.member_counts + chunk.offsets[k];
    for (; member != member_end; ++member, ++count) {
      if constexpr (metric == Metric::tanimoto) {
        shared[*member] += std::min(a, *count);
      } else if constexpr (metric == Metric::set) {
        shared[*member] += 1;
      } else {
        shared[*member] += 1;
        fixed_sum[*member] += detail::vidal_term(a, *count);
      }
    }
  }
}

}  // namespace

void score_chunk(Metric metric, const QueryView& query, const ChunkView& chunk, float* out,
                 std::uint32_t* shared, std::uint64_t* fixed_sum) {
  const std::uint32_t n = chunk.size;
  std::memset(shared, 0, n * sizeof(std::uint32_t));
  switch (metric) {
    case Metric::tanimoto: {
      accumulate<Metric::tanimoto>(query, chunk, shared, fixed_sum);
      const std::uint32_t qm = query.magnitude;
      const std::uint32_t* mags = chunk.magnitudes;
      for (std::uint32_t j = 0; j < n; ++j) out[j] = detail::ratio_similarity(shared[j], qm, mags[j]);
      break;
    }
    case Metric::set: {
      accumulate<Metric::set>(query, chunk, shared, fixed_sum);
      const std::uint32_t qd = query.distinct;
      const std::uint32_t* dist = chunk.distinct;
      for (std::uint32_t j = 0; j < n; ++j) out[j] = detail::ratio_similarity(shared[j], qd, dist[j]);
      break;
    }
    case Metric::vidal: {
      std::memset(fixed_sum, 0, n * sizeof(std::uint64_t));
      accumulate<Metric::vidal>(query, chunk, shared, fixed_sum);
      const std::uint32_t qd = query.distinct;
      for (std::uint32_t j = 0; j < n; ++j)
        out[j] = detail::vidal_similarity(fixed_sum[j], shared[j], qd, chunk.distinct[j]);
      break;
    }
  }
}

}  // namespace molaccel::lingo::cpu::MOLACCEL_ISA_NAMESPACE

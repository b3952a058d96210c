#include "lingo/cpu/cpu_backend.hpp"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <utility>

namespace molaccel::lingo::cpu {

ChunkView Chunk::view() const {
  ChunkView v;
  v.size = end - begin;
  v.key_count = static_cast<std::uint32_t>(keys.size());
  v.keys = keys.data();
  v.offsets = offsets.data();
  v.members = members.data();
  v.member_counts = member_counts.data();
  v.magnitudes = magnitudes.data();
  v.distinct = distinct.data();
  return v;
}

QueryView query_view(const detail::EncodedSet& set, std::size_t i) {
  QueryView q;
  q.ids = set.ids.data() + set.offsets[i];
  q.counts = set.counts.data() + set.offsets[i];
  q.length = static_cast<std::uint32_t>(set.offsets[i + 1] - set.offsets[i]);
  q.magnitude = set.magnitudes[i];
  q.distinct = set.distinct[i];
  return q;
}

std::uint32_t metric_size(const detail::EncodedSet& set, std::size_t i, Metric metric) {
  return metric == Metric::tanimoto ? set.magnitudes[i] : set.distinct[i];
}

bool within_length_bound(std::uint32_t size_a, std::uint32_t size_b, float threshold) {
  const double lo = std::min(size_a, size_b), hi = std::max(size_a, size_b);
  if (hi == 0) return threshold <= 0.0f;
  return lo / hi >= static_cast<double>(threshold) - 1e-6;
}

CpuDatabase build_database(const detail::EncodedSet& db, Metric metric, bool sort_by_size,
                           std::size_t chunk_size, int threads) {
  MOLACCEL_EXPECTS(chunk_size > 0 && chunk_size <= 65536, "chunk size must fit 16-bit members");
  CpuDatabase out;
  out.chunk_size = chunk_size;
  const std::size_t n = db.size();
  out.order.resize(n);
  std::iota(out.order.begin(), out.order.end(), 0u);
  if (sort_by_size)
    std::stable_sort(out.order.begin(), out.order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return metric_size(db, a, metric) < metric_size(db, b, metric);
    });
  const std::size_t n_chunks = (n + chunk_size - 1) / chunk_size;
  out.chunks.resize(n_chunks);
  // Radix digits of the ids: as many 16-bit digits as the largest id needs (one below 65,536).
  std::uint32_t max_id = 0;
  for (const std::uint32_t id : db.ids) max_id = std::max(max_id, id);
  const int digits = max_id < (1u << 16) ? 1 : 2;
  parallel_for(n_chunks, threads, 1, [&](std::size_t cb, std::size_t ce) {
    struct Posting {
      std::uint32_t id;
      std::uint16_t member;
      std::uint32_t count;
    };
    std::vector<Posting> postings, sorted;
    std::vector<std::uint32_t> starts(std::size_t{1} << 16);
    for (std::size_t c = cb; c < ce; ++c) {
      Chunk& chunk = out.chunks[c];
      chunk.begin = static_cast<std::uint32_t>(c * chunk_size);
      chunk.end = static_cast<std::uint32_t>(std::min(n, (c + 1) * chunk_size));
      postings.clear();
      chunk.min_size = ~0u;
      chunk.max_size = 0;
      for (std::uint32_t p = chunk.begin; p < chunk.end; ++p) {
        const std::uint32_t m = out.order[p];
        chunk.magnitudes.push_back(db.magnitudes[m]);
        chunk.distinct.push_back(db.distinct[m]);
        const std::uint32_t size = metric_size(db, m, metric);
        chunk.min_size = std::min(chunk.min_size, size);
        chunk.max_size = std::max(chunk.max_size, size);
        for (std::uint64_t e = db.offsets[m]; e < db.offsets[m + 1]; ++e)
          postings.push_back({db.ids[e], static_cast<std::uint16_t>(p - chunk.begin), db.counts[e]});
      }
      // Members ascend within a key (a stable sort on id: least significant digit first, each pass
      // a counting sort that keeps the order it finds), so accumulation walks memory forward.
      sorted.resize(postings.size());
      for (int d = 0; d < digits; ++d) {
        const int shift = 16 * d;
        std::fill(starts.begin(), starts.end(), 0u);
        for (const Posting& p : postings) ++starts[(p.id >> shift) & 0xffff];
        std::uint32_t at = 0;
        for (std::uint32_t& start : starts) at += std::exchange(start, at);
        for (const Posting& p : postings) sorted[starts[(p.id >> shift) & 0xffff]++] = p;
        postings.swap(sorted);
      }
      chunk.members.reserve(postings.size());
      chunk.member_counts.reserve(postings.size());
      for (std::size_t i = 0; i < postings.size(); ++i) {
        if (i == 0 || postings[i].id != postings[i - 1].id) {
          chunk.keys.push_back(postings[i].id);
          chunk.offsets.push_back(static_cast<std::uint32_t>(i));
        }
        chunk.members.push_back(postings[i].member);
        chunk.member_counts.push_back(postings[i].count);
      }
      chunk.offsets.push_back(static_cast<std::uint32_t>(postings.size()));
    }
  });
  return out;
}

void score_dense(const CpuDatabase& db, const detail::EncodedSet& queries, Metric metric,
                 std::size_t row_begin, std::size_t row_end, std::size_t chunk_begin, std::size_t chunk_end,
                 float* out, std::size_t ld, int threads) {
  const ScoreChunkFn score = select_score_chunk();
  const std::size_t col0 = chunk_begin * db.chunk_size;
  parallel_for(row_end - row_begin, threads, 4, [&](std::size_t b, std::size_t e) {
    std::vector<std::uint32_t> shared(db.chunk_size);
    std::vector<std::uint64_t> fixed(metric == Metric::vidal ? db.chunk_size : 0);
    for (std::size_t r = row_begin + b; r < row_begin + e; ++r) {
      const QueryView q = query_view(queries, r);
      for (std::size_t c = chunk_begin; c < chunk_end; ++c) {
        const Chunk& chunk = db.chunks[c];
        score(metric, q, chunk.view(), out + (r - row_begin) * ld + (chunk.begin - col0), shared.data(),
              fixed.data());
      }
    }
  });
}

ThresholdResult score_threshold(const CpuDatabase& db, const detail::EncodedSet& queries, Metric metric,
                                float threshold, bool self, std::size_t row_begin, std::size_t row_end,
                                int threads) {
  const ScoreChunkFn score = select_score_chunk();
  ThresholdResult result;
  std::mutex mutex;
  parallel_for(row_end - row_begin, threads, 4, [&](std::size_t b, std::size_t e) {
    std::vector<std::uint32_t> shared(db.chunk_size);
    std::vector<std::uint64_t> fixed(metric == Metric::vidal ? db.chunk_size : 0);
    std::vector<float> sims(db.chunk_size);
    std::vector<Hit> hits;
    std::size_t evaluated = 0, skipped = 0;
    for (std::size_t r = row_begin + b; r < row_begin + e; ++r) {
      const QueryView q = query_view(queries, r);
      const std::uint32_t qsize = metric_size(queries, r, metric);
      for (const Chunk& chunk : db.chunks) {
        const std::uint32_t n = chunk.end - chunk.begin;
        // Whole chunk outside the bound: its sizes all lie beyond the reachable range.
        if (!within_length_bound(qsize, chunk.min_size, threshold) &&
            !within_length_bound(qsize, chunk.max_size, threshold) &&
            ((chunk.max_size < qsize) || (chunk.min_size > qsize))) {
          skipped += n;
          continue;
        }
        score(metric, q, chunk.view(), sims.data(), shared.data(), fixed.data());
        evaluated += n;
        for (std::uint32_t j = 0; j < n; ++j) {
          if (!(sims[j] >= threshold)) continue;
          const std::uint32_t target = db.order[chunk.begin + j];
          if (self && target <= r) continue;
          hits.push_back({static_cast<std::uint32_t>(r), target, sims[j]});
        }
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    result.hits.insert(result.hits.end(), hits.begin(), hits.end());
    result.evaluated += evaluated;
    result.skipped += skipped;
  });
  return result;
}

}  // namespace molaccel::lingo::cpu

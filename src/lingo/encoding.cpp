#include "lingo/encoding.hpp"

#include <algorithm>
#include <iterator>

#include "runtime/host_resources.hpp"

namespace molaccel::lingo::detail {
namespace {

// Sorted unique keys of the database. Real vocabularies are small next to the key count (9,943
// distinct 4-Lingos in 12.7 M entries of the 367k set), so each thread collects a slice's distinct
// keys in a hash set and only the small per-slice vocabularies are sorted and merged.
std::vector<std::uint64_t> sorted_vocabulary(const MoleculeSet& db, int threads) {
  const std::size_t n = db.size();
  const std::size_t slices = std::max<std::size_t>(1, std::min<std::size_t>(64, n / 4096));
  std::vector<std::vector<std::uint64_t>> parts(slices);
  parallel_for(slices, threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p) {
      const std::size_t m0 = n * p / slices, m1 = n * (p + 1) / slices;
      // Open addressing, load <= 1/2; the table doubles as the slice's vocabulary grows. ~0 marks an
      // empty slot (the key ~0 itself, eight 0xff bytes, is kept aside).
      constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
      bool has_empty_key = false;
      std::vector<std::uint64_t> table(1024, kEmpty);
      std::size_t used = 0;
      int shift = 54;  // 64 - log2(table size)
      auto insert = [&](std::vector<std::uint64_t>& t, int sh, std::uint64_t key) {
        for (std::size_t s = static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> sh);;
             s = (s + 1) & (t.size() - 1)) {
          if (t[s] == key) return false;
          if (t[s] == kEmpty) {
            t[s] = key;
            return true;
          }
        }
      };
      for (std::uint64_t k = db.offsets[m0]; k < db.offsets[m1]; ++k) {
        const std::uint64_t key = db.key(k);
        if (key == kEmpty) {
          has_empty_key = true;
          continue;
        }
        if (!insert(table, shift, key) || 2 * ++used <= table.size()) continue;
        std::vector<std::uint64_t> larger(2 * table.size(), kEmpty);
        --shift;
        for (const std::uint64_t key : table)
          if (key != kEmpty) insert(larger, shift, key);
        table = std::move(larger);
      }
      auto& keys = parts[p];
      keys.reserve(used + 1);
      for (const std::uint64_t key : table)
        if (key != kEmpty) keys.push_back(key);
      if (has_empty_key) keys.push_back(kEmpty);
      std::sort(keys.begin(), keys.end());
    }
  });
  // The slices' vocabularies overlap almost entirely: merged pairwise (sorted unions) in rounds,
  // each round's merges on every core, rather than concatenated and sorted whole.
  for (std::size_t step = 1; step < parts.size(); step *= 2) {
    const std::size_t pairs = (parts.size() + 2 * step - 1) / (2 * step);
    parallel_for(pairs, threads, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p) {
        const std::size_t left = 2 * step * p, right = left + step;
        if (right >= parts.size()) continue;
        std::vector<std::uint64_t> merged;
        merged.reserve(std::max(parts[left].size(), parts[right].size()));
        std::set_union(parts[left].begin(), parts[left].end(), parts[right].begin(), parts[right].end(),
                       std::back_inserter(merged));
        parts[left] = std::move(merged);
        std::vector<std::uint64_t>().swap(parts[right]);
      }
    });
  }
  return std::move(parts[0]);
}

// Key -> vocabulary id, open addressing with linear probing at load <= 1/2: vocabularies are small
// (thousands to a few million keys), so the table stays in cache where a binary search would not.
class VocabularyIndex {
 public:
  explicit VocabularyIndex(const std::vector<std::uint64_t>& vocabulary) {
    std::size_t capacity = 16;
    while (capacity < 2 * vocabulary.size()) capacity *= 2;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c /= 2) --shift_;
    keys_.assign(capacity, 0);
    ids_.assign(capacity, kNone);
    for (std::size_t v = 0; v < vocabulary.size(); ++v) {
      std::size_t s = slot(vocabulary[v]);
      while (ids_[s] != kNone) s = (s + 1) & (capacity - 1);
      keys_[s] = vocabulary[v];
      ids_[s] = static_cast<std::uint32_t>(v);
    }
  }
  // The key's id, or kNone.
  std::uint32_t find(std::uint64_t key) const {
    for (std::size_t s = slot(key);; s = (s + 1) & (keys_.size() - 1)) {
      if (ids_[s] == kNone) return kNone;
      if (keys_[s] == key) return ids_[s];
    }
  }
  static constexpr std::uint32_t kNone = 0xffffffffu;

 private:
  std::size_t slot(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> shift_);
  }
  int shift_ = 60;
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> ids_;
};

// Encodes the database against its own vocabulary: every key is known, so the entries keep their
// places (offsets and counts as they are) and only the ids are looked up. The large arrays (ids and
// counts, an entry per distinct Lingo of each molecule) are faulted in ahead and filled on every core.
EncodedSet encode_database(const MoleculeSet& set, const VocabularyIndex& index, int threads) {
  EncodedSet out;
  const std::size_t n = set.size();
  out.offsets = set.offsets;
  out.magnitudes = set.magnitudes;
  molaccel::detail::resize_populated(out.ids, set.total_entries());
  molaccel::detail::resize_populated(out.counts, set.total_entries());
  out.distinct.resize(n);
  parallel_for(n, threads, 4096, [&](std::size_t begin, std::size_t end) {
    const auto first = static_cast<std::ptrdiff_t>(set.offsets[begin]),
               last = static_cast<std::ptrdiff_t>(set.offsets[end]);
    std::copy(set.counts.begin() + first, set.counts.begin() + last, out.counts.begin() + first);
    for (std::size_t i = begin; i < end; ++i) {
      for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e) out.ids[e] = index.find(set.key(e));
      out.distinct[i] = static_cast<std::uint32_t>(set.distinct(i));
    }
  });
  return out;
}

// Encodes `set` against `vocabulary`; unknown keys are dropped. Two passes on every core: the ids
// and each molecule's known count, then (after the offsets) the compacted ids and counts.
EncodedSet encode_set(const MoleculeSet& set, const VocabularyIndex& index, int threads) {
  EncodedSet out;
  const std::size_t n = set.size();
  std::vector<std::uint32_t> ids;
  molaccel::detail::resize_populated(ids, set.total_entries());
  out.offsets.assign(n + 1, 0);
  out.distinct.resize(n);
  parallel_for(n, threads, 4096, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      // Keys ascend within a molecule and ids follow key order, so the ids ascend too.
      std::uint64_t known = 0;
      for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e) {
        ids[e] = index.find(set.key(e));
        known += ids[e] != VocabularyIndex::kNone;
      }
      out.offsets[i + 1] = known;
      out.distinct[i] = static_cast<std::uint32_t>(set.distinct(i));
    }
  });
  for (std::size_t i = 0; i < n; ++i) out.offsets[i + 1] += out.offsets[i];
  out.ids.resize(out.offsets[n]);
  out.counts.resize(out.offsets[n]);
  out.magnitudes = set.magnitudes;
  parallel_for(n, threads, 4096, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      std::uint64_t o = out.offsets[i];
      for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e)
        if (ids[e] != VocabularyIndex::kNone) {
          out.ids[o] = ids[e];
          out.counts[o] = set.counts[e];
          ++o;
        }
    }
  });
  return out;
}

}  // namespace

Encoding encode(const MoleculeSet& queries, const MoleculeSet* database, int threads) {
  if (database) {
    if (database->q != queries.q)
      throw InputError("--q", 0,
                       fmt::format("queries use q={} but the database q={}", queries.q, database->q));
    if (database->preprocessing.digits != queries.preprocessing.digits ||
        database->preprocessing.halogens != queries.preprocessing.halogens)
      throw InputError("--digits", 0, "queries and database were preprocessed differently");
  }
  const MoleculeSet& db = database ? *database : queries;
  Encoding encoding;
  // The same set as queries and database is encoded once (the query set is the database's).
  encoding.self = database == nullptr || database == &queries;
  const auto vocabulary = sorted_vocabulary(db, threads);
  encoding.vocabulary_size = vocabulary.size();
  const VocabularyIndex index(vocabulary);
  encoding.database = encode_database(db, index, threads);
  if (!encoding.self) encoding.queries = encode_set(queries, index, threads);
  // Largest count per id: per-slice maxima on every core, then merged.
  const auto& e = encoding.database;
  const std::size_t slices = std::max<std::size_t>(1, std::min<std::size_t>(16, e.ids.size() >> 20));
  std::vector<std::vector<std::uint32_t>> maxima(slices);
  parallel_for(slices, threads, 1, [&](std::size_t b, std::size_t end) {
    for (std::size_t p = b; p < end; ++p) {
      auto& max_count = maxima[p];
      max_count.assign(vocabulary.size(), 0);
      for (std::size_t k = e.ids.size() * p / slices; k < e.ids.size() * (p + 1) / slices; ++k)
        max_count[e.ids[k]] = std::max(max_count[e.ids[k]], e.counts[k]);
    }
  });
  encoding.max_count = std::move(maxima[0]);
  for (std::size_t p = 1; p < slices; ++p)
    for (std::size_t v = 0; v < vocabulary.size(); ++v)
      encoding.max_count[v] = std::max(encoding.max_count[v], maxima[p][v]);
  return encoding;
}

std::vector<std::uint32_t> feature_bases(const Encoding& encoding) {
  std::vector<std::uint32_t> bases(encoding.max_count.size() + 1, 0);
  std::uint64_t total = 0;
  for (std::size_t v = 0; v < encoding.max_count.size(); ++v) {
    bases[v] = static_cast<std::uint32_t>(total);
    total += encoding.max_count[v];
  }
  if (total >= 0xffffffffull)
    throw Error("LINGO feature vocabulary exceeds 2^32 features", __FILE__, __LINE__);
  bases.back() = static_cast<std::uint32_t>(total);
  return bases;
}

FeatureSet expand_features(const EncodedSet& set, const std::vector<std::uint32_t>& max_count,
                           const std::vector<std::uint32_t>& bases, bool distinct_only) {
  FeatureSet out;
  const std::size_t n = set.size();
  out.offsets.assign(n + 1, 0);
  out.sizes.resize(n);
  parallel_for(n, 0, 4096, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      std::uint64_t features = 0;
      for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e)
        features += distinct_only ? 1 : std::min(set.counts[e], max_count[set.ids[e]]);
      out.offsets[i + 1] = features;
      out.sizes[i] = distinct_only ? set.distinct[i] : set.magnitudes[i];
    }
  });
  for (std::size_t i = 0; i < n; ++i) out.offsets[i + 1] += out.offsets[i];
  molaccel::detail::resize_populated(out.features, out.offsets[n]);
  parallel_for(n, 0, 4096, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      std::uint64_t o = out.offsets[i];
      for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e) {
        const std::uint32_t v = set.ids[e];
        if (distinct_only) {
          out.features[o++] = v;  // one feature per Lingo: its vocabulary id
        } else {
          const std::uint32_t c = std::min(set.counts[e], max_count[v]);
          for (std::uint32_t k = 0; k < c; ++k) out.features[o++] = bases[v] + k;
        }
      }
    }
  });
  return out;
}

}  // namespace molaccel::lingo::detail

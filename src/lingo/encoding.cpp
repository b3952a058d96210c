#include "lingo/encoding.hpp"

#include <algorithm>

namespace molaccel::lingo::detail {
namespace {

// Sorted unique keys of the database. Real vocabularies are small next to the key count (9,943
// distinct 4-Lingos in 12.7 M entries of the 367k set), so each thread deduplicates a slice of the
// molecules and only the small per-slice vocabularies are merged.
std::vector<std::uint64_t> sorted_vocabulary(const MoleculeSet& db, int threads) {
  const std::size_t n = db.size();
  const std::size_t slices = std::max<std::size_t>(1, std::min<std::size_t>(64, n / 4096));
  std::vector<std::vector<std::uint64_t>> parts(slices);
  parallel_for(slices, threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p) {
      const std::size_t m0 = n * p / slices, m1 = n * (p + 1) / slices;
      auto& keys = parts[p];
      keys.reserve(db.offsets[m1] - db.offsets[m0]);
      for (std::uint64_t k = db.offsets[m0]; k < db.offsets[m1]; ++k) keys.push_back(db.key(k));
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      keys.shrink_to_fit();
    }
  });
  std::vector<std::uint64_t> keys;
  for (auto& part : parts) keys.insert(keys.end(), part.begin(), part.end());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
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

// Encodes `set` against `vocabulary`; unknown keys are dropped.
EncodedSet encode_set(const MoleculeSet& set, const std::vector<std::uint64_t>& vocabulary, int threads) {
  const VocabularyIndex index(vocabulary);
  EncodedSet out;
  const std::size_t n = set.size();
  std::vector<std::uint32_t> known(n, 0);
  std::vector<std::uint32_t> ids(set.total_entries());
  std::vector<unsigned char> found(set.total_entries(), 0);
  parallel_for(n, threads, 1024, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      // Keys ascend within a molecule and ids follow key order, so the ids ascend too.
      for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e) {
        const std::uint32_t id = index.find(set.key(e));
        if (id != VocabularyIndex::kNone) {
          ids[e] = id;
          found[e] = 1;
          ++known[i];
        }
      }
    }
  });
  out.offsets.resize(n + 1);
  for (std::size_t i = 0; i < n; ++i) out.offsets[i + 1] = out.offsets[i] + known[i];
  out.ids.resize(out.offsets[n]);
  out.counts.resize(out.offsets[n]);
  out.magnitudes = set.magnitudes;
  out.distinct.resize(n);
  for (std::size_t i = 0, o = 0; i < n; ++i) {
    out.distinct[i] = static_cast<std::uint32_t>(set.distinct(i));
    for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e)
      if (found[e]) {
        out.ids[o] = ids[e];
        out.counts[o] = set.counts[e];
        ++o;
      }
  }
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
  encoding.self = database == nullptr;
  const auto vocabulary = sorted_vocabulary(db, threads);
  encoding.vocabulary_size = vocabulary.size();
  encoding.database = encode_set(db, vocabulary, threads);
  if (!encoding.self) encoding.queries = encode_set(queries, vocabulary, threads);
  encoding.max_count.assign(vocabulary.size(), 0);
  const auto& e = encoding.database;
  for (std::size_t k = 0; k < e.ids.size(); ++k)
    encoding.max_count[e.ids[k]] = std::max(encoding.max_count[e.ids[k]], e.counts[k]);
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
  out.offsets.resize(n + 1);
  out.sizes.resize(n);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e)
      total += distinct_only ? 1 : std::min(set.counts[e], max_count[set.ids[e]]);
    out.offsets[i + 1] = total;
    out.sizes[i] = distinct_only ? set.distinct[i] : set.magnitudes[i];
  }
  out.features.resize(total);
  for (std::size_t i = 0; i < n; ++i) {
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
  return out;
}

}  // namespace molaccel::lingo::detail

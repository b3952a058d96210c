// Device-agnostic preparation shared by the cpu and cuda backends: Lingo keys are replaced by dense
// ids of the database's vocabulary (sorted unique keys), so kernels work on 32-bit ids whatever q
// is. A query Lingo absent from the database cannot be shared and is dropped from the id list, but
// still counts in the query's magnitude and distinct count (the union needs it).
#pragma once

#include <cstdint>
#include <vector>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::detail {

struct EncodedSet {
  std::vector<std::uint64_t> offsets{0};  // molecule i: entries [offsets[i], offsets[i+1])
  std::vector<std::uint32_t> ids;         // vocabulary ids, ascending within a molecule
  std::vector<std::uint32_t> counts;      // multiplicity of each id
  std::vector<std::uint32_t> magnitudes;  // of the whole molecule (known Lingos or not)
  std::vector<std::uint32_t> distinct;    // distinct Lingos of the whole molecule
  std::size_t size() const { return magnitudes.size(); }
};

struct Encoding {
  std::size_t vocabulary_size = 0;
  std::vector<std::uint32_t> max_count;  // per vocabulary id: largest count in the database
  EncodedSet database;
  EncodedSet queries;  // empty when the job is the database against itself
  bool self = false;
  const EncodedSet& query_set() const { return self ? database : queries; }
};

// Checks that both sets use the same q and preprocessing (else InputError) and encodes them.
Encoding encode(const MoleculeSet& queries, const MoleculeSet* database, int threads = 0);

// Feature expansion for the GPU: Lingo id v with count c becomes features base[v] .. base[v]+c-1,
// so the multiset intersection is the number of shared features. distinct_only keeps one feature
// per Lingo (the set metric). Features beyond the database's max count for v can never be shared
// and are dropped. sizes = magnitudes (or distinct counts).
struct FeatureSet {
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> features;  // ascending within a molecule
  std::vector<std::uint32_t> sizes;
  std::size_t size() const { return sizes.size(); }
};
std::vector<std::uint32_t> feature_bases(const Encoding& encoding);  // size vocabulary+1
FeatureSet expand_features(const EncodedSet& set, const std::vector<std::uint32_t>& max_count,
                           const std::vector<std::uint32_t>& bases, bool distinct_only);

}  // namespace molaccel::lingo::detail

// The GPU kernel's building blocks, checked on the CPU: bit-sliced counters (single, four- and
// eight-at-a-time adds, the transposed extraction), the division-free ratio, feature expansion and
// the interleaved database layout, walked exactly as the hashed kernel walks it and compared with
// the reference bit for bit.
#include <algorithm>
#include <unordered_map>

#include "backend_checks.hpp"
#include "lingo/bitslice.hpp"
#include "lingo/cuda/tuning.hpp"
#include "lingo/encoding.hpp"
#include "lingo/interleaved_layout.hpp"
#include "lingo/reference/reference.hpp"

namespace molaccel::lingo {
namespace {

using namespace molaccel::lingo::testing;

TEST(LingoPieces, BitSlicedCountersMatchPlainCounters) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::uint32_t planes[11] = {};
    std::uint32_t plain[32] = {};
    const int adds = static_cast<int>(rng() % 600);
    for (int a = 0; a < adds; ++a) {
      const std::uint32_t mask = (trial % 3 == 0) ? 0xffffffffu : static_cast<std::uint32_t>(rng()) & rng();
      detail::bitslice_add(planes, mask);
      for (int q = 0; q < 32; ++q) plain[q] += (mask >> q) & 1u;
    }
    for (std::uint32_t q = 0; q < 32; ++q) ASSERT_EQ(detail::bitslice_count(planes, q), plain[q]);
  }
}

// The hashed kernel's count extraction: one 8x8 bit transpose per byte column of
// the planes gives all 32 counts below 256 as bytes (byte j of t[r] = count 8j + r).
TEST(LingoPieces, BitSliceTransposeGivesEveryCount) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::uint32_t planes[11] = {};
    std::uint32_t plain[32] = {};
    const int adds = static_cast<int>(rng() % 256);  // every count < 256
    for (int a = 0; a < adds; ++a) {
      const std::uint32_t mask = (trial % 5 == 0) ? 0xffffffffu : static_cast<std::uint32_t>(rng()) & rng();
      detail::bitslice_add(planes, mask);
      for (int q = 0; q < 32; ++q) plain[q] += (mask >> q) & 1u;
    }
    std::uint32_t t[8];
    detail::bitslice_transpose8(planes, t);
    for (std::uint32_t q = 0; q < 32; ++q) ASSERT_EQ((t[q % 8] >> (8 * (q / 8))) & 0xffu, plain[q]) << q;
  }
}

// A mask for the wide-add tests: every trial of four all ones, one all zeros, the others random
// (about a quarter of the bits set).
std::uint32_t trial_mask(int trial, std::mt19937& rng) {
  if (trial % 4 == 0) return 0xffffffffu;
  if (trial % 4 == 1) return 0u;
  const std::uint32_t a = static_cast<std::uint32_t>(rng());
  return a & static_cast<std::uint32_t>(rng());
}

// Four masks at once through carry-save adders: the same planes as four single adds.
TEST(LingoPieces, BitSliceAdd4MatchesSingleAdds) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    std::uint32_t a[11] = {}, b[11] = {};
    const int steps = static_cast<int>(rng() % 500);  // counts up to 2,000 (11 planes hold 2,047)
    for (int k = 0; k < steps; ++k) {
      std::uint32_t m[4];
      for (auto& x : m) x = trial_mask(trial, rng);
      for (auto x : m) detail::bitslice_add(a, x);
      detail::bitslice_add4(b, m[0], m[1], m[2], m[3]);
      for (int p = 0; p < 11; ++p) ASSERT_EQ(a[p], b[p]) << "trial " << trial << " step " << k;
    }
  }
}

// Eight masks at once (Harley-Seal order): the same planes as eight single adds, and as two
// bitslice_add4 calls.
TEST(LingoPieces, BitSliceAdd8MatchesSingleAdds) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 300; ++trial) {
    std::uint32_t a[11] = {}, b[11] = {}, c[11] = {};
    const int steps = static_cast<int>(rng() % 250);  // counts up to 2,000 (11 planes hold 2,047)
    for (int k = 0; k < steps; ++k) {
      std::uint32_t m[8];
      for (auto& x : m) x = trial_mask(trial, rng);
      for (auto x : m) detail::bitslice_add(a, x);
      detail::bitslice_add8(b, m);
      detail::bitslice_add4(c, m[0], m[1], m[2], m[3]);
      detail::bitslice_add4(c, m[4], m[5], m[6], m[7]);
      for (int p = 0; p < 11; ++p) {
        ASSERT_EQ(a[p], b[p]) << "trial " << trial << " step " << k;
        ASSERT_EQ(c[p], b[p]) << "trial " << trial << " step " << k;
      }
    }
  }
}

// The division-free ratio (reciprocal table + one exact correction) against the IEEE division, for
// every shared <= union < kReciprocals (the domain the kernels use it on), and the empty union.
TEST(LingoPieces, ReciprocalRatioIsTheCorrectlyRoundedQuotient) {
  EXPECT_EQ(std::bit_cast<std::uint32_t>(detail::ratio_from_reciprocal(0, 0, 0.0f)),
            std::bit_cast<std::uint32_t>(detail::ratio_similarity(0, 0, 0)));
  std::size_t checked = 0;
  for (std::uint32_t u = 1; u < detail::kReciprocals; ++u) {
    const float reciprocal = 1.0f / static_cast<float>(u);
    for (std::uint32_t shared = 0; shared <= u; ++shared) {
      // sizes a, b with a + b - shared = u: a = shared, b = u.
      const float want = detail::ratio_similarity(shared, shared, u);
      const float got = detail::ratio_from_reciprocal(shared, u, reciprocal);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
          << shared << " / " << u;
      ++checked;
    }
  }
  EXPECT_EQ(checked, std::size_t{detail::kReciprocals} * (detail::kReciprocals + 1) / 2 - 1);
}

// The first `count` molecules of nci_first5k.smi with a molecule of >= 256 features (the generic
// count extraction) inserted at `long_at` and a molecule too short for any Lingo appended.
MoleculeSet walk_test_set(std::size_t count, std::size_t long_at) {
  auto smiles = real_smiles("nci_first5k.smi", count);
  std::string long_one;
  for (int i = 0; i < 150; ++i) long_one += "CCCCC(=O)";
  smiles.insert(smiles.begin() + static_cast<std::ptrdiff_t>(long_at), long_one);
  smiles.push_back("C");
  return make_molecules(smiles, {});
}

// The hashed kernel's walk, on the host, in the kernel's order: windows of 256 taken in pairs, warp
// w takes chunk w of window 2p then chunk 7 - w of window 2p + 1 (which may not exist). Every
// position walks its chunk's padded row count eight masks at a time (bitslice_add8) and, when the
// padded row count is not a multiple of eight, the last four by bitslice_add4; counts leave by the
// 8x8 transpose (or one at a time from 256 features), each column is produced exactly once and
// matches the reference bit for bit.
void check_paired_walk(const MoleculeSet& set, Metric metric, std::size_t begin, std::size_t end) {
  const auto encoding = detail::encode(set, nullptr, 1);
  const auto bases = detail::feature_bases(encoding);
  const auto features =
      detail::expand_features(encoding.database, encoding.max_count, bases, metric == Metric::set);
  constexpr std::uint32_t kPad = 0xffffffffu;
  const auto layout = detail::build_interleaved_layout(features, begin, end, 256, kPad, 4);
  const std::size_t n = end - begin;
  const std::size_t n_windows = (n + 255) / 256, n_pairs = (n + 511) / 512;
  const std::size_t count = std::min<std::size_t>(32, set.size());
  std::unordered_map<std::uint32_t, std::uint32_t> table;
  for (std::size_t q = 0; q < count; ++q)
    for (auto f = features.offsets[q]; f < features.offsets[q + 1]; ++f)
      table[features.features[f]] |= 1u << q;
  std::vector<int> produced(n, 0);
  for (std::size_t p = 0; p < n_pairs; ++p)
    for (std::uint32_t warp = 0; warp < 8; ++warp)
      for (std::uint32_t half = 0; half < 2; ++half) {
        if (2 * p + half >= n_windows) continue;
        const std::size_t base = (2 * p + half) * 256;
        const std::uint32_t chunk = half ? 7 - warp : warp;
        for (std::uint32_t lane = 0; lane < 32; ++lane) {
          const std::size_t pos = base + 32 * chunk + lane;
          ASSERT_LT(pos, layout.length.size());
          const std::uint32_t rows = (layout.length[pos & ~std::size_t{31}] + 3) / 4 * 4;
          std::uint32_t planes[21] = {};
          for (std::uint32_t k = 0; k < rows;) {
            const std::uint32_t step = k + 8 <= rows ? 8 : 4;
            std::uint32_t m[8];
            for (std::uint32_t u = 0; u < step; ++u) {
              const std::uint32_t f = layout.features[layout.warp_base[pos / 32] + 32ull * (k + u) + lane];
              ASSERT_EQ(f == kPad, pos >= n || k + u >= layout.length[pos]);
              auto it = table.find(f);
              m[u] = it == table.end() ? 0u : it->second;
            }
            if (step == 8)
              detail::bitslice_add8(planes, m);
            else
              detail::bitslice_add4(planes, m[0], m[1], m[2], m[3]);
            k += step;
          }
          if (pos >= n) continue;
          const std::size_t column = base + layout.column[pos];
          ASSERT_LT(column, n);
          ++produced[column];
          std::uint32_t t[8];
          detail::bitslice_transpose8(planes, t);
          for (std::uint32_t q = 0; q < count; ++q) {
            const std::uint32_t shared = layout.length[pos] < 256 ? (t[q % 8] >> (8 * (q / 8))) & 0xffu
                                                                  : detail::bitslice_count(planes, q);
            const float got = detail::ratio_similarity(shared, features.sizes[q], layout.size[pos]);
            const float want = reference::pair_similarity(set, q, set, begin + column, metric);
            ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
                << "query " << q << " column " << begin + column;
          }
        }
      }
  for (std::size_t c = 0; c < n; ++c) ASSERT_EQ(produced[c], 1) << "column " << c;
}

TEST(LingoPieces, PairedSortedWalksMatchReference) {
  const auto set = walk_test_set(1000, 300);
  check_paired_walk(set, Metric::tanimoto, 0, set.size());  // 1,002: the last window partial
  check_paired_walk(set, Metric::tanimoto, 100, 650);       // a slice: the last pair has one window
  check_paired_walk(set, Metric::set, 3, 301);
}

// The CUDA backend's tuning: the defaults the kernel and pipeline were measured with, and the
// benchmarks' NAME=VALUE settings.
// The interleaved layout of a set large enough to be built in several chunks on every core,
// checked against its definition: in each window every molecule once, longest first (stable), its
// features down its lane of its warp, padding below them to the warp's padded length.
TEST(LingoPieces, InterleavedLayoutOfALargeSet) {
  const auto set = make_molecules(random_smiles_set(78, 30001, 1, 60), {});
  const auto encoding = detail::encode(set, nullptr);
  const auto features =
      detail::expand_features(encoding.database, encoding.max_count, detail::feature_bases(encoding), false);
  constexpr std::uint32_t kPad = 0xffffffffu, kWindow = 256;
  for (const auto& [begin, end] : {std::pair<std::size_t, std::size_t>{0, set.size()}, {5, 20000}}) {
    const auto layout = detail::build_interleaved_layout(features, begin, end, kWindow, kPad, 4);
    const std::size_t n = end - begin;
    std::vector<int> seen(n, 0);
    for (std::size_t p = 0; p < n; ++p) {
      const std::size_t w0 = p / kWindow * kWindow, m = w0 + layout.column[p];
      ASSERT_LT(m, n);
      ++seen[m];
      const auto length = features.offsets[begin + m + 1] - features.offsets[begin + m];
      ASSERT_EQ(layout.length[p], length);
      ASSERT_EQ(layout.size[p], features.sizes[begin + m]);
      if (p % kWindow > 0) {
        ASSERT_GE(layout.length[p - 1], layout.length[p]);
        if (layout.length[p - 1] == layout.length[p]) {
          ASSERT_LT(layout.column[p - 1], layout.column[p]);
        }
      }
      const std::uint64_t rows = (layout.length[p / 32 * 32] + 3) / 4 * 4;
      for (std::uint64_t k = 0; k < rows; ++k)
        ASSERT_EQ(layout.features[layout.warp_base[p / 32] + 32 * k + p % 32],
                  k < length ? features.features[features.offsets[begin + m] + k] : kPad);
    }
    for (std::size_t m = 0; m < n; ++m) ASSERT_EQ(seen[m], 1) << m;
  }
}

void expect_same_encoded(const detail::EncodedSet& a, const detail::EncodedSet& b) {
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_EQ(a.magnitudes, b.magnitudes);
  EXPECT_EQ(a.distinct, b.distinct);
}

// A set searched against itself (the same object as queries and database) is encoded once: the
// query set is the database's, equal to encoding a copy as the queries. The parallel passes (ids,
// maxima, feature expansion) give the same result on 1 and on every thread.
TEST(LingoPieces, SameSetIsEncodedOnce) {
  for (int q : {2, 4, 6}) {
    LingoOptions options;
    options.q = q;
    auto smiles = random_smiles_set(77, 20000, 1, 40);
    smiles.push_back("C");  // shorter than q for q > 1: no Lingos
    const auto set = make_molecules(smiles, options);
    const auto copy = set;
    const auto once = detail::encode(set, &set);
    const auto twice = detail::encode(set, &copy, 1);
    EXPECT_TRUE(once.self);
    EXPECT_FALSE(twice.self);
    EXPECT_TRUE(once.queries.ids.empty());
    expect_same_encoded(once.query_set(), twice.queries);
    expect_same_encoded(once.database, twice.database);
    EXPECT_EQ(once.max_count, twice.max_count);
    EXPECT_EQ(once.vocabulary_size, twice.vocabulary_size);
    const auto bases = detail::feature_bases(once);
    for (bool distinct_only : {false, true}) {
      const auto features = detail::expand_features(once.database, once.max_count, bases, distinct_only);
      // The features one molecule at a time, as the definition says.
      std::uint64_t total = 0;
      for (std::size_t i = 0; i < set.size(); ++i) {
        ASSERT_EQ(features.offsets[i], total);
        for (auto e = once.database.offsets[i]; e < once.database.offsets[i + 1]; ++e) {
          const auto v = once.database.ids[e];
          const auto c = distinct_only ? 1u : std::min(once.database.counts[e], once.max_count[v]);
          for (std::uint32_t k = 0; k < c; ++k)
            ASSERT_EQ(features.features[total++], distinct_only ? v : bases[v] + k);
        }
        ASSERT_EQ(features.sizes[i], distinct_only ? once.database.distinct[i] : once.database.magnitudes[i]);
      }
      EXPECT_EQ(features.offsets.back(), total);
    }
  }
}

TEST(LingoPieces, TuningDefaultsAndSettings) {
  auto t = cuda_backend::tuning_for(0, {Metric::tanimoto, 100, 100});
  EXPECT_EQ(t.staged_pass_elements, std::size_t{1} << 25);
  EXPECT_EQ(t.direct_pass_elements, std::size_t{1} << 27);
  EXPECT_TRUE(t.grow_passes);
  EXPECT_EQ(t.block_steps, 4u);
  EXPECT_EQ(t.device_pass_elements, 0u);
  EXPECT_EQ(t.drain_threads, 0);
  cuda_backend::set_tuning(t, "block_steps=8");
  cuda_backend::set_tuning(t, "grow_passes=0");
  cuda_backend::set_tuning(t, "device_pass_elements=268435456");
  EXPECT_EQ(t.block_steps, 8u);
  EXPECT_FALSE(t.grow_passes);
  EXPECT_EQ(t.device_pass_elements, std::size_t{268435456});
  for (const char* bad : {"kernel=csr", "block_steps", "block_steps=0", "grow_passes=2", "drain_threads=x"})
    EXPECT_THROW(cuda_backend::set_tuning(t, bad), Error) << bad;
}

}  // namespace
}  // namespace molaccel::lingo

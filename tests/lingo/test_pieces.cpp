// The GPU kernels' building blocks, checked on the CPU: bit-sliced counters (add, single and
// four-at-a-time extraction), feature expansion, and the interleaved database layout, walked
// exactly as the interleaved kernel walks it and compared with the reference bit for bit.
#include <algorithm>
#include <unordered_map>

#include "backend_checks.hpp"
#include "lingo/bitslice.hpp"
#include "lingo/bounded_table.hpp"
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
    if (adds < 256)
      for (std::uint32_t q4 = 0; q4 < 32; q4 += 4) {
        const std::uint32_t packed = detail::bitslice_bytes4(planes, q4);
        for (std::uint32_t i = 0; i < 4; ++i) ASSERT_EQ((packed >> (8 * i)) & 0xffu, plain[q4 + i]);
      }
  }
  for (std::uint32_t x = 0; x < 16; ++x)
    for (std::uint32_t i = 0; i < 4; ++i)
      EXPECT_EQ((detail::spread_nibble(x) >> (8 * i)) & 0xffu, (x >> i) & 1u);
}

// The csr-t / csr-td / sorted kernels' count extraction: one 8x8 bit transpose per byte column of
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

// Sixteen masks at once (two folds of eight and one more adder): the same planes as single adds.
TEST(LingoPieces, BitSliceAdd16MatchesSingleAdds) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 300; ++trial) {
    std::uint32_t a[11] = {}, b[11] = {};
    const int steps = static_cast<int>(rng() % 125);  // counts up to 2,000 (11 planes hold 2,047)
    for (int k = 0; k < steps; ++k) {
      std::uint32_t m0[8], m1[8];
      for (auto* m : {m0, m1})
        for (int u = 0; u < 8; ++u)
          m[u] = trial_mask(trial, rng);
      for (auto x : m0) detail::bitslice_add(a, x);
      for (auto x : m1) detail::bitslice_add(a, x);
      detail::bitslice_add16(b, m0, m1);
      for (int p = 0; p < 11; ++p) ASSERT_EQ(a[p], b[p]) << "trial " << trial << " step " << k;
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

// The interleaved kernel's walk, on the host: groups of 32 queries in a map (the GPU's hash table),
// every database position reads its features from the layout, adds the masks into bit planes and
// extracts the counts the way the kernel does.
void check_interleaved_walk(const MoleculeSet& set, Metric metric, std::size_t begin, std::size_t end) {
  const auto encoding = detail::encode(set, nullptr, 1);
  const auto bases = detail::feature_bases(encoding);
  const auto features =
      detail::expand_features(encoding.database, encoding.max_count, bases, metric == Metric::set);
  constexpr std::uint32_t kWindow = 256, kPad = 0xffffffffu;
  const auto layout = detail::build_interleaved_layout(features, begin, end, kWindow, kPad);
  const std::size_t n = end - begin;
  ASSERT_EQ(layout.length.size() % kWindow, 0u);
  for (std::size_t p = n; p < layout.length.size(); ++p) ASSERT_EQ(layout.length[p], 0u);
  for (std::size_t g = 0; g < layout.length.size() / 32; ++g)
    for (std::size_t l = 1; l < 32; ++l) ASSERT_LE(layout.length[g * 32 + l], layout.length[g * 32]);
  for (std::size_t q0 = 0; q0 < std::min<std::size_t>(set.size(), 64); q0 += 32) {
    const std::size_t count = std::min<std::size_t>(32, set.size() - q0);
    std::unordered_map<std::uint32_t, std::uint32_t> table;
    for (std::size_t q = 0; q < count; ++q)
      for (auto f = features.offsets[q0 + q]; f < features.offsets[q0 + q + 1]; ++f)
        table[features.features[f]] |= 1u << q;
    for (std::size_t p = 0; p < n; ++p) {
      std::uint32_t planes[21] = {};
      const std::uint32_t length = layout.length[p];
      for (std::uint32_t k = 0; k < length; ++k) {
        const std::uint32_t f = layout.features[layout.warp_base[p / 32] + 32ull * k + p % 32];
        ASSERT_NE(f, kPad);
        auto it = table.find(f);
        detail::bitslice_add(planes, it == table.end() ? 0u : it->second);
      }
      const std::size_t column = begin + p / kWindow * kWindow + layout.column[p];
      for (std::uint32_t q = 0; q < count; ++q) {
        const std::uint32_t shared =
            length < 256 ? (detail::bitslice_bytes4(planes, q / 4 * 4) >> (8 * (q % 4))) & 0xffu
                         : detail::bitslice_count(planes, q);
        const float got = detail::ratio_similarity(shared, features.sizes[q0 + q], layout.size[p]);
        const float want = reference::pair_similarity(set, q0 + q, set, column, metric);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
            << "query " << q0 + q << " column " << column;
      }
    }
  }
}

// The g64 kernel's walk, on the host: groups of 64 queries (two 32-lane bit-sliced counters), the
// layout with window 32 and rows padded to 4, every position walking its warp's padded row count
// (padding included, as the kernel does), four counts at a time for molecules of < 256 features.
void check_g64_walk(const MoleculeSet& set, Metric metric, std::size_t begin, std::size_t end) {
  const auto encoding = detail::encode(set, nullptr, 1);
  const auto bases = detail::feature_bases(encoding);
  const auto features =
      detail::expand_features(encoding.database, encoding.max_count, bases, metric == Metric::set);
  constexpr std::uint32_t kPad = 0xffffffffu;
  const auto layout = detail::build_interleaved_layout(features, begin, end, 32, kPad, 4);
  const std::size_t n = end - begin;
  ASSERT_EQ(layout.length.size(), (n + 31) / 32 * 32);
  for (std::size_t g = 0; g + 1 < layout.warp_base.size(); ++g)
    ASSERT_EQ(layout.warp_base[g + 1] - layout.warp_base[g], 32ull * ((layout.length[g * 32] + 3) / 4 * 4));
  for (std::size_t q0 = 0; q0 < std::min<std::size_t>(set.size(), 128); q0 += 64) {
    const std::size_t count = std::min<std::size_t>(64, set.size() - q0);
    std::unordered_map<std::uint32_t, std::uint64_t> table;
    for (std::size_t q = 0; q < count; ++q)
      for (auto f = features.offsets[q0 + q]; f < features.offsets[q0 + q + 1]; ++f)
        table[features.features[f]] |= std::uint64_t{1} << q;
    for (std::size_t p = 0; p < n; ++p) {
      std::uint32_t lo[21] = {}, hi[21] = {};
      const std::size_t warp_first = p / 32 * 32;
      const std::uint32_t rows = (layout.length[warp_first] + 3) / 4 * 4;
      for (std::uint32_t k = 0; k < rows; ++k) {
        const std::uint32_t f = layout.features[layout.warp_base[p / 32] + 32ull * k + p % 32];
        ASSERT_EQ(f == kPad, k >= layout.length[p]);
        auto it = table.find(f);
        const std::uint64_t m = it == table.end() ? 0 : it->second;
        detail::bitslice_add(lo, static_cast<std::uint32_t>(m));
        detail::bitslice_add(hi, static_cast<std::uint32_t>(m >> 32));
      }
      const std::size_t column = begin + warp_first + layout.column[p];
      for (std::uint32_t q = 0; q < count; ++q) {
        const auto& planes = q < 32 ? lo : hi;
        const std::uint32_t h = q % 32;
        const std::uint32_t shared = layout.length[p] < 256
                                         ? (detail::bitslice_bytes4(planes, h / 4 * 4) >> (8 * (h % 4))) & 0xffu
                                         : detail::bitslice_count(planes, h);
        const float got = detail::ratio_similarity(shared, features.sizes[q0 + q], layout.size[p]);
        const float want = reference::pair_similarity(set, q0 + q, set, column, metric);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
            << "query " << q0 + q << " column " << column;
      }
    }
  }
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

TEST(LingoPieces, G64LayoutWalkMatchesReference) {
  const auto set = walk_test_set(500, 40);
  check_g64_walk(set, Metric::tanimoto, 0, set.size());
  check_g64_walk(set, Metric::tanimoto, 7, 450);  // a slice, a partial last warp
  check_g64_walk(set, Metric::set, 3, 301);
}

// The walk of the paired sorted kernels, on the host, in the kernel's order: sorted-b (joint: the
// layout in windows of 512, warp w takes chunk w then chunk 15 - w) and sorted-h (windows of 256,
// warp w takes chunk w of window 2p then chunk 7 - w of window 2p + 1, which may not exist). Every
// position walks its chunk's padded row count four masks at a time (bitslice_add4), counts leave
// by the 8x8 transpose (or one at a time from 256 features), each column is produced exactly once
// and matches the reference bit for bit.
// With `width` 8, the walk of sorted-hp8 / sorted-hp8l: eight masks at a time (bitslice_add8) and,
// when the padded row count is not a multiple of eight, the last four by bitslice_add4; with 16,
// sorted-hp16l's: sixteen at a time (bitslice_add16), then eight, then four.
void check_paired_walk(const MoleculeSet& set, Metric metric, std::size_t begin, std::size_t end, bool joint,
                       int width = 4) {
  const auto encoding = detail::encode(set, nullptr, 1);
  const auto bases = detail::feature_bases(encoding);
  const auto features =
      detail::expand_features(encoding.database, encoding.max_count, bases, metric == Metric::set);
  constexpr std::uint32_t kPad = 0xffffffffu;
  const std::uint32_t window = joint ? 512 : 256;
  const auto layout = detail::build_interleaved_layout(features, begin, end, window, kPad, 4);
  const std::size_t n = end - begin;
  const std::size_t n_windows = (n + 255) / 256, n_pairs = (n + 511) / 512;
  const std::size_t count = std::min<std::size_t>(32, set.size());
  std::unordered_map<std::uint32_t, std::uint32_t> table;
  for (std::size_t q = 0; q < count; ++q)
    for (auto f = features.offsets[q]; f < features.offsets[q + 1]; ++f) table[features.features[f]] |= 1u << q;
  std::vector<int> produced(n, 0);
  for (std::size_t p = 0; p < n_pairs; ++p)
    for (std::uint32_t warp = 0; warp < 8; ++warp)
      for (std::uint32_t half = 0; half < 2; ++half) {
        std::size_t base;
        std::uint32_t chunk;
        if (joint) {
          base = p * 512;
          chunk = half ? 15 - warp : warp;
        } else {
          if (2 * p + half >= n_windows) continue;
          base = (2 * p + half) * 256;
          chunk = half ? 7 - warp : warp;
        }
        for (std::uint32_t lane = 0; lane < 32; ++lane) {
          const std::size_t pos = base + 32 * chunk + lane;
          ASSERT_LT(pos, layout.length.size());
          const std::uint32_t rows = (layout.length[pos & ~std::size_t{31}] + 3) / 4 * 4;
          std::uint32_t planes[21] = {};
          for (std::uint32_t k = 0; k < rows;) {
            const std::uint32_t step = width >= 16 && k + 16 <= rows ? 16 : width >= 8 && k + 8 <= rows ? 8 : 4;
            std::uint32_t m[16];
            for (std::uint32_t u = 0; u < step; ++u) {
              const std::uint32_t f = layout.features[layout.warp_base[pos / 32] + 32ull * (k + u) + lane];
              ASSERT_EQ(f == kPad, pos >= n || k + u >= layout.length[pos]);
              auto it = table.find(f);
              m[u] = it == table.end() ? 0u : it->second;
            }
            std::uint32_t m0[8], m1[8];
            for (int u = 0; u < 8; ++u) {
              m0[u] = m[u];
              m1[u] = m[8 + u];
            }
            if (step == 16)
              detail::bitslice_add16(planes, m0, m1);
            else if (step == 8)
              detail::bitslice_add8(planes, m0);
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

// sorted-hp6's bounded probe table: the host planner's serial simulation against the device's
// insertion (same probe rule, features of a group inserted in a random order, several queries
// sharing features), its lookups (members give their query mask, others 0) and that no probe ever
// passes the last slot; a refused query leaves the table as it was.
TEST(LingoPieces, BoundedTablePlanMatchesAnyInsertionOrder) {
  using detail::kBoundedEmpty;
  using detail::kBoundedSlots;
  EXPECT_LT(detail::bounded_home(0u), detail::kBoundedHashed);
  for (std::uint32_t f : {1u, 7u, 0x9e3779b1u, 0xfffffffeu, 0x80000000u})
    EXPECT_LT(detail::bounded_home(f), detail::kBoundedHashed);
  std::mt19937 rng(11);
  int refusals = 0;
  for (int trial = 0; trial < 60; ++trial) {
    // Queries of distinct features drawn from a vocabulary whose size sets the sharing.
    const std::uint32_t vocabulary = 200 + static_cast<std::uint32_t>(rng() % 40000);
    detail::BoundedTablePlanner plan;
    std::vector<std::vector<std::uint32_t>> queries;
    int refused = 0;
    while (queries.size() < 32 && refused < 3) {
      const std::size_t n = 1 + rng() % (trial % 4 == 0 ? 700 : 120);
      std::vector<std::uint32_t> f;
      for (std::size_t i = 0; i < n; ++i) f.push_back(static_cast<std::uint32_t>(rng() % vocabulary) * 2654435u);
      std::sort(f.begin(), f.end());
      f.erase(std::unique(f.begin(), f.end()), f.end());
      const auto before = plan.keys();
      if (plan.try_add(f.data(), f.size())) {
        queries.push_back(f);
      } else {
        ++refused;
        ++refusals;
        ASSERT_EQ(plan.keys(), before) << "a refused query changed the table";
      }
    }
    ASSERT_LE(plan.distinct(), detail::kBoundedMaxDistinct);
    ASSERT_EQ(plan.keys()[kBoundedSlots - 1], kBoundedEmpty);
    // The device's insertion: every (feature, query) in a random order, first free slot or match.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> items;
    std::unordered_map<std::uint32_t, std::uint32_t> expected;
    for (std::uint32_t q = 0; q < queries.size(); ++q)
      for (std::uint32_t f : queries[q]) {
        items.push_back({f, q});
        expected[f] |= 1u << q;
      }
    std::shuffle(items.begin(), items.end(), rng);
    std::vector<std::uint32_t> keys(kBoundedSlots, kBoundedEmpty), masks(kBoundedSlots, 0);
    for (const auto& [f, q] : items) {
      std::uint32_t s = detail::bounded_home(f);
      while (keys[s] != kBoundedEmpty && keys[s] != f) ASSERT_LT(++s, kBoundedSlots);
      keys[s] = f;
      masks[s] |= 1u << q;
    }
    std::vector<bool> planned(kBoundedSlots), placed(kBoundedSlots);
    for (std::uint32_t s = 0; s < kBoundedSlots; ++s) {
      planned[s] = plan.keys()[s] != kBoundedEmpty;
      placed[s] = keys[s] != kBoundedEmpty;
    }
    ASSERT_EQ(planned, placed) << "trial " << trial;
    const auto lookup = [&](std::uint32_t f) {
      for (std::uint32_t s = detail::bounded_home(f);; ++s) {
        EXPECT_LT(s, kBoundedSlots);
        if (s >= kBoundedSlots) return ~0u;
        if (keys[s] == f) return masks[s];
        if (keys[s] == kBoundedEmpty) return 0u;
      }
    };
    for (const auto& [f, m] : expected) ASSERT_EQ(lookup(f), m);
    for (int i = 0; i < 2000; ++i) {
      const std::uint32_t f = static_cast<std::uint32_t>(rng());
      const auto it = expected.find(f);
      ASSERT_EQ(lookup(f), it == expected.end() ? 0u : it->second);
    }
    ASSERT_EQ(lookup(kBoundedEmpty), 0u);  // the layout's padding feature
  }
  EXPECT_GT(refusals, 0) << "no group was closed by the table";
}

TEST(LingoPieces, PairedSortedWalksMatchReference) {
  const auto set = walk_test_set(1000, 300);
  for (bool joint : {true, false}) {
    check_paired_walk(set, Metric::tanimoto, 0, set.size(), joint);  // 1,002: the last window partial
    check_paired_walk(set, Metric::tanimoto, 100, 650, joint);       // a slice: the last pair has one window
    check_paired_walk(set, Metric::set, 3, 301, joint);
  }
  for (int width : {8, 16}) {  // sorted-hp8(l), sorted-hp16l
    check_paired_walk(set, Metric::tanimoto, 0, set.size(), false, width);
    check_paired_walk(set, Metric::set, 100, 650, false, width);
  }
}

TEST(LingoPieces, InterleavedLayoutWalkMatchesReference) {
  const auto set = walk_test_set(700, 5);
  check_interleaved_walk(set, Metric::tanimoto, 0, set.size());
  check_interleaved_walk(set, Metric::tanimoto, 100, 650);  // a slice: offsets rebased
  check_interleaved_walk(set, Metric::set, 3, 301);
}

}  // namespace
}  // namespace molaccel::lingo

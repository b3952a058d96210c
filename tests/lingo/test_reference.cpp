// Tier 1: the reference on pairs small enough to check by hand, and the pinned edge cases.
#include "lingo_test_util.hpp"

namespace molaccel::lingo {
namespace {

MoleculeSet pair(const std::string& a, const std::string& b, int q) {
  LingoOptions o;
  o.q = q;
  return make_molecules({a, b}, o);
}

TEST(LingoReference, HandCheckedPairs) {
  // q=2: CCOC = {CC, CO, OC}, CCO = {CC, CO}: 2 shared of a union of 3.
  auto m = pair("CCOC", "CCO", 2);
  EXPECT_EQ(similarity(m, 0, m, 1, Metric::tanimoto), 2.0f / 3.0f);
  EXPECT_EQ(similarity(m, 0, m, 1, Metric::set), 2.0f / 3.0f);
  EXPECT_EQ(similarity(m, 0, m, 1, Metric::vidal), 2.0f / 3.0f);
  // Multiplicity: CCCC = {CC x3}, CCC = {CC x2}: min 2, union 3; vidal 2*2/(3+2) = 0.8; set 1.
  m = pair("CCCC", "CCC", 2);
  EXPECT_EQ(similarity(m, 0, m, 1, Metric::tanimoto), 2.0f / 3.0f);
  EXPECT_EQ(similarity(m, 0, m, 1, Metric::set), 1.0f);
  EXPECT_EQ(similarity(m, 0, m, 1, Metric::vidal), 0.8f);
  // q=4, paper preprocessing: c1ccccc1 -> c0ccccc0 (5 Lingos: c0cc, cccc x2, ccc0, and 0ccc).
  m = pair("c1ccccc1", "c2ccccc2", 4);
  EXPECT_EQ(similarity(m, 0, m, 1, Metric::tanimoto), 1.0f);
  EXPECT_EQ(m.magnitudes[0], 5u);
  EXPECT_EQ(m.distinct(0), 4u);
}

TEST(LingoReference, Symmetric) {
  const auto smiles = testing::random_smiles_set(7, 40, 1, 30, 8);
  const auto set = make_molecules(smiles, {});
  for (std::size_t i = 0; i < set.size(); ++i)
    for (std::size_t j = 0; j < set.size(); ++j)
      for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set})
        ASSERT_EQ(similarity(set, i, set, j, metric), similarity(set, j, set, i, metric));
}

TEST(LingoReference, MoleculesWithoutLingosScoreZero) {
  // "CC" has no 4-Lingo: similarity 0 to everything, itself included (documented convention).
  auto m = pair("CC", "CCCCO", 4);
  for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set}) {
    EXPECT_EQ(similarity(m, 0, m, 0, metric), 0.0f);
    EXPECT_EQ(similarity(m, 0, m, 1, metric), 0.0f);
    EXPECT_EQ(similarity(m, 1, m, 1, metric), 1.0f);
  }
}

TEST(LingoReference, IdenticalAndDisjoint) {
  for (int q = 1; q <= 8; ++q) {
    auto m = pair("CC(=O)Nc1ccc(O)cc1", "SSSSSSSSSS", q);
    EXPECT_EQ(similarity(m, 0, m, 0, Metric::tanimoto), 1.0f) << q;
    EXPECT_EQ(similarity(m, 0, m, 1, Metric::tanimoto), 0.0f) << q;
    EXPECT_EQ(similarity(m, 1, m, 1, Metric::vidal), 1.0f) << q;
  }
}

TEST(LingoReference, InBoundsOfTheLengthBound) {
  const auto smiles = testing::random_smiles_set(11, 60, 1, 25, 6);
  const auto set = make_molecules(smiles, {});
  for (std::size_t i = 0; i < set.size(); ++i)
    for (std::size_t j = 0; j < set.size(); ++j) {
      const double lo = std::min(set.magnitudes[i], set.magnitudes[j]);
      const double hi = std::max(set.magnitudes[i], set.magnitudes[j]);
      if (hi > 0) {
        ASSERT_LE(similarity(set, i, set, j, Metric::tanimoto), lo / hi + 1e-7);
      }
    }
}

}  // namespace
}  // namespace molaccel::lingo

// Tier 1: the reference on hand-checkable cases; matrices; Karlin-Altschul statistics.
#include <cmath>

#include "align/align_test_util.hpp"
#include "testing/testing.hpp"

namespace molaccel::align {
namespace {

using testing::codes;

int ref(const std::string& q, const std::string& s, const Scoring& scoring = {}) {
  return reference_score(codes(q), codes(s), scoring);
}

TEST(AlignReference, HandCheckedScores) {
  EXPECT_EQ(ref("A", "A"), 4);  // BLOSUM62 A-A
  EXPECT_EQ(ref("W", "W"), 11);
  EXPECT_EQ(ref("AAA", "AAA"), 12);
  EXPECT_EQ(ref("W", "A"), 0);  // negative score: empty local alignment
  EXPECT_EQ(ref("AWA", "W"), 11);
  // One gap of length 1 costs open = 11: WW-WW vs WWGWW = 44 - 11 = 33 beats WWWW/WWGW = 31.
  EXPECT_EQ(ref("WWWW", "WWGWW"), 33);
  // Length-2 gap costs 11 + 1 = 12: 44 - 12 = 32.
  EXPECT_EQ(ref("WWWW", "WWGGWW"), 32);
  Scoring cheap;
  cheap.gap_open = 3;
  cheap.gap_extend = 3;
  EXPECT_EQ(ref("WWWW", "WWGGWW", cheap), 44 - 6);
}

TEST(AlignReference, CaseInsensitiveAndExtraLetters) {
  EXPECT_EQ(encode_residue('a'), encode_residue('A'));
  EXPECT_EQ(encode_residue('u'), encode_residue('U'));
  EXPECT_EQ(encode_residue('J'), -1);
  EXPECT_EQ(encode_residue('1'), -1);
  const auto m = builtin_matrix("blosum62");
  const int x = encode_residue('X'), u = encode_residue('U'), o = encode_residue('O');
  for (int a = 0; a < kAlphabetSize; ++a) {  // U and O score as X in NCBI's tables
    if (a == u || a == o) continue;
    EXPECT_EQ(m.at(u, a), m.at(x, a));
    EXPECT_EQ(m.at(a, o), m.at(a, x));
  }
  EXPECT_EQ(m.at(u, o), m.at(x, x));
  EXPECT_EQ(m.at(encode_residue('*'), encode_residue('*')), 1);
}

TEST(AlignMatrices, BuiltinsAreSymmetricAndMatchPublishedValues) {
  for (const auto& name : builtin_matrix_names()) {
    const auto m = builtin_matrix(name);
    for (int a = 0; a < kAlphabetSize; ++a)
      for (int b = 0; b < kAlphabetSize; ++b) EXPECT_EQ(m.at(a, b), m.at(b, a)) << name;
  }
  auto at = [](const char* name, char a, char b) {
    return builtin_matrix(name).at(encode_residue(a), encode_residue(b));
  };
  EXPECT_EQ(at("BLOSUM45", 'C', 'C'), 12);
  EXPECT_EQ(at("BLOSUM50", 'W', 'W'), 15);
  EXPECT_EQ(at("BLOSUM62", 'C', 'C'), 9);
  EXPECT_EQ(at("BLOSUM80", 'W', 'W'), 16);
  EXPECT_EQ(at("BLOSUM90", 'P', 'P'), 8);
  EXPECT_EQ(at("PAM30", 'W', 'E'), -17);
  EXPECT_EQ(at("PAM70", 'W', 'W'), 13);
  EXPECT_EQ(at("PAM250", 'W', 'W'), 17);
  EXPECT_THROW(builtin_matrix("BLOSUM63"), InputError);
}

TEST(AlignMatrices, ParsesNcbiTextAndRejectsBadFiles) {
  // A 20-letter matrix without X: other letters take the minimum.
  std::string text = "# comment\n   ";
  const std::string letters = "ARNDCQEGHILKMFPSTWYV";
  for (char c : letters) text += fmt::format(" {}", c);
  text += "\n";
  for (char r : letters) {
    text += r;
    for (char c : letters) text += r == c ? " 5" : " -2";
    text += "\n";
  }
  const auto m = parse_matrix("id.mat", text);
  EXPECT_EQ(m.at(encode_residue('A'), encode_residue('A')), 5);
  EXPECT_EQ(m.at(encode_residue('A'), encode_residue('W')), -2);
  EXPECT_EQ(m.at(encode_residue('X'), encode_residue('X')), -2);
  EXPECT_FALSE(m.builtin);

  try {
    parse_matrix("bad.mat", "  A R\nA 1 x\n");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "bad.mat");
    EXPECT_EQ(e.line(), 2u);
  }
  EXPECT_THROW(parse_matrix("short.mat", "  A R\nA 1 2 3\n"), InputError);
  EXPECT_THROW(parse_matrix("missing.mat", "  A R\nA 1 2\nR 2 1\n"), InputError);  // 18 residues missing
  EXPECT_THROW(parse_matrix("empty.mat", ""), InputError);
  EXPECT_THROW(parse_matrix("big.mat", "  A\nA 500\n"), InputError);
}

TEST(AlignStatistics, PublishedGappedParameters) {
  // Our open 11 / extend 1 is BLAST's -gapopen 10 -gapextend 1.
  auto ka = published_gapped_parameters("BLOSUM62", 11, 1);
  ASSERT_TRUE(ka);
  EXPECT_DOUBLE_EQ(ka->lambda, 0.243);
  EXPECT_DOUBLE_EQ(ka->K, 0.024);
  ka = published_gapped_parameters("BLOSUM62", 12, 1);  // BLAST's default 11/1
  ASSERT_TRUE(ka);
  EXPECT_DOUBLE_EQ(ka->lambda, 0.267);
  EXPECT_DOUBLE_EQ(ka->K, 0.041);
  EXPECT_TRUE(published_gapped_parameters("PAM30", 10, 1));     // BLAST 9/1
  EXPECT_TRUE(published_gapped_parameters("BLOSUM45", 17, 2));  // BLAST 15/2
  EXPECT_FALSE(published_gapped_parameters("BLOSUM62", 5, 5));
  EXPECT_FALSE(published_gapped_parameters("custom.mat", 11, 1));
  // Bit score = (lambda S - ln K) / ln 2; checked by hand for BLAST's BLOSUM62 11/1 and S = 100.
  const KarlinAltschul blast_default{0.267, 0.041, 0.14, 1.9, -30};
  EXPECT_NEAR(bit_score(blast_default, 100), (26.7 - std::log(0.041)) / std::log(2.0), 1e-12);
  // E-values fall by exp(-lambda) per score unit and grow with the search space.
  const double e1 = e_value(blast_default, 50, 300, 100000000, 300000);
  const double e2 = e_value(blast_default, 51, 300, 100000000, 300000);
  EXPECT_NEAR(e2 / e1, std::exp(-0.267), 1e-9);
  EXPECT_GT(e_value(blast_default, 50, 300, 200000000, 600000), e1);
  // Length adjustment shrinks the space below m * n (BLAST: K m' n' e^{-lambda S}).
  EXPECT_LT(e1, 0.041 * 300.0 * 1e8 * std::exp(-0.267 * 50));
}

TEST(AlignScoring, ValidatesGapCosts) {
  Scoring s;
  s.gap_open = 0;
  EXPECT_THROW(s.validate(), InputError);
  s.gap_open = 5;
  s.gap_extend = 6;
  EXPECT_THROW(s.validate(), InputError);
  s.gap_extend = 5;
  EXPECT_NO_THROW(s.validate());
}

}  // namespace
}  // namespace molaccel::align

// Tier 2: every CPU kernel variant this machine can run, against the reference, on random and
// planted inputs (fixed seeds; group sizes past the lane count and odd).
#include "align/align_test_util.hpp"
#include "align/cpu/inter_sequence.hpp"
#include "testing/testing.hpp"

namespace molaccel::align {
namespace {

using testing::blosum62_times_ten;
using testing::codes;
using testing::make_set;
using testing::mutate;
using testing::random_protein;

struct Variant {
  const char* name;
  int (*lanes8)() noexcept;
  int (*lanes16)() noexcept;
  int (*lanes32)() noexcept;
  void (*group8)(const cpu::LaneGroup&);
  void (*group16)(const cpu::LaneGroup&);
  void (*group32)(const cpu::LaneGroup&);
};

std::vector<Variant> runnable_variants() {
  std::vector<Variant> v = {{"scalar", cpu::isa_scalar::lanes8, cpu::isa_scalar::lanes16,
                             cpu::isa_scalar::lanes32, cpu::isa_scalar::score_group8,
                             cpu::isa_scalar::score_group16, cpu::isa_scalar::score_group32}};
  const auto simd = cpu_info().simd;
  if (simd == SimdLevel::avx2 || simd == SimdLevel::avx512)
    v.push_back({"avx2", cpu::isa_avx2::lanes8, cpu::isa_avx2::lanes16, cpu::isa_avx2::lanes32,
                 cpu::isa_avx2::score_group8, cpu::isa_avx2::score_group16, cpu::isa_avx2::score_group32});
  if (simd == SimdLevel::avx512)
    v.push_back({"avx512", cpu::isa_avx512::lanes8, cpu::isa_avx512::lanes16, cpu::isa_avx512::lanes32,
                 cpu::isa_avx512::score_group8, cpu::isa_avx512::score_group16,
                 cpu::isa_avx512::score_group32});
  return v;
}

// Runs one lane group of a variant directly with 8-, 16- or 32-bit lanes.
std::vector<int> run_group(const Variant& v, int bits, const std::vector<std::uint8_t>& query,
                           const std::vector<std::vector<std::uint8_t>>& subjects, const Scoring& scoring,
                           std::vector<std::uint8_t>* saturated = nullptr) {
  std::vector<int> matrix(scoring.matrix.scores.begin(), scoring.matrix.scores.end());
  std::vector<const std::uint8_t*> pointers;
  std::vector<std::uint32_t> lengths;
  for (const auto& s : subjects)
    pointers.push_back(s.data()), lengths.push_back(static_cast<std::uint32_t>(s.size()));
  std::vector<int> scores(subjects.size());
  std::vector<std::uint8_t> flags(subjects.size());
  cpu::LaneGroup g;
  g.query = query.data();
  g.query_length = query.size();
  g.subjects = pointers.data();
  g.lengths = lengths.data();
  g.count = static_cast<int>(subjects.size());
  g.matrix = matrix.data();
  g.gap_open = scoring.gap_open;
  g.gap_extend = scoring.gap_extend;
  g.saturation_threshold = (bits == 8 ? 127 : 32767) - scoring.matrix.max_score();
  g.scores = scores.data();
  g.saturated = bits == 32 ? nullptr : flags.data();
  std::vector<std::uint64_t> workspace(cpu::workspace_bytes(query.size()) / 8 + 8);
  g.workspace = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(workspace.data()) + 63) &
                                        ~std::uintptr_t{63});
  (bits == 8 ? v.group8 : bits == 16 ? v.group16 : v.group32)(g);
  if (saturated) *saturated = flags;
  return scores;
}

TEST(AlignCpuKernels, EveryVariantMatchesReferenceOnRandomGroups) {
  std::mt19937 rng(1234);
  const std::vector<std::pair<int, int>> gaps = {{11, 1}, {10, 2}, {5, 5}, {1, 1}, {15, 3}};
  for (const auto& v : runnable_variants()) {
    int round = 0;
    for (const auto& matrix_name : builtin_matrix_names()) {
      for (int bits : {8, 16, 32}) {
        Scoring scoring;
        scoring.matrix = builtin_matrix(matrix_name);
        std::tie(scoring.gap_open, scoring.gap_extend) = gaps[round++ % gaps.size()];
        const int lanes = bits == 8 ? v.lanes8() : bits == 16 ? v.lanes16() : v.lanes32();
        const auto query = codes(random_protein(rng, 1 + rng() % 120));
        std::vector<std::vector<std::uint8_t>> subjects;
        const int count = 1 + static_cast<int>(rng() % lanes);  // partial groups too
        for (int i = 0; i < count; ++i) {
          const auto base = random_protein(rng, 1 + rng() % 150);
          subjects.push_back(codes(i % 3 == 0 ? mutate(rng, base, 0.2) : base));
        }
        std::vector<std::uint8_t> saturated;
        const auto scores = run_group(v, bits, query, subjects, scoring, &saturated);
        for (int i = 0; i < count; ++i) {
          const int expected = reference_score(query, subjects[i], scoring);
          // A lane is exact unless flagged; it must be flagged when the score reaches the threshold.
          if (bits != 32 && saturated[i]) continue;
          EXPECT_EQ(scores[i], expected) << v.name << "/i" << bits << " " << matrix_name << " lane " << i;
          if (bits == 8) {
            EXPECT_LT(expected, 127 - scoring.matrix.max_score());
          }
        }
      }
    }
  }
}

TEST(AlignCpuKernels, SixteenBitSaturationIsFlagged) {
  // A matrix scaled by 10 (max 110) makes scores past 32,767 with 800-residue sequences.
  const Scoring scoring = blosum62_times_ten();
  std::mt19937 rng(99);
  const auto base = random_protein(rng, 800, "ACDEFGHIKLMNPQRSTVWY");
  const auto query = codes(base);
  for (const auto& v : runnable_variants()) {
    std::vector<std::vector<std::uint8_t>> subjects = {codes(base), codes(mutate(rng, base, 0.05)),
                                                       codes("W")};
    std::vector<std::uint8_t> saturated;
    run_group(v, 16, query, subjects, scoring, &saturated);
    EXPECT_TRUE(saturated[0]) << v.name;
    EXPECT_FALSE(saturated[2]) << v.name;
    const auto exact = run_group(v, 32, query, subjects, scoring);
    for (std::size_t i = 0; i < subjects.size(); ++i)
      EXPECT_EQ(exact[i], reference_score(query, subjects[i], scoring));
    EXPECT_GT(exact[0], 32767);
  }
}

// Through the public API: threads, tiles, 16-bit pass and 32-bit rescoring together.
TEST(AlignCpuBackend, ScoreDatabaseMatchesReference) {
  std::mt19937 rng(42);
  std::vector<std::string> db_letters;
  for (int i = 0; i < 157; ++i) db_letters.push_back(random_protein(rng, 1 + rng() % 300));
  db_letters.push_back(std::string(700, 'W'));  // planted: identical long pair -> past 16 bits? (7700)
  db_letters.push_back("X");
  const auto db = Database::from_sequences(make_set(db_letters));
  const auto resources = Resources::cpu(2);
  for (const auto& query_letters :
       {random_protein(rng, 37), mutate(rng, db_letters[5], 0.1), std::string(701, 'W')}) {
    Scoring scoring;
    const auto query = codes(query_letters);
    ScoreStats stats;
    const auto fast = score_database(resources, query, db, scoring, Backend::cpu, &stats);
    const auto slow = score_database(resources, query, db, scoring, Backend::reference);
    ASSERT_EQ(fast.size(), db.size());
    for (std::size_t i = 0; i < db.size(); ++i)
      EXPECT_EQ(fast[i], slow[i]) << "subject " << db.original_index(i);
    EXPECT_EQ(stats.cells, query.size() * db.residues());
    EXPECT_NE(stats.kernel.find("cpu/inter8-16/"), std::string::npos) << stats.kernel;
  }
}

TEST(AlignCpuBackend, PlantedCases) {
  const auto resources = Resources::cpu(2);
  Scoring scoring;
  // Scores past 32,767: identical 3,100-residue W runs score 34,100 with BLOSUM62.
  const std::string long_w(3100, 'W');
  const auto db = Database::from_sequences(make_set({"A", "W", long_w, "XXXXXXXX", std::string(40, 'A')}));
  ScoreStats stats;
  const auto scores = score_database(resources, codes(long_w), db, scoring, Backend::cpu, &stats);
  for (std::size_t i = 0; i < db.size(); ++i)
    EXPECT_EQ(scores[i], reference_score(codes(long_w), db.sequence(i), scoring));
  EXPECT_EQ(scores[db.size() - 1], 34100);  // sorted: the long run is last
  EXPECT_GE(stats.rescored, 1u);
  // Length-1 query, all-X query, a query longer than every subject.
  for (const std::string& q : std::vector<std::string>{"W", "XXXXXXXXXXXX", std::string(5000, 'A')}) {
    const auto fast = score_database(resources, codes(q), db, scoring, Backend::cpu);
    for (std::size_t i = 0; i < db.size(); ++i)
      EXPECT_EQ(fast[i], reference_score(codes(q), db.sequence(i), scoring)) << q.size();
  }
}

}  // namespace
}  // namespace molaccel::align

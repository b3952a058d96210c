// Search: top hits, deterministic ties, traceback consistency, statistics, shards, TSV output.
#include <cmath>

#include "align/align_test_util.hpp"
#include "testing/testing.hpp"
#include "testing/thread_ranks.hpp"

namespace molaccel::align {
namespace {

using testing::codes;
using testing::make_set;
using testing::mutate;
using testing::random_protein;
using testing::score_of_alignment;

TEST(AlignTraceback, ReproducesReferenceScores) {
  std::mt19937 rng(5);
  for (int round = 0; round < 60; ++round) {
    Scoring scoring;
    scoring.matrix = builtin_matrix(builtin_matrix_names()[round % 8]);
    if (round % 3 == 1) scoring.gap_open = 10, scoring.gap_extend = 2;
    if (round % 3 == 2) scoring.gap_open = 4, scoring.gap_extend = 4;
    const auto base = random_protein(rng, 1 + rng() % 200);
    const auto q = codes(base);
    const auto s = codes(round % 2 ? mutate(rng, base, 0.3) : random_protein(rng, 1 + rng() % 200));
    const auto a = align_pair(q, s, scoring);
    EXPECT_EQ(a.score, reference_score(q, s, scoring));
    if (a.score == 0) {
      EXPECT_EQ(a.length, 0u);
      continue;
    }
    std::uint32_t identities = 0;
    EXPECT_EQ(score_of_alignment(a, q, s, scoring, &identities), a.score) << a.cigar;
    EXPECT_EQ(identities, a.identities);
  }
  // Hand-checked: WWWW vs WWGWW aligns WW-WW with a one-residue gap in the query.
  const auto a = align_pair(codes("WWWW"), codes("WWGWW"), Scoring{});
  EXPECT_EQ(a.score, 33);
  EXPECT_EQ(a.cigar, "2M1D2M");
  EXPECT_EQ(a.query_start, 1u);
  EXPECT_EQ(a.query_end, 4u);
  EXPECT_EQ(a.subject_start, 1u);
  EXPECT_EQ(a.subject_end, 5u);
  EXPECT_EQ(a.identities, 4u);
  EXPECT_EQ(a.length, 5u);
}

SequenceSet demo_db_letters(std::mt19937& rng, std::vector<std::string>& letters) {
  for (int i = 0; i < 120; ++i)
    letters.push_back(random_protein(rng, 20 + rng() % 200, "ACDEFGHIKLMNPQRSTVWY"));
  letters.push_back(letters[7]);  // exact duplicates: ties broken by database position
  letters.push_back(letters[7]);
  return make_set(letters);
}

TEST(AlignSearch, TopHitsAreOrderedAndTiesFollowDatabaseOrder) {
  std::mt19937 rng(77);
  std::vector<std::string> letters;
  const auto db = Database::from_sequences(demo_db_letters(rng, letters));
  const auto queries = make_set({letters[7], mutate(rng, letters[30], 0.1)});
  SearchOptions options;
  options.top_k = 5;
  const auto result = search(Resources::cpu(2), queries, db, options);
  ASSERT_EQ(result.hits.size(), 2u);
  ASSERT_EQ(result.hits[0].size(), 5u);
  EXPECT_EQ(result.hits[0][0].subject, 7u);
  EXPECT_EQ(result.hits[0][1].subject, 120u);
  EXPECT_EQ(result.hits[0][2].subject, 121u);
  EXPECT_EQ(result.hits[0][0].score, result.hits[0][2].score);
  EXPECT_EQ(result.hits[1][0].subject, 30u);
  for (const auto& list : result.hits)
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (i) {
        EXPECT_TRUE(hit_before(list[i - 1], list[i]));
      }
      EXPECT_EQ(list[i].alignment.score, list[i].score);
      EXPECT_GT(list[i].bitscore, 0);
      EXPECT_TRUE(std::isfinite(list[i].evalue));
    }
  // Every backend gives the same hits.
  options.backend = Backend::reference;
  const auto again = search(Resources::cpu(1), queries, db, options);
  for (std::size_t q = 0; q < 2; ++q)
    for (std::size_t i = 0; i < result.hits[q].size(); ++i) {
      EXPECT_EQ(again.hits[q][i].subject, result.hits[q][i].subject);
      EXPECT_EQ(again.hits[q][i].score, result.hits[q][i].score);
    }
}

TEST(AlignSearch, ShardsMergeToTheSingleProcessResult) {
  std::mt19937 rng(3);
  std::vector<std::string> letters;
  const auto db = Database::from_sequences(demo_db_letters(rng, letters));
  const auto queries = make_set({letters[7], letters[50], random_protein(rng, 90)});
  SearchOptions options;
  options.top_k = 7;
  const auto whole = search(Resources::cpu(2), queries, db, options);
  for (int ranks : {2, 3, 5}) {
    std::vector<std::vector<std::vector<Hit>>> parts;
    for (int r = 0; r < ranks; ++r)
      parts.push_back(search(Resources::cpu(2), queries, db.shard(r, ranks), options).hits);
    const auto merged = merge_top_hits(parts, options.top_k);
    ASSERT_EQ(merged.size(), whole.hits.size());
    for (std::size_t q = 0; q < merged.size(); ++q) {
      ASSERT_EQ(merged[q].size(), whole.hits[q].size());
      for (std::size_t i = 0; i < merged[q].size(); ++i) {
        EXPECT_EQ(merged[q][i].subject, whole.hits[q][i].subject);
        EXPECT_EQ(merged[q][i].score, whole.hits[q][i].score);
        EXPECT_EQ(merged[q][i].evalue, whole.hits[q][i].evalue);  // whole-database statistics
        EXPECT_EQ(merged[q][i].alignment.cigar, whole.hits[q][i].alignment.cigar);
      }
    }
  }
}

// Ranks as threads: search_across_ranks on rank 0 writes the same TSV as one search, for any count
// of ranks, more ranks than sequences included, with and without traceback.
TEST(AlignSearch, AcrossRanksWritesTheSingleProcessTsv) {
  std::mt19937 rng(5);
  std::vector<std::string> letters;
  const auto db = Database::from_sequences(demo_db_letters(rng, letters));
  const auto queries = make_set({letters[7], letters[50], letters[51], random_protein(rng, 90)});
  molaccel::testing::TempDir dir;
  for (bool traceback : {true, false}) {
    SearchOptions options;
    options.top_k = 9;
    options.traceback = traceback;
    write_hits_tsv(dir / "one.tsv", queries, db, search(Resources::cpu(1), queries, db, options));
    const auto expected = molaccel::testing::read_file(dir / "one.tsv");
    for (int ranks : {1, 2, 3, 4, static_cast<int>(db.size()) + 3}) {
      molaccel::testing::run_ranks(ranks, [&](Communicator& comm) {
        const auto shard = db.shard(comm.rank(), comm.size());
        const auto merged = search_across_ranks(comm, Resources::cpu(1), queries, shard, options);
        if (comm.is_root()) write_hits_tsv(dir / "ranks.tsv", queries, merged);
      });
      EXPECT_EQ(molaccel::testing::read_file(dir / "ranks.tsv"), expected) << ranks << " ranks";
    }
  }
}

TEST(AlignSearch, StatisticsNeedPublishedParametersUnlessDisabled) {
  const auto db = Database::from_sequences(make_set({"AAAAGGG", "WWWW"}));
  const auto queries = make_set({"WWWW"});
  SearchOptions options;
  options.scoring.gap_open = 3;
  options.scoring.gap_extend = 2;
  EXPECT_THROW(search(Resources::cpu(1), queries, db, options), InputError);
  options.evalues = false;
  const auto result = search(Resources::cpu(1), queries, db, options);
  ASSERT_EQ(result.hits[0].size(), 1u);  // score-0 pairs are not hits
  EXPECT_TRUE(std::isnan(result.hits[0][0].evalue));
  EXPECT_EQ(result.hits[0][0].score, 44);
}

TEST(AlignSearch, WritesTsvWithHeaderAndAtomically) {
  molaccel::testing::TempDir dir;
  const auto db = Database::from_sequences(make_set({"ACDEFGHIKW", "MNPQRSTVWY"}));
  const auto queries = make_set({"ACDEFGHIKW"});
  SearchOptions options;
  const auto result = search(Resources::cpu(1), queries, db, options);
  write_hits_tsv(dir / "hits.tsv", queries, db, result);
  const auto text = molaccel::testing::read_file(dir / "hits.tsv");
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "query\tsubject\tscore\tbitscore\tevalue\tqstart\tqend\tsstart\tsend\tidentity\talnlen");
  EXPECT_NE(text.find("s0\ts0\t"), std::string::npos) << text;
  EXPECT_NE(text.find("\t1\t10\t1\t10\t100.00\t10\n"), std::string::npos) << text;
  EXPECT_THROW(write_hits_tsv(dir / "missing-dir" / "hits.tsv", queries, db, result), std::exception);
}

}  // namespace
}  // namespace molaccel::align

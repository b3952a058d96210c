// Tier 2 on the GPU: the CUDA backend (inter-task 16x2 kernel, intra-task 32-bit kernel, 16-bit
// overflow rescoring, tile splitting over run_tiles) against the reference, exact. Settings other
// than the device's own go in through detail::score_database_batch(..., &tuning).
#include "align/align_test_util.hpp"
#include "align/kernels.hpp"
#include "testing/test_arguments.hpp"
#include "testing/testing.hpp"

namespace molaccel::align {
namespace {

using testing::blosum62_times_ten;
using testing::codes;
using testing::make_set;
using testing::mutate;
using testing::random_protein;

Resources gpu_resources() {
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  return Resources::create(o);
}

void expect_gpu_equals_reference(const SequenceSet& queries, const Database& db, const Scoring& scoring,
                                 ScoreStats* stats_out = nullptr, const gpu_entry::Tuning* tuning = nullptr) {
  ScoreStats stats;
  const auto gpu =
      detail::score_database_batch(gpu_resources(), queries, db, scoring, Backend::cuda, &stats, tuning);
  const auto ref = score_database_batch(Resources::cpu(0), queries, db, scoring, Backend::reference);
  for (std::size_t q = 0; q < queries.size(); ++q)
    for (std::size_t i = 0; i < db.size(); ++i)
      ASSERT_EQ(gpu[q][i], ref[q][i])
          << "query " << q << " (length " << queries.sequence(q).size() << "), subject "
          << db.original_index(i) << " (length " << db.length(i) << "), " << stats.kernel;
  if (stats_out) *stats_out = stats;
}

TEST(AlignGpu, RandomSetsAllMatricesAndGaps) {
  MOLACCEL_REQUIRE_GPU();
  std::mt19937 rng(2024);
  const std::vector<std::pair<int, int>> gaps = {{11, 1}, {10, 2}, {5, 5}, {1, 1},
                                                 {15, 3}, {14, 2}, {8, 1}, {12, 3}};
  int round = 0;
  for (const auto& name : builtin_matrix_names()) {
    Scoring scoring;
    scoring.matrix = builtin_matrix(name);
    std::tie(scoring.gap_open, scoring.gap_extend) = gaps[round++];
    std::vector<std::string> db_letters;
    const int count = 200 + static_cast<int>(rng() % 131);  // odd sizes, several warps
    for (int i = 0; i < count; ++i) {
      const auto s = random_protein(rng, 1 + rng() % 700);
      db_letters.push_back(i % 4 == 0 ? mutate(rng, s, 0.2) : s);
    }
    db_letters.push_back(std::string(2500, 'A'));  // past the long-subject threshold: intra-task
    const auto db = Database::from_sequences(make_set(db_letters));
    const auto queries = make_set({random_protein(rng, 1), random_protein(rng, 33),
                                   mutate(rng, db_letters[9], 0.1), random_protein(rng, 300 + rng() % 40)});
    expect_gpu_equals_reference(queries, db, scoring);
  }
}

TEST(AlignGpu, LongSubjectThresholds) {
  MOLACCEL_REQUIRE_GPU();
  std::mt19937 rng(8);
  std::vector<std::string> db_letters;
  for (int i = 0; i < 300; ++i) db_letters.push_back(random_protein(rng, 1 + rng() % 400));
  const auto db = Database::from_sequences(make_set(db_letters));
  const auto queries =
      make_set({random_protein(rng, 95), mutate(rng, db_letters[3], 0.15), random_protein(rng, 290)});
  for (unsigned threshold : {1u, 100u, 2048u}) {
    gpu_entry::Tuning tuning;
    tuning.long_threshold = threshold;
    SCOPED_TRACE(fmt::format("long threshold {}", threshold));
    expect_gpu_equals_reference(queries, db, Scoring{}, nullptr, &tuning);
  }
}

// The inter-task kernel on all matrices with several gap settings, an odd number of queries (a lone
// query in the last pair), queries of one and of many strips, and 16-bit overflow rescoring.
TEST(AlignGpu, InterTaskAllMatricesAndGaps) {
  MOLACCEL_REQUIRE_GPU();
  std::mt19937 rng(77);
  const std::vector<std::pair<int, int>> gaps = {{11, 1}, {10, 2}, {5, 5}, {1, 1},
                                                 {15, 3}, {14, 2}, {8, 1}, {12, 3}};
  std::vector<std::string> db_letters;
  for (int i = 0; i < 260; ++i) {
    const auto s = random_protein(rng, 1 + rng() % 600);
    db_letters.push_back(i % 3 == 0 ? mutate(rng, s, 0.2) : s);
  }
  db_letters.push_back(std::string(1200, 'W'));  // 13,200 with BLOSUM62: deep in 16 bits
  const auto db = Database::from_sequences(make_set(db_letters));
  const auto queries =
      make_set({random_protein(rng, 1), random_protein(rng, 70), mutate(rng, db_letters[5], 0.1),
                random_protein(rng, 211), std::string(1300, 'W')});
  int round = 0;
  for (const auto& name : builtin_matrix_names()) {
    Scoring scoring;
    scoring.matrix = builtin_matrix(name);
    std::tie(scoring.gap_open, scoring.gap_extend) = gaps[round++];
    SCOPED_TRACE(fmt::format("{} {}/{}", name, scoring.gap_open, scoring.gap_extend));
    ScoreStats stats;
    expect_gpu_equals_reference(queries, db, scoring, &stats);
    EXPECT_NE(stats.kernel.find("-qp+"), std::string::npos) << stats.kernel;
  }
  // Past 16 bits: the x10 matrix pushes scores over 32,767, which must be rescored exactly.
  ScoreStats stats;
  expect_gpu_equals_reference(queries, db, blosum62_times_ten(), &stats);
  EXPECT_GE(stats.rescored, 1u);
}

// The default pipeline with many small chunks (several sets in flight and reused), an odd number of
// queries, long subjects on the intra-task kernel beside them, and 16-bit rescoring inside chunks.
TEST(AlignGpu, PipelineWithManyChunks) {
  MOLACCEL_REQUIRE_GPU();
  std::mt19937 rng(4242);
  std::vector<std::string> db_letters;
  // Under compute-sanitizer (--sanitizer-sizes) 240 sequences: still many chunks at each size.
  const int count = molaccel::testing::sanitizer_sizes() ? 240 : 900;
  for (int i = 0; i < count; ++i) {
    const auto s = random_protein(rng, 1 + rng() % (i % 10 == 0 ? 1500 : 400));
    db_letters.push_back(i % 5 == 0 ? mutate(rng, s, 0.2) : s);
  }
  db_letters.push_back(std::string(1500, 'W'));  // long at threshold 600
  db_letters.push_back(std::string(500, 'W'));   // short: saturates 16 bits with the x10 matrix
  const auto db = Database::from_sequences(make_set(db_letters));
  const auto queries = make_set({random_protein(rng, 7), random_protein(rng, 130),
                                 mutate(rng, db_letters[11], 0.1), random_protein(rng, 260),
                                 random_protein(rng, 61), std::string(1400, 'W'), random_protein(rng, 333)});
  for (std::uint64_t chunk : {1, 3000, 20000, 0})
    for (unsigned threshold : {600u, 2048u}) {
      gpu_entry::Tuning tuning;
      tuning.chunk_residues = chunk;
      tuning.long_threshold = threshold;
      SCOPED_TRACE(fmt::format("chunk residues {}, long threshold {}", chunk, threshold));
      ScoreStats stats;
      expect_gpu_equals_reference(queries, db, Scoring{}, &stats, &tuning);
      EXPECT_NE(stats.kernel.find("-qp+"), std::string::npos) << stats.kernel;
      expect_gpu_equals_reference(queries, db, blosum62_times_ten(), &stats, &tuning);
      EXPECT_GE(stats.rescored, 1u);
    }
}

// The multi-device path on a one-GPU machine: two GPU workers on the same device (and a CPU worker
// beside them) share the interleaved tiles (one per worker); the scores are exact.
TEST(AlignGpu, SeveralWorkersShareTheDatabase) {
  MOLACCEL_REQUIRE_GPU();
  std::mt19937 rng(606);
  std::vector<std::string> db_letters;
  for (int i = 0; i < 700; ++i)
    db_letters.push_back(random_protein(rng, 1 + rng() % (i % 50 == 0 ? 3000 : 500)));
  const auto db = Database::from_sequences(make_set(db_letters));
  const auto queries =
      make_set({random_protein(rng, 50), mutate(rng, db_letters[42], 0.1), random_protein(rng, 401)});
  const auto ref = score_database_batch(Resources::cpu(0), queries, db, Scoring{}, Backend::reference);
  for (bool with_cpu : {false, true}) {
    std::vector<WorkerInfo> infos(with_cpu ? 3 : 2);
    for (std::size_t w = 0; w < 2; ++w) {
      infos[w].kind = WorkerInfo::Kind::gpu;
      infos[w].device = 0;
    }
    if (with_cpu) infos[2].cpu_threads = 2;
    WorkerPool pool(infos);
    SCOPED_TRACE(fmt::format("CPU worker {}", with_cpu));
    ScoreStats stats;
    JobStats job;
    const auto gpu =
        detail::score_database_batch_on(pool, 4, queries, db, Scoring{}, Backend::cuda, &stats, &job);
    EXPECT_EQ(job.tiles, infos.size());  // one interleaved tile per worker
    for (std::size_t q = 0; q < queries.size(); ++q)
      for (std::size_t i = 0; i < db.size(); ++i)
        ASSERT_EQ(gpu[q][i], ref[q][i]) << "query " << q << ", subject " << i << ", " << stats.kernel;
  }
}

TEST(AlignGpu, OverflowPastSixteenBitsIsRescored) {
  MOLACCEL_REQUIRE_GPU();
  const Scoring scoring = blosum62_times_ten();
  std::mt19937 rng(31);
  const auto base = random_protein(rng, 800, "ACDEFGHIKLMNPQRSTVWY");
  std::vector<std::string> db_letters = {base, mutate(rng, base, 0.05), std::string(3100, 'W')};
  for (int i = 0; i < 100; ++i) db_letters.push_back(random_protein(rng, 1 + rng() % 500));
  const auto db = Database::from_sequences(make_set(db_letters));
  ScoreStats stats;
  expect_gpu_equals_reference(make_set({base}), db, scoring, &stats);
  EXPECT_GE(stats.rescored, 1u);
  // BLOSUM62 itself: identical W runs score 11 per residue, 34,100 for 3,100 (intra-task, 32-bit).
  expect_gpu_equals_reference(make_set({std::string(3100, 'W')}), db, Scoring{});
}

TEST(AlignGpu, PlantedCases) {
  MOLACCEL_REQUIRE_GPU();
  const auto db = Database::from_sequences(make_set({"A", "W", "XXXXXXXX", std::string(40, 'A'), "WAW"}));
  expect_gpu_equals_reference(make_set({"W", "XXXXXXXXXXXX", std::string(5000, 'A'), "AWAWAWAWA"}), db,
                              Scoring{});
}

// Under compute-sanitizer (--sanitizer-sizes, tests/testing/test_arguments.hpp) every length is
// divided by 8: still past the long-subject threshold, through the same kernels.
TEST(AlignGpu, LongSequencesUpTo40000) {
  MOLACCEL_REQUIRE_GPU();
  const std::size_t d = molaccel::testing::sanitizer_sizes() ? 8 : 1;
  std::mt19937 rng(40000);
  const auto long_query = random_protein(rng, 40000 / d, "ACDEFGHIKLMNPQRSTVWY");
  std::vector<std::string> db_letters = {mutate(rng, long_query.substr(1000 / d, 30000 / d), 0.1),
                                         random_protein(rng, 12000 / d), random_protein(rng, 3000 / d),
                                         random_protein(rng, 40000 / d)};
  const auto db = Database::from_sequences(make_set(db_letters));
  expect_gpu_equals_reference(make_set({long_query, random_protein(rng, 777)}), db, Scoring{});
}

// prepare_devices (kernels loaded, streams created ahead of a search, as `align search` does while
// it reads its inputs) changes nothing in the scores; CPU resources: nothing to do.
TEST(AlignGpu, PreparedDevicesGiveTheSameScores) {
  prepare_devices(Resources::cpu(1));
  MOLACCEL_REQUIRE_GPU();
  std::mt19937 rng(77);
  SequenceSet queries, subjects;
  for (int q = 0; q < 3; ++q) queries.add("q", codes(random_protein(rng, 50 + 40 * q)));
  for (int s = 0; s < 300; ++s) subjects.add("s", codes(random_protein(rng, 1 + s * 3)));
  const auto db = Database::from_sequences(subjects);
  const Resources resources = gpu_resources();
  prepare_devices(resources);
  prepare_devices(resources);  // again: already ready
  const auto gpu = score_database_batch(resources, queries, db, Scoring{}, Backend::cuda);
  const auto ref = score_database_batch(Resources::cpu(0), queries, db, Scoring{}, Backend::reference);
  EXPECT_EQ(gpu, ref);
}

TEST(AlignGpu, SearchGivesTheCpuHits) {
  MOLACCEL_REQUIRE_GPU();
  std::mt19937 rng(55);
  std::vector<std::string> db_letters;
  for (int i = 0; i < 2000; ++i)
    db_letters.push_back(random_protein(rng, 30 + rng() % 500, "ACDEFGHIKLMNPQRSTVWY"));
  const auto db = Database::from_sequences(make_set(db_letters));
  const auto queries = make_set({mutate(rng, db_letters[100], 0.2), mutate(rng, db_letters[1500], 0.3)});
  SearchOptions options;
  options.top_k = 20;
  const auto cpu = search(Resources::cpu(0), queries, db, options);
  options.backend = Backend::cuda;
  const auto gpu = search(gpu_resources(), queries, db, options);
  for (std::size_t q = 0; q < 2; ++q) {
    ASSERT_EQ(cpu.hits[q].size(), gpu.hits[q].size());
    for (std::size_t i = 0; i < cpu.hits[q].size(); ++i) {
      EXPECT_EQ(cpu.hits[q][i].subject, gpu.hits[q][i].subject);
      EXPECT_EQ(cpu.hits[q][i].score, gpu.hits[q][i].score);
    }
  }
}

}  // namespace
}  // namespace molaccel::align

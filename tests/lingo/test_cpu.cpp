// The CPU backend against the reference (bit-identical), plus the operations' plumbing: tiles,
// triangles, files, retries, clustering.
#include <cmath>
#include <cstring>
#include <random>

#include "backend_checks.hpp"
#include "lingo/encoding.hpp"
#include "testing/thread_ranks.hpp"

namespace molaccel::lingo {
namespace {

using namespace molaccel::lingo::testing;
using molaccel::testing::TempDir;

Subject cpu_subject() {
  return {Resources::cpu(2), Backend::cpu};
}

TEST(LingoCpu, RandomMatricesEveryQAndMetric) {
  check_random_matrices(cpu_subject());
}

TEST(LingoCpu, RandomMatricesSmallTilesAndPartialChunks) {
  check_random_matrices(cpu_subject(), 7, 50);
}

TEST(LingoCpu, RealSelfMatrixNci) {
  for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set})
    check_real_self_matrix(cpu_subject(), "nci_first5k.smi", 700, 4, metric);
}

TEST(LingoCpu, RealSelfMatrixTriangleTiles) {
  // Tiles of 128 columns: a 5x5 upper triangle of tiles, mirrored.
  check_real_self_matrix(cpu_subject(), "demo4096.smi", 611, 4, Metric::tanimoto, 128);
  check_real_self_matrix(cpu_subject(), "demo4096.smi", 300, 8, Metric::vidal, 64);
}

TEST(LingoCpu, EdgeCasesShortAndLong) {
  std::vector<std::string> smiles = {"C", "CC", "CCC", "CCCC", "CCCCC", "c1ccccc1"};
  std::string long_one;
  for (int i = 0; i < 400; ++i) long_one += "C(=O)";
  smiles.push_back(long_one);  // magnitude ~2000 with huge counts
  const auto set = make_molecules(smiles, {});
  for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set}) {
    const auto expected = reference_matrix(set, nullptr, metric);
    const auto actual = similarity_matrix(Resources::cpu(2), set, nullptr, with(Backend::cpu, metric));
    expect_bit_identical(expected, actual, set.size(), std::string(to_string(metric)));
    EXPECT_EQ(actual[0], 0.0f);  // "C": no Lingo, not even similar to itself
  }
}

// More than 65,536 distinct Lingos: the CPU engine's postings are sorted on two 16-bit digits.
TEST(LingoCpu, VocabularyBeyondSixteenBitIds) {
  LingoOptions options;
  options.q = 8;
  const auto smiles = random_smiles_set(41, 1500, 40, 80, 24);
  const auto db = make_molecules(smiles, options);
  ASSERT_GT(detail::encode(db, nullptr).vocabulary_size, 65536u);
  std::vector<std::string> query_smiles(smiles.begin(), smiles.begin() + 30);
  for (const auto& extra : random_smiles_set(42, 10, 40, 80, 24)) query_smiles.push_back(extra);
  const auto queries = make_molecules(query_smiles, options);
  for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set})
    expect_bit_identical(reference_matrix(queries, &db, metric),
                         similarity_matrix(Resources::cpu(2), queries, &db, with(Backend::cpu, metric)),
                         db.size(), std::string(to_string(metric)));
}

TEST(LingoCpu, QueryLingosUnknownToTheDatabaseStillCountInTheUnion) {
  const auto queries = make_molecules({"CCCCOCCCC", "SSSS"}, {});
  const auto db = make_molecules({"CCCC", "CCCCO"}, {});
  for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set})
    expect_bit_identical(reference_matrix(queries, &db, metric),
                         similarity_matrix(Resources::cpu(1), queries, &db, with(Backend::cpu, metric)), 2,
                         std::string(to_string(metric)));
}

TEST(LingoCpu, SearchTopKWithTies) {
  check_search(cpu_subject(), 10, Metric::tanimoto);
  check_search(cpu_subject(), 1, Metric::set);
  check_search(cpu_subject(), 33, Metric::vidal, 4, 64);
  check_search(cpu_subject(), 1000, Metric::tanimoto);  // k larger than the database
}

TEST(LingoCpu, NeighborsRealAndRandom) {
  const auto real = make_molecules(real_smiles("demo4096.smi", 800), {});
  for (float t : {0.0f, 0.3f, 0.5f, 0.8f, 1.0f}) check_neighbors(cpu_subject(), real, t, Metric::tanimoto);
  check_neighbors(cpu_subject(), real, 0.5f, Metric::vidal);
  check_neighbors(cpu_subject(), real, 0.5f, Metric::set, 128);
  const auto rnd = make_molecules(random_smiles_set(5, 333, 1, 10, 4), {});
  check_neighbors(cpu_subject(), rnd, 0.6f, Metric::tanimoto);
}

TEST(LingoCpu, NeighborsLengthBoundSkipsPairs) {
  const auto real = make_molecules(real_smiles("nci_first5k.smi", 3000), {});
  RunInfo info;
  ComputeOptions o = with(Backend::cpu, Metric::tanimoto, 0, 256);
  neighbors(Resources::cpu(2), real, 0.9f, o, &info);
  EXPECT_GT(info.pairs_skipped, 0u);
}

TEST(LingoCpu, ClusterMatchesReferenceAndIsConsistent) {
  const auto set = make_molecules(real_smiles("demo4096.smi", 500), {});
  const float t = 0.6f;
  const auto ref = cluster(Resources::cpu(1), set, t, with(Backend::reference, Metric::tanimoto));
  const auto got = cluster(Resources::cpu(2), set, t, with(Backend::cpu, Metric::tanimoto));
  EXPECT_EQ(ref.cluster_of, got.cluster_of);
  EXPECT_EQ(ref.centroids, got.centroids);
  ASSERT_EQ(got.cluster_of.size(), set.size());
  for (std::size_t c = 0; c < got.centroids.size(); ++c) EXPECT_EQ(got.cluster_of[got.centroids[c]], c);
  for (std::size_t i = 0; i < set.size(); ++i) {
    const auto centroid = got.centroids.at(got.cluster_of[i]);
    if (centroid != i) {
      EXPECT_GE(similarity(set, centroid, set, i, Metric::tanimoto), t);
    }
  }
  // The first centroid has the most neighbours.
  EXPECT_LT(got.centroids.size(), set.size());
}

std::vector<float> read_npy(const std::filesystem::path& path, std::size_t& rows, std::size_t& cols) {
  const std::string data = read_npy_bytes(path, "<f4", rows, cols);
  std::vector<float> out(data.size() / 4);
  std::memcpy(out.data(), data.data(), out.size() * 4);
  return out;
}

TEST(LingoCpu, MatrixFilesNpyAndTsv) {
  TempDir dir;
  const auto queries = make_molecules(real_smiles("demo4096.smi", 150), {});
  const auto db = make_molecules(real_smiles("nci_first5k.smi", 93), {});
  for (const MoleculeSet* d : {static_cast<const MoleculeSet*>(nullptr), &db}) {
    const auto expected = reference_matrix(queries, d, Metric::tanimoto);
    const auto opts = with(Backend::cpu, Metric::tanimoto, 16, 64);
    write_similarity_matrix(Resources::cpu(2), queries, d, dir / "m.npy", MatrixFormat::npy, opts);
    std::size_t rows = 0, cols = 0;
    const auto got = read_npy(dir / "m.npy", rows, cols);
    EXPECT_EQ(rows, queries.size());
    EXPECT_EQ(cols, d ? d->size() : queries.size());
    expect_bit_identical(expected, got, cols, "npy");
    write_similarity_matrix(Resources::cpu(2), queries, d, dir / "m.tsv", MatrixFormat::tsv, opts);
    std::istringstream tsv(molaccel::testing::read_file(dir / "m.tsv"));
    std::string line;
    std::getline(tsv, line);
    EXPECT_EQ(line, "query\ttarget\tsimilarity");
    std::size_t i = 0;
    const auto& targets = d ? *d : queries;
    while (std::getline(tsv, line)) {
      const std::size_t r = i / cols, c = i % cols;
      ASSERT_LT(i, expected.size());
      ASSERT_EQ(line, fmt::format("{}\t{}\t{}", queries.names[r], targets.names[c], expected[i])) << i;
      ++i;
    }
    EXPECT_EQ(i, expected.size());
  }
}

TEST(LingoCpu, NpyOutputTypes) {
  check_npy_types(cpu_subject(), 16, 64);  // upper-triangle tiles with mirrors
  check_npy_types(cpu_subject());
}

TEST(LingoQuantise, HalfMatchesTheCompilersConversion) {
  std::vector<float> values = {0.0f,    1.0f,           0.5f,           1.0f / 3,       2.0f / 3,
                               1e-8f,   2.98023224e-8f, 2.98023259e-8f, 5.96046448e-8f, 6.1035156e-5f,
                               6.1e-5f, 65504.0f,       65519.0f,       65520.0f,       1e6f,
                               -0.25f,  -1e-7f};
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t num = rng() % 4000, den = 1 + rng() % 4000;
    values.push_back(static_cast<float>(std::min(num, den)) / static_cast<float>(den));
    std::uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isfinite(f)) values.push_back(f);
  }
  for (float v : values) {
#if defined(__FLT16_MAX__)
    const _Float16 h = static_cast<_Float16>(v);
    std::uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(detail::float_to_half_bits(v), want) << v;
#endif
    if (v >= 0.0f && v <= 1.0f) {
      ASSERT_EQ(detail::similarity_to_u8(v), static_cast<std::uint8_t>(std::nearbyint(255.0f * v))) << v;
    }
  }
  EXPECT_EQ(detail::similarity_to_u8(0.5f), 128);  // 127.5 ties to even
  EXPECT_EQ(parse_output_type("fp16"), OutputType::fp16);
  EXPECT_THROW(parse_output_type("fp64"), InputError);
}

TEST(LingoCpu, FailedJobLeavesNoFile) {
  TempDir dir;
  const auto set = make_molecules(real_smiles("demo4096.smi", 100), {});
  auto opts = with(Backend::cpu, Metric::tanimoto, 10, 0);
  opts.job.inject_fault = [](const WorkerInfo&, std::size_t tile, int) { return tile == 3; };
  EXPECT_ANY_THROW(
      write_similarity_matrix(Resources::cpu(1), set, &set, dir / "m.npy", MatrixFormat::npy, opts));
  EXPECT_FALSE(std::filesystem::exists(dir / "m.npy"));
  EXPECT_ANY_THROW(
      write_similarity_matrix(Resources::cpu(1), set, &set, dir / "m.tsv", MatrixFormat::tsv, opts));
  EXPECT_FALSE(std::filesystem::exists(dir / "m.tsv"));
  // With a single CPU worker every worker has failed the tile, so the job must fail (retries on
  // other workers are the scheduler's own tests); the in-memory form fails the same way.
  EXPECT_ANY_THROW(similarity_matrix(Resources::cpu(1), set, &set, opts));
}

TEST(LingoCpu, MismatchedQIsAnInputError) {
  LingoOptions q3;
  q3.q = 3;
  const auto a = make_molecules({"CCCC"}, {});
  const auto b = make_molecules({"CCCC"}, q3);
  EXPECT_THROW(similarity_matrix(Resources::cpu(1), a, &b, {}), InputError);
  EXPECT_THROW(search(Resources::cpu(1), a, b, 0, {}), InputError);
}

// Ranks as threads: rank 0 gets exactly the single-process search, neighbours and clusters (and
// the other ranks nothing), for any count of ranks, more ranks than molecules included.
TEST(LingoCpu, AcrossRanksGivesTheSingleProcessResults) {
  LingoOptions lingo;
  const auto db = make_molecules(random_smiles_set(41, 90, 2, 12, 6), lingo);
  const auto queries = make_molecules(random_smiles_set(42, 13, 2, 12, 6), lingo);
  ComputeOptions options;
  const auto resources = Resources::cpu(1);
  const auto search_one = search(resources, queries, db, 7, options);
  const auto pairs_one = neighbors(resources, db, 0.5f, options);
  const auto clusters_one = cluster(resources, db, 0.5f, options);
  ASSERT_FALSE(pairs_one.empty());  // the inputs give neighbours to compare
  for (int ranks : {1, 2, 3, 4, 100}) {
    const std::string what = std::to_string(ranks) + " ranks";
    molaccel::testing::run_ranks(ranks, [&](Communicator& comm) {
      const auto mine = Resources::cpu(1);
      const auto hits = search_across_ranks(comm, mine, queries, db, 7, options);
      const auto pairs = neighbors_across_ranks(comm, mine, db, 0.5f, options);
      const auto clusters = cluster_across_ranks(comm, mine, db, 0.5f, options);
      if (!comm.is_root()) {
        EXPECT_TRUE(hits.empty() && pairs.empty() && clusters.cluster_of.empty());
        return;
      }
      expect_same_hits(search_one, hits, what + ": search");
      expect_same_hits(pairs_one, pairs, what + ": neighbors");
      EXPECT_EQ(clusters.cluster_of, clusters_one.cluster_of) << what;
      EXPECT_EQ(clusters.centroids, clusters_one.centroids) << what;
    });
  }
  // The size bound across ranks, for each metric and at the edges of the threshold range.
  for (const Metric metric : {Metric::tanimoto, Metric::set, Metric::vidal})
    for (const float threshold : {0.0f, 0.3f, 0.8f, 1.0f}) {
      ComputeOptions o;
      o.metric = metric;
      const auto expected = neighbors(resources, db, threshold, o);
      molaccel::testing::run_ranks(3, [&](Communicator& comm) {
        const auto pairs = neighbors_across_ranks(comm, Resources::cpu(1), db, threshold, o);
        if (comm.is_root())
          expect_same_hits(expected, pairs,
                           std::string(to_string(metric)) + " at " + std::to_string(threshold));
      });
    }
}

}  // namespace
}  // namespace molaccel::lingo

// The CUDA backend against the reference, bit for bit (skipped without a GPU). Cases aim at each
// kernel path: hashed table (small and large), the merge kernel (vidal, and queries too large for a
// table), wide bit-sliced counters (database molecules with >= 2048 features), streamed database
// tiles merged on the host, and the on-device top-k / threshold selection.
#include <cstring>
#include <mutex>
#include <random>

#include "backend_checks.hpp"
#include "testing/test_arguments.hpp"
#ifdef MOLACCEL_HAVE_CUDA
#include <cuda_runtime.h>

#include "lingo/cuda/cuda_backend.hpp"
#endif

namespace molaccel::lingo {
namespace {

using namespace molaccel::lingo::testing;

Subject gpu_subject() {
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  return {Resources::create(o), Backend::cuda};
}

TEST(LingoCuda, NotCompiledOrUnavailableIsAClearError) {
  const auto set = make_molecules({"CCCC"}, {});
#ifndef MOLACCEL_HAVE_CUDA
  EXPECT_THROW(similarity_matrix(Resources::cpu(1), set, nullptr, with(Backend::cuda, Metric::tanimoto)),
               NotCompiled);
#else
  // A CPU-only Resources cannot run the cuda backend.
  EXPECT_THROW(similarity_matrix(Resources::cpu(1), set, nullptr, with(Backend::cuda, Metric::tanimoto)),
               DeviceUnavailable);
#endif
}

TEST(LingoCuda, RandomMatricesEveryQAndMetric) {
  MOLACCEL_REQUIRE_GPU();
  check_random_matrices(gpu_subject());
}

TEST(LingoCuda, RandomMatricesStreamedDatabaseTiles) {
  MOLACCEL_REQUIRE_GPU();
  check_random_matrices(gpu_subject(), 13, 64);
}

TEST(LingoCuda, RealSelfMatricesAllMetrics) {
  MOLACCEL_REQUIRE_GPU();
  for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set}) {
    check_real_self_matrix(gpu_subject(), "nci_first5k.smi", 1500, 4, metric);
    check_real_self_matrix(gpu_subject(), "demo4096.smi", 1029, 4, metric, 256);
  }
  check_real_self_matrix(gpu_subject(), "nci_first5k.smi", 777, 8, Metric::tanimoto);
  check_real_self_matrix(gpu_subject(), "nci_first5k.smi", 777, 1, Metric::tanimoto);
}

TEST(LingoCuda, LargeQueriesAndWideCounters) {
  MOLACCEL_REQUIRE_GPU();
  std::vector<std::string> smiles = real_smiles("demo4096.smi", 90);
  auto repeat = [](const std::string& unit, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += unit;
    return s;
  };
  smiles.push_back(repeat("C(=O)N", 600));       // ~3,600 features: a large-table group of its own
  smiles.push_back(repeat("c1ccccc1CC", 1000));  // ~10,000 features: beyond any table -> merge kernel
  smiles.push_back(repeat("CCCC", 700));         // one Lingo of count ~2,800: wide counters
  smiles.push_back("C");                         // no Lingo at all
  const auto set = make_molecules(smiles, {});
  for (auto metric : {Metric::tanimoto, Metric::set, Metric::vidal}) {
    const auto expected = reference_matrix(set, nullptr, metric);
    const auto actual = similarity_matrix(gpu_subject().resources, set, nullptr, with(Backend::cuda, metric));
    expect_bit_identical(expected, actual, set.size(), std::string(to_string(metric)));
  }
}

TEST(LingoCuda, SearchTopKOnTheGpu) {
  MOLACCEL_REQUIRE_GPU();
  check_search(gpu_subject(), 10, Metric::tanimoto);
  check_search(gpu_subject(), 1, Metric::set);
  check_search(gpu_subject(), 100, Metric::vidal);
  check_search(gpu_subject(), 7, Metric::tanimoto, 5, 64);  // streamed database, merged on the host
  check_search(gpu_subject(), 1000, Metric::tanimoto);      // k larger than the database
}

// The GPU selection sorts up to 4,096 candidates per row in shared memory: the values in the
// 2,048-bin histogram's cut bin and above. Planted here: a cut bin with more equal values than that
// (5,000 copies of one molecule: the exact radix-select fallback), and k beyond the buffer (the
// rows are sorted on the host), both against the brute-force top-k of the reference matrix.
TEST(LingoCuda, SearchTopKManyTiesAndLargeK) {
  MOLACCEL_REQUIRE_GPU();
  auto db_smiles = random_smiles_set(41, 300, 1, 12, 5);
  for (int i = 0; i < 5000; ++i)
    db_smiles.insert(db_smiles.begin() + (i * 7) % (db_smiles.size() + 1), "CCOc1ccccc1N");
  auto query_smiles = random_smiles_set(42, 6, 1, 12, 5);
  query_smiles.push_back("CCOc1ccccc1N");
  query_smiles.push_back("CCOc1ccccc1NC");
  const auto queries = make_molecules(query_smiles, {});
  const auto db = make_molecules(db_smiles, {});
  const auto m = reference_matrix(queries, &db, Metric::tanimoto);
  for (std::size_t k : {std::size_t{1}, std::size_t{10}, std::size_t{4096}, std::size_t{4500}}) {
    const auto expected = brute_top_k(m, queries.size(), db.size(), k);
    const auto actual =
        search(gpu_subject().resources, queries, db, k, with(Backend::cuda, Metric::tanimoto));
    expect_same_hits(expected, actual, fmt::format("top-{} with 5,000 ties", k));
  }
}

TEST(LingoCuda, SearchRealSetAgainstCpu) {
  MOLACCEL_REQUIRE_GPU();
  const auto queries = make_molecules(real_smiles("nci_first5k.smi", 300), {});
  const auto db = make_molecules(real_smiles("demo4096.smi", 4096), {});
  const auto cpu = search(Resources::cpu(2), queries, db, 100, with(Backend::cpu, Metric::tanimoto));
  const auto gpu = search(gpu_subject().resources, queries, db, 100, with(Backend::cuda, Metric::tanimoto));
  expect_same_hits(cpu, gpu, "top-100 real");
}

// A set searched against itself (the same object: encoded once, its database slice on the device
// serves as the query slice), in several row tiles (and in one): the CPU's hits, and HitsReady
// reports every query once, as a view into the result.
TEST(LingoCuda, SearchSetAgainstItselfOnTheGpu) {
  MOLACCEL_REQUIRE_GPU();
  const auto set = make_molecules(real_smiles("demo4096.smi", 4096), {});
  const auto copy = set;
  const auto cpu = search(Resources::cpu(2), set, copy, 50, with(Backend::cpu, Metric::tanimoto));
  for (std::size_t tile_rows : {std::size_t{0}, std::size_t{96}}) {
    std::vector<int> seen(set.size(), 0);
    std::mutex mutex;
    const Hit* base = nullptr;
    const auto gpu =
        search(gpu_subject().resources, set, set, 50, with(Backend::cuda, Metric::tanimoto, tile_rows),
               nullptr, [&](std::size_t first, const Hit* hits, std::size_t count) {
                 std::lock_guard lock(mutex);
                 if (!base) base = hits - first * 50;
                 EXPECT_EQ(hits, base + first * 50);
                 for (std::size_t q = first; q < first + count / 50; ++q) ++seen[q];
               });
    expect_same_hits(cpu, gpu, fmt::format("top-50 of the set against itself, tile rows {}", tile_rows));
    EXPECT_EQ(base, gpu.data());
    for (std::size_t q = 0; q < set.size(); ++q) ASSERT_EQ(seen[q], 1) << q;
  }
}

TEST(LingoCuda, NeighborsOnTheGpu) {
  MOLACCEL_REQUIRE_GPU();
  const auto real = make_molecules(real_smiles("demo4096.smi", 1200), {});
  for (float t : {0.0f, 0.4f, 0.7f, 1.0f}) check_neighbors(gpu_subject(), real, t, Metric::tanimoto);
  check_neighbors(gpu_subject(), real, 0.5f, Metric::vidal, 256);
  check_neighbors(gpu_subject(), real, 0.5f, Metric::set, 512);
}

// Neighbours on the GPU order the set by size and skip whole tiles whose size ranges cannot reach
// T (min/max < T). 18,000 molecules of very different sizes, in mixed input order, give 3 x 3
// tiles of 8,192 (the GPU default; upper triangle: 6), some skipped; the result must equal the
// CPU backend's (itself tested against the reference), in input indices.
TEST(LingoCuda, NeighborsSkipTilesBySize) {
  MOLACCEL_REQUIRE_GPU();
  const auto small = random_smiles_set(61, 6000, 1, 4), medium = random_smiles_set(62, 6000, 20, 40),
             large = random_smiles_set(63, 6000, 80, 100);
  std::vector<std::string> smiles;
  for (std::size_t i = 0; i < 6000; ++i) {
    smiles.push_back(large[i]);
    smiles.push_back(small[i]);
    smiles.push_back(medium[i]);
  }
  const auto set = make_molecules(smiles, {});
  for (const auto& [t, metric] :
       {std::pair{0.5f, Metric::tanimoto}, std::pair{0.8f, Metric::tanimoto}, std::pair{0.6f, Metric::set}}) {
    const auto cpu = neighbors(Resources::cpu(2), set, t, with(Backend::cpu, metric));
    RunInfo info;
    const auto gpu = neighbors(gpu_subject().resources, set, t, with(Backend::cuda, metric), &info);
    expect_same_hits(cpu, gpu,
                     fmt::format("neighbors >= {} {} (tiles skipped by size)", t, to_string(metric)));
    EXPECT_GT(info.pairs_skipped, 0u) << t;
  }
}

TEST(LingoCuda, ClusterMatchesCpu) {
  MOLACCEL_REQUIRE_GPU();
  const auto set = make_molecules(real_smiles("demo4096.smi", 2000), {});
  const auto cpu = cluster(Resources::cpu(2), set, 0.6f, with(Backend::cpu, Metric::tanimoto));
  const auto gpu = cluster(gpu_subject().resources, set, 0.6f, with(Backend::cuda, Metric::tanimoto));
  EXPECT_EQ(cpu.cluster_of, gpu.cluster_of);
  EXPECT_EQ(cpu.centroids, gpu.centroids);
}

#ifdef MOLACCEL_HAVE_CUDA
// The pipeline on its own (GpuJob, driven as the front file drives it) with a tuning of tiny passes,
// so every pass boundary and buffer reuse is exercised: the whole matrix in every element type
// into ordinary memory (pinned staging, helper threads) and into page-locked memory (the copy
// engine writes it directly), against the reference byte for byte.
WorkerInfo gpu_worker(int device) {
  WorkerInfo info;
  info.kind = WorkerInfo::Kind::gpu;
  info.device = device;
  return info;
}

cuda_backend::Tuning tiny_passes(bool grow = true) {
  cuda_backend::Tuning t;
  t.staged_pass_elements = 5000;
  t.direct_pass_elements = 5000;
  t.grow_passes = grow;
  return t;
}

void check_job_matrix(const MoleculeSet& queries, const MoleculeSet* db, Metric metric,
                      const cuda_backend::Tuning& tuning, const std::string& what) {
  const auto encoding = detail::encode(queries, db);
  const cuda_backend::GpuJob job(encoding, metric, tuning);
  const std::size_t rows = queries.size(), cols = db ? db->size() : rows;
  const auto m = reference_matrix(queries, db, metric);
  const int device = gpu_list().front().index;
  // The whole matrix, and a rect that starts inside it (row and column offsets).
  for (const cuda_backend::Rect rect :
       {cuda_backend::Rect{0, rows, 0, cols}, cuda_backend::Rect{3, rows, 11, cols}}) {
    std::vector<float> expected;
    for (std::size_t r = rect.row_begin; r < rect.row_end; ++r)
      expected.insert(expected.end(), m.begin() + r * cols + rect.col_begin,
                      m.begin() + r * cols + rect.col_end);
    for (auto type : {OutputType::fp32, OutputType::fp16, OutputType::u8}) {
      const std::string want = expected_bytes(expected, type);
      for (bool page_locked : {false, true}) {
        auto pinned = allocate_host_buffer(page_locked ? want.size() : 0);
        std::vector<std::uint8_t> plain(page_locked ? 0 : want.size());
        if (page_locked) {
          ASSERT_TRUE(pinned.page_locked);
        }
        auto* out = page_locked ? reinterpret_cast<std::uint8_t*>(pinned.data.get()) : plain.data();
        std::fill_n(out, want.size(), std::uint8_t{0xab});
        PinnedPool staging;
        WorkerContext ctx(gpu_worker(device), nullptr, &staging);
        job.dense_to(ctx, rect, type, out, rect.cols() * element_bytes(type));
        EXPECT_EQ(std::memcmp(out, want.data(), want.size()), 0)
            << what << " " << to_string(type) << (page_locked ? " page-locked" : " ordinary memory")
            << " rows from " << rect.row_begin << " cols from " << rect.col_begin;
      }
      // Rows with a stride (a column tile of a larger matrix): page-locked, the copy engine writes
      // each pass by a strided 2-D copy; ordinary memory, the helper threads copy row by row.
      const std::size_t row_bytes = rect.cols() * element_bytes(type), ld = row_bytes + 40;
      for (bool page_locked : {false, true}) {
        auto pinned = allocate_host_buffer(page_locked ? rect.rows() * ld : 0);
        std::vector<std::uint8_t> plain(page_locked ? 0 : rect.rows() * ld);
        auto* out = page_locked ? reinterpret_cast<std::uint8_t*>(pinned.data.get()) : plain.data();
        std::fill_n(out, rect.rows() * ld, std::uint8_t{0xab});
        WorkerContext ctx(gpu_worker(device));
        job.dense_to(ctx, rect, type, out, ld);
        for (std::size_t r = 0; r < rect.rows(); ++r)
          ASSERT_EQ(std::memcmp(out + r * ld, want.data() + r * row_bytes, row_bytes), 0)
              << what << " " << to_string(type) << " strided, row " << r
              << (page_locked ? " page-locked" : " ordinary memory");
      }
    }
  }
}

TEST(LingoCudaPipeline, ManySmallPassesStayBitIdentical) {
  MOLACCEL_REQUIRE_GPU();
  for (int q : {1, 4, 8}) {
    LingoOptions lo;
    lo.q = q;
    const auto queries = make_molecules(random_smiles_set(100 + q, 37, 1, 24, 10), lo);
    const auto db = make_molecules(random_smiles_set(200 + q, 203, 1, 30, 10), lo);
    for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set})
      check_job_matrix(queries, &db, metric, tiny_passes(), fmt::format("q={} {}", q, to_string(metric)));
  }
  // Under compute-sanitizer (--sanitizer-sizes) fewer real molecules: the same passes, fewer of them.
  const bool small = ::molaccel::testing::sanitizer_sizes();
  const auto nci = make_molecules(real_smiles("nci_first5k.smi", small ? 300 : 1500), {});
  check_job_matrix(nci, nullptr, Metric::tanimoto, tiny_passes(), "nci self");
  const auto demo = make_molecules(real_smiles("demo4096.smi", small ? 201 : 1029), {});
  check_job_matrix(demo, nullptr, Metric::vidal, tiny_passes(), "demo self vidal");
}

// Passes growing from an eighth of the pass size (the default) and equal passes: same bits.
TEST(LingoCudaPipeline, PassScheduleKeepsBits) {
  MOLACCEL_REQUIRE_GPU();
  const auto set = make_molecules(real_smiles("demo4096.smi", 700), {});
  for (bool grow : {true, false}) {
    cuda_backend::Tuning t = tiny_passes(grow);
    t.staged_pass_elements = t.direct_pass_elements = 40000;  // about 57 rows: growing from 7
    check_job_matrix(set, nullptr, Metric::tanimoto, t, fmt::format("grow {}", grow));
  }
}
#endif

// Into page-locked memory the copy engine writes the result directly (no staging buffers): whole
// rows (one contiguous copy per pass) and column tiles (strided 2-D copies), self and two-set.
TEST(LingoCuda, PageLockedDestinationIsWrittenDirectly) {
  MOLACCEL_REQUIRE_GPU();
  const auto queries = make_molecules(random_smiles_set(51, 157, 1, 30), {});
  const auto db = make_molecules(random_smiles_set(52, 403, 1, 30), {});
  for (const MoleculeSet* other : {static_cast<const MoleculeSet*>(nullptr), &db}) {
    const std::size_t cols = other ? other->size() : queries.size();
    const auto expected = reference_matrix(queries, other, Metric::tanimoto);
    for (std::size_t tile_cols : {std::size_t{0}, std::size_t{96}}) {
      auto buffer = allocate_host_buffer(queries.size() * cols * sizeof(float));
      ASSERT_TRUE(buffer.page_locked);
      auto* out = reinterpret_cast<float*>(buffer.data.get());
      std::fill_n(out, queries.size() * cols, -1.0f);
      similarity_matrix(gpu_subject().resources, queries, other, out,
                        with(Backend::cuda, Metric::tanimoto, 0, tile_cols));
      expect_bit_identical(
          expected, std::vector<float>(out, out + queries.size() * cols), cols,
          fmt::format("page-locked, {} db, tile_cols {}", other ? "two-set" : "self", tile_cols));
    }
  }
}

TEST(LingoCuda, NpyOutputTypes) {
  MOLACCEL_REQUIRE_GPU();
  check_npy_types(gpu_subject());
}

// The hashed kernel's two count extractions (bytes by transpose below 256 features, one at a time
// from 256) and its wide counters (>= 2,048 features).
TEST(LingoCuda, HashedKernelExtractionPaths) {
  MOLACCEL_REQUIRE_GPU();
  std::vector<std::string> smiles = real_smiles("demo4096.smi", 300);
  std::string long_one, mid_one;
  for (int i = 0; i < 700; ++i) long_one += "CCCC";  // >= 2048 features: wide planes
  for (int i = 0; i < 90; ++i) mid_one += "C(=O)N";  // >= 256 features: the generic extraction
  smiles.push_back(long_one);
  smiles.push_back(mid_one);
  smiles.push_back("C");
  const auto set = make_molecules(smiles, {});
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  const auto gpu = Resources::create(o);
  for (auto metric : {Metric::tanimoto, Metric::set})
    expect_bit_identical(reference_matrix(set, nullptr, metric),
                         similarity_matrix(gpu, set, nullptr, with(Backend::cuda, metric)), set.size(),
                         std::string(to_string(metric)));
}

// A large, diverse vocabulary: random letter strings share few Lingos, so a group's features are
// nearly all distinct; long ones (100-160 letters) close groups early (2,048 features).
void check_diverse_vocabulary() {
  std::mt19937_64 rng(5);
  const char atoms[] = "CNOSPFIBcnos";
  std::vector<std::string> smiles;
  for (int i = 0; i < 613; ++i) {
    const std::size_t len = (i % 3 == 0) ? 100 + rng() % 61 : 1 + rng() % 50;
    std::string s;
    for (std::size_t k = 0; k < len; ++k) s += atoms[rng() % 12];
    smiles.push_back(s);
  }
  const auto set = make_molecules(smiles, {});
  const auto others = make_molecules(real_smiles("demo4096.smi", 333), {});
  for (auto metric : {Metric::tanimoto, Metric::set}) {
    expect_bit_identical(
        reference_matrix(set, nullptr, metric),
        similarity_matrix(gpu_subject().resources, set, nullptr, with(Backend::cuda, metric)), set.size(),
        fmt::format("diverse self {}", to_string(metric)));
    expect_bit_identical(
        reference_matrix(set, &others, metric),
        similarity_matrix(gpu_subject().resources, set, &others, with(Backend::cuda, metric)), others.size(),
        fmt::format("diverse x real {}", to_string(metric)));
  }
}

TEST(LingoCuda, DiverseVocabularyGroupsCloseEarly) {
  MOLACCEL_REQUIRE_GPU();
  check_diverse_vocabulary();
}

#ifdef MOLACCEL_HAVE_CUDA
// Results left in device memory (GpuJob::on_device, the kernel benchmark's loop): the whole rect in
// one pass (its default when it fits), and in passes of 61 rows, give the reference's bits; a
// second call reuses the worker state.
TEST(LingoCuda, TimedKernelLoopKeepsBits) {
  MOLACCEL_REQUIRE_GPU();
  const auto set = make_molecules(real_smiles("demo4096.smi", 1100), {});
  const std::size_t n = set.size();
  const auto expected = reference_matrix(set, nullptr, Metric::tanimoto);
  const auto encoding = detail::encode(set, nullptr);
  const int device = gpu_list().front().index;
  for (std::size_t elements : {std::size_t{0}, std::size_t{67100}}) {
    cuda_backend::Tuning tuning;
    tuning.device_pass_elements = elements;
    const cuda_backend::GpuJob job(encoding, Metric::tanimoto, tuning);
    WorkerContext ctx(gpu_worker(device));
    for (int call = 0; call < 2; ++call) {
      std::vector<float> got(n * n, -1.0f);
      std::size_t passes = 0;
      job.on_device(ctx, {0, n, 0, n},
                    [&](std::size_t row, std::size_t rows, const float* sims, void* stream) {
                      ++passes;
                      const auto s = static_cast<cudaStream_t>(stream);
                      ASSERT_EQ(cudaMemcpyAsync(got.data() + row * n, sims, rows * n * sizeof(float),
                                                cudaMemcpyDeviceToHost, s),
                                cudaSuccess);
                      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
                    });
      EXPECT_EQ(passes, elements ? (n + 60) / 61 : 1u);
      expect_bit_identical(expected, got, n,
                           fmt::format("on_device, {} elements per pass, call {}",
                                       elements ? std::to_string(elements) : "all", call));
    }
  }
}
#endif

}  // namespace
}  // namespace molaccel::lingo

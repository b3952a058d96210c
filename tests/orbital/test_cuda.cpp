// Tier 2 for the GPU kernels: generic, JIT and basis-matrix (many orbitals, density) against the
// reference on random molecules and basis sets (every shell type, pure and Cartesian), odd grid
// sizes, and the Psi4 cubes; a failed GPU tile is redone on the CPU worker.
#include <string>

#include "orbital/evaluate_on_pool.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

Resources gpu_resources(bool with_cpu = false) {
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  o.cpu_worker_with_gpus = with_cpu;
  o.cpu_threads = 2;
  return Resources::create(o);
}

// fp32 with ex2.approx (relative error ~2^-22 per exponential, so the same budget as the CPU
// path): 2e-5 of the largest value; a convention or indexing error is O(1).
constexpr double kFp32Tolerance = 2e-5;

// The library's tuning for a request, with another JIT brick shape.
detail::Tuning with_jit_brick(std::size_t orbitals, const char* brick) {
  detail::Tuning tuning = detail::tuning_for(0, {orbitals, false});
  tuning.jit_brick = detail::parse_cull_layout(brick);
  return tuning;
}

TEST(OrbitalCuda, KernelsMatchReferenceOnRandomBasisSets) {
  MOLACCEL_REQUIRE_GPU();
  const auto resources = gpu_resources();
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    const auto wfn = test::random_wavefunction(seed, 1 + static_cast<int>(seed % 5), 8);
    GridSpec grid = automatic_grid(wfn, 2.0, 0.37);
    grid.counts[2] = 131;  // past a 128-thread block, odd remainder
    const std::vector<OrbitalRef> one{{Spin::alpha, 1}};
    const auto expected = reference::evaluate_orbitals(wfn, grid, one, 0);
    // JIT: the default brick (8x8x8, 4 points per thread) and other brick shapes (one plane, one
    // and two points per thread); "" = the generic kernel.
    for (const char* brick : {"default", "1x16x8", "4x4x8", "4x8x8/2", "2x8x16/2", ""}) {
      const std::string b = brick;
      EvaluateOptions options;
      options.backend = b.empty() ? Backend::cuda_generic : Backend::cuda_jit;
      EvaluationInfo info;
      std::vector<float> got(expected.size());
      if (b == "default" || b.empty())
        got = evaluate_orbitals(resources, wfn, grid, one, options, &info);
      else
        detail::evaluate_orbitals_tuned(resources, wfn, grid, one, got.data(), got.size(), options,
                                        with_jit_brick(one.size(), brick), &info);
      EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance)
          << "seed " << seed << " " << info.backend << " " << brick;
    }
    // Eight orbitals: the basis-matrix + contraction path.
    std::vector<OrbitalRef> many;
    for (std::size_t o = 0; o < 8; ++o) many.push_back({Spin::alpha, o});
    EvaluateOptions options;
    options.backend = Backend::cuda_generic;
    const auto expected_many = reference::evaluate_orbitals(wfn, grid, many, 0);
    const auto got_many = evaluate_orbitals(resources, wfn, grid, many, options);
    EXPECT_LT(test::relative_max_error(got_many, expected_many), kFp32Tolerance) << "seed " << seed;
    const auto rho_expected = reference::evaluate_density(wfn, grid, DensityKind::total, 0);
    const auto rho = evaluate_density(resources, wfn, grid, DensityKind::total, options);
    EXPECT_LT(test::relative_max_error(rho, rho_expected), kFp32Tolerance) << "seed " << seed;
  }
}

// Many orbitals and densities: the sparse basis-matrix path (per-brick shell lists) with more than
// 64 orbitals (the 192-wide contraction tiles), tiles of 1, 2, 3 and more planes (the three brick
// shapes, with bricks cut by the tile and grid edges) and a sheared grid (the brick's bounding
// sphere with non-orthogonal axes), against the reference.
TEST(OrbitalCuda, BasisMatrixPathsMatchReferenceForManyOrbitals) {
  MOLACCEL_REQUIRE_GPU();
  const auto resources = gpu_resources();
  Wavefunction wfn = read_molden(test::bundled("threonine_631gs.molden"));
  // 100 "occupied" orbitals, so that the density also takes the 192-wide tiles.
  for (std::size_t o = 0; o < wfn.alpha.count(); ++o) wfn.alpha.occupations[o] = o < 100 ? 2.0 : 0.0;
  GridSpec grid = automatic_grid(wfn, 1.5, 0.45);
  grid.counts[1] += 3;  // rows and columns not multiples of a brick
  grid.counts[2] += 5;
  GridSpec sheared = grid;
  for (int d = 0; d < 3; ++d) sheared.axes[1][d] += 0.3 * grid.axes[2][d];
  std::vector<OrbitalRef> many;
  for (std::size_t o = 0; o < 100; ++o) many.push_back({Spin::alpha, o});
  for (const GridSpec* g : {&grid, &sheared}) {
    const auto expected = reference::evaluate_orbitals(wfn, *g, many, 0);
    const auto rho_expected = reference::evaluate_density(wfn, *g, DensityKind::total, 0);
    {
      for (std::size_t per_tile : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{0}}) {
        EvaluateOptions options;
        options.backend = Backend::cuda_jit;
        options.planes_per_tile = per_tile;
        EvaluationInfo info;
        const auto got = evaluate_orbitals(resources, wfn, *g, many, options, &info);
        EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance)
            << "planes/tile " << per_tile << " " << info.backend;
        EXPECT_NE(info.backend.find("sparse"), std::string::npos) << info.backend;
        const auto rho = evaluate_density(resources, wfn, *g, DensityKind::total, options, &info);
        EXPECT_LT(test::relative_max_error(rho, rho_expected), kFp32Tolerance)
            << "planes/tile " << per_tile << " " << info.backend;
      }
    }
  }
}

// JIT kernel edge cases: atoms far apart (most bricks have an empty atom list, some lists hold one
// atom), an atom exactly on a brick corner (grid point (2a, 8b, 8c) of 2x8x8 bricks: offsets of
// exactly 0 and points on both sides of the brick faces), a sheared grid, and
// tiles of 1 and 3 planes, which cut bricks. Against the reference (fp32 tolerance), and bit for
// bit against the same kernel with other tilings: bricks are aligned to the grid, not to the tile,
// so the tiling cannot change a value.
TEST(OrbitalCuda, CulledJitHandlesEmptyBricksAndAtomsOnBrickCorners) {
  MOLACCEL_REQUIRE_GPU();
  const auto resources = gpu_resources();
  Wavefunction wfn = test::random_wavefunction(11, 3, 4);
  GridSpec grid;
  const double h = 0.45;
  for (int d = 0; d < 3; ++d) grid.axes[d][d] = h;
  grid.origin = {-20.0, -6.0, -7.0};
  grid.counts = {91, 27, 33};  // 41 x 12 x 15 bohr, odd counts
  // Atom 0 on the grid point (44, 16, 16): a corner of the 2x8x8 brick (22, 2, 2).
  wfn.atoms[0].position = {grid.origin[0] + 44 * h, grid.origin[1] + 16 * h, grid.origin[2] + 16 * h};
  wfn.atoms[1].position = {-17.5, 1.0, 0.5};  // 17-20 bohr away from the others
  wfn.atoms[2].position = {18.0, -1.0, -0.5};
  GridSpec sheared = grid;
  for (int d = 0; d < 3; ++d) sheared.axes[1][d] += 0.2 * grid.axes[2][d];
  const std::vector<OrbitalRef> orbitals{{Spin::alpha, 0}, {Spin::alpha, 3}};
  for (const GridSpec* g : {&grid, &sheared}) {
    const auto expected = reference::evaluate_orbitals(wfn, *g, orbitals, 0);
    for (const char* brick : {"8x8x8/4", "2x8x8", "4x8x8/2", "1x16x8"}) {
      std::vector<float> first;
      for (std::size_t per_tile : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
        EvaluateOptions options;
        options.backend = Backend::cuda_jit;
        options.planes_per_tile = per_tile;
        EvaluationInfo info;
        std::vector<float> got(expected.size());
        detail::evaluate_orbitals_tuned(resources, wfn, *g, orbitals, got.data(), got.size(), options,
                                        with_jit_brick(orbitals.size(), brick), &info);
        EXPECT_NE(info.backend.find(std::string("jit-cull-") + brick), std::string::npos) << info.backend;
        EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance)
            << brick << " planes/tile " << per_tile;
        if (first.empty())
          first = got;
        else {
          EXPECT_EQ(got, first) << brick << " planes/tile " << per_tile;
        }
      }
      // The value at the atom on the brick corner, where every offset is exactly 0.
      const std::size_t at = (44 * g->counts[1] + 16) * g->counts[2] + 16;
      EXPECT_NEAR(first[at], expected[at], kFp32Tolerance * std::abs(expected[at]) + 1e-7) << brick;
    }
  }
}

// The multi-device path with two workers on the same GPU (DeviceSpec cannot name a GPU twice, so
// the pool is built directly): per-orbital JIT launches (3 orbitals), the sparse basis matrix (8
// orbitals) and a density, bit for bit equal to one worker and to fixed tiles of about 1/16 of
// the grid (EvaluateOptions::planes_per_tile); then two chunks of the chunk pool fail at their
// first attempt, each in the share of whichever worker claimed it: the share gives its unfinished
// chunks back, the scheduler runs it again on the other worker, and the grid is still bit for bit
// the same.
TEST(OrbitalCuda, TwoWorkersOnOneGpuGiveBitwiseTheSameGridsAndRedoFailedTiles) {
  MOLACCEL_REQUIRE_GPU();
  const auto wfn = read_molden(test::bundled("threonine_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 2.0, 0.3);
  auto gpu_worker = [](int index) {
    WorkerInfo w;
    w.kind = WorkerInfo::Kind::gpu;
    w.device = gpu_list().front().index;
    w.index = index;
    return w;
  };
  WorkerPool one({gpu_worker(0)});
  WorkerPool two({gpu_worker(0), gpu_worker(1)});
  const std::size_t n = grid.point_count();
  const std::size_t fixed_tile = (grid.counts[0] + 15) / 16;  // planes: ~16 tiles per grid
  for (std::size_t count : {std::size_t{3}, std::size_t{8}}) {
    std::vector<OrbitalRef> refs;
    for (std::size_t o = 0; o < count; ++o) refs.push_back({Spin::alpha, 20 + o});
    EvaluateOptions options;
    options.backend = Backend::cuda_jit;
    std::vector<float> a(n * count), b(n * count, -1.0f), c(n * count, -1.0f);
    EvaluationInfo info;
    detail::evaluate_orbitals_on_pool(one, wfn, grid, refs, a.data(), a.size(), options, &info);
    detail::evaluate_orbitals_on_pool(two, wfn, grid, refs, b.data(), b.size(), options, &info);
    EXPECT_EQ(a, b) << count << " orbitals " << info.backend;
    ASSERT_EQ(info.job.tiles_per_worker.size(), 2u);
    EXPECT_EQ(info.job.tiles_per_worker[0] + info.job.tiles_per_worker[1], info.job.tiles);  // chunks
    EXPECT_GE(info.job.tiles, 4u);  // chunks of the grid, whatever the worker count
    const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 0);
    EXPECT_LT(test::relative_max_error(a, expected), kFp32Tolerance) << info.backend;
    EvaluateOptions tiled = options;
    tiled.planes_per_tile = fixed_tile;
    std::fill(b.begin(), b.end(), -1.0f);
    detail::evaluate_orbitals_on_pool(two, wfn, grid, refs, b.data(), b.size(), tiled, &info);
    EXPECT_EQ(a, b) << count << " orbitals, fixed tiles vs chunk pool " << info.backend;
    EXPECT_GE(info.job.tiles, 8u);  // ~16 fixed tiles
    // Chunks 1 and 3 (tiles 2 + c: the two shares come first) fail at their first attempt.
    options.inject_fault = [](const WorkerInfo&, std::size_t tile, int attempt) {
      return attempt == 0 && (tile == 2 + 1 || tile == 2 + 3);
    };
    detail::evaluate_orbitals_on_pool(two, wfn, grid, refs, c.data(), c.size(), options, &info);
    EXPECT_EQ(a, c) << count << " orbitals, with failed chunks";
    EXPECT_EQ(info.job.retries, 2u);
    EXPECT_EQ(info.job.tiles_per_worker[0] + info.job.tiles_per_worker[1], info.job.tiles);
  }
  std::vector<float> rho1(n), rho2(n, -1.0f), rho3(n, -1.0f);
  EvaluateOptions options;
  options.backend = Backend::cuda_jit;
  detail::evaluate_density_on_pool(one, wfn, grid, DensityKind::total, rho1.data(), rho1.size(), options);
  detail::evaluate_density_on_pool(two, wfn, grid, DensityKind::total, rho2.data(), rho2.size(), options);
  EXPECT_EQ(rho1, rho2);
  EvaluateOptions tiled = options;
  tiled.planes_per_tile = fixed_tile;
  detail::evaluate_density_on_pool(two, wfn, grid, DensityKind::total, rho3.data(), rho3.size(), tiled);
  EXPECT_EQ(rho1, rho3) << "density, fixed tiles vs chunk pool";
  // A repeated request reuses the cached preparation and the device states' uploads: same bits.
  std::fill(rho2.begin(), rho2.end(), -1.0f);
  detail::evaluate_density_on_pool(one, wfn, grid, DensityKind::total, rho2.data(), rho2.size(), options);
  EXPECT_EQ(rho1, rho2);
}

// Into page-locked output the copy engine writes each chunk's rows directly (2-D copies, no
// staging): the same bits as into ordinary memory, for one orbital (JIT), a batch (basis-matrix
// path) and a density, on one and two workers.
TEST(OrbitalCuda, PageLockedOutputIsWrittenDirectlyWithTheSameBits) {
  MOLACCEL_REQUIRE_GPU();
  const auto wfn = read_molden(test::bundled("threonine_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 2.0, 0.3);
  WorkerInfo w0, w1;
  w0.kind = w1.kind = WorkerInfo::Kind::gpu;
  w0.device = w1.device = gpu_list().front().index;
  w1.index = 1;
  WorkerPool one({w0});
  WorkerPool two({w0, w1});
  const std::size_t n = grid.point_count();
  EvaluateOptions options;
  options.backend = Backend::cuda_jit;
  for (std::size_t count : {std::size_t{1}, std::size_t{8}}) {
    std::vector<OrbitalRef> refs;
    for (std::size_t o = 0; o < count; ++o) refs.push_back({Spin::alpha, 20 + o});
    std::vector<float> expected(n * count);
    detail::evaluate_orbitals_on_pool(one, wfn, grid, refs, expected.data(), expected.size(), options);
    auto pinned = allocate_host_buffer(n * count * sizeof(float));
    ASSERT_TRUE(pinned.page_locked);
    auto* out = reinterpret_cast<float*>(pinned.data.get());
    for (WorkerPool* pool : {&one, &two}) {
      std::fill(out, out + n * count, -1.0f);
      detail::evaluate_orbitals_on_pool(*pool, wfn, grid, refs, out, n * count, options);
      EXPECT_EQ(expected, std::vector<float>(out, out + n * count)) << count << " orbitals";
    }
  }
  std::vector<float> rho(n);
  detail::evaluate_density_on_pool(one, wfn, grid, DensityKind::total, rho.data(), rho.size(), options);
  auto pinned = allocate_host_buffer(n * sizeof(float));
  auto* out = reinterpret_cast<float*>(pinned.data.get());
  detail::evaluate_density_on_pool(two, wfn, grid, DensityKind::total, out, n, options);
  EXPECT_EQ(rho, std::vector<float>(out, out + n));
}

TEST(OrbitalCuda, MatchesPsi4Cubes) {
  MOLACCEL_REQUIRE_GPU();
  const auto resources = gpu_resources();
  const auto wfn = read_molden(test::bundled("n2_ccpvtz.molden"));
  const Cube homo = read_cube(test::bundled("n2_Psi_a_7_7-A.cube.gz"));
  const Cube dt = read_cube(test::bundled("n2_Dt.cube.gz"));
  for (Backend backend : {Backend::cuda_generic, Backend::cuda_jit}) {
    EvaluateOptions options;
    options.backend = backend;
    const auto values = evaluate_orbitals(resources, wfn, homo.grid, {{Spin::alpha, 6}}, options);
    EXPECT_LT(test::relative_max_error(values, homo.values), 1e-5);
    const auto rho = evaluate_density(resources, wfn, dt.grid, DensityKind::total, options);
    EXPECT_LT(test::relative_max_error(rho, dt.values), 1e-5);
  }
}

TEST(OrbitalCuda, OneTileOnACpuWorkerGivesTheSameGrid) {
  MOLACCEL_REQUIRE_GPU();
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 2.0, 0.2);
  EvaluateOptions options;
  options.backend = Backend::cuda_jit;
  options.planes_per_tile = 3;
  const auto mixed = evaluate_orbitals(gpu_resources(true), wfn, grid, {parse_orbital("homo", wfn)}, options);
  const auto expected = reference::evaluate_orbitals(wfn, grid, {parse_orbital("homo", wfn)}, 0);
  EXPECT_LT(test::relative_max_error(mixed, expected), kFp32Tolerance);
}

TEST(OrbitalCuda, FailedGpuTileIsRedoneOnTheCpuWorker) {
  MOLACCEL_REQUIRE_GPU();
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 2.0, 0.2);
  EvaluateOptions options;
  options.backend = Backend::cuda_jit;
  options.planes_per_tile = 2;
  // Tiles 1 and 4 fail at their first attempt (on whichever worker): each is handed to another.
  options.inject_fault = [](const WorkerInfo&, std::size_t tile, int attempt) {
    return attempt == 0 && (tile == 1 || tile == 4);
  };
  EvaluationInfo info;
  const auto got =
      evaluate_orbitals(gpu_resources(true), wfn, grid, {parse_orbital("homo", wfn)}, options, &info);
  const auto expected = reference::evaluate_orbitals(wfn, grid, {parse_orbital("homo", wfn)}, 0);
  EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance);
  EXPECT_EQ(info.job.retries, 2u);
  // The chunk pool (default tiling) with a GPU and a CPU worker: both take chunks; chunks 0 and 2
  // (tiles shares + c, shares = workers; the 21-plane grid has 3 chunks of 8 planes) fail at their
  // first attempt and are redone by the other.
  const auto resources = gpu_resources(true);
  const std::size_t shares = resources.pool().workers().size();
  options.planes_per_tile = 0;
  options.inject_fault = [shares](const WorkerInfo&, std::size_t tile, int attempt) {
    return attempt == 0 && (tile == shares + 0 || tile == shares + 2);
  };
  const auto pooled = evaluate_orbitals(resources, wfn, grid, {parse_orbital("homo", wfn)}, options, &info);
  EXPECT_LT(test::relative_max_error(pooled, expected), kFp32Tolerance);
  EXPECT_EQ(info.job.retries, 2u);
  EXPECT_EQ(info.job.tiles, 3u);
}

}  // namespace
}  // namespace molaccel::orbital

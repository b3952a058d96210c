// Tier 2 for the GPU kernels: generic, JIT and basis-matrix (many orbitals, density) against the
// reference on random molecules and basis sets (every shell type, pure and Cartesian), odd grid
// sizes, and the Psi4 cubes; a failed GPU tile is redone on the CPU worker.
#include <cstdlib>
#include <string>

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

TEST(OrbitalCuda, KernelsMatchReferenceOnRandomBasisSets) {
  MOLACCEL_REQUIRE_GPU();
  const auto resources = gpu_resources();
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    const auto wfn = test::random_wavefunction(seed, 1 + static_cast<int>(seed % 5), 8);
    GridSpec grid = automatic_grid(wfn, 2.0, 0.37);
    grid.counts[2] = 131;  // past a 128-thread block, odd remainder
    const std::vector<OrbitalRef> one{{Spin::alpha, 1}};
    const auto expected = reference::evaluate_orbitals(wfn, grid, one, 0);
    // JIT: default (brick thread layout), atom offsets from fp32 hi/lo coordinate splits, and the
    // brick, brick3d and row layouts; "" = the generic kernel.
    for (const char* coords : {"default", "split", "brick", "brick3d", "row", ""}) {
      const Backend backend = coords[0] ? Backend::cuda_jit : Backend::cuda_generic;
      if (std::string(coords) == "split") setenv("MOLACCEL_ORBITAL_JIT_COORDS", "split", 1);
      if (std::string(coords) == "brick" || std::string(coords) == "brick3d" || std::string(coords) == "row")
        setenv("MOLACCEL_ORBITAL_JIT_LAYOUT", coords, 1);
      EvaluateOptions options;
      options.backend = backend;
      EvaluationInfo info;
      const auto got = evaluate_orbitals(resources, wfn, grid, one, options, &info);
      EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance)
          << "seed " << seed << " " << info.backend << " " << coords;
      unsetenv("MOLACCEL_ORBITAL_JIT_COORDS");
      unsetenv("MOLACCEL_ORBITAL_JIT_LAYOUT");
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

// Many orbitals and densities: the sparse (per-brick shell lists, default) and the dense basis-
// matrix paths, with more than 64 orbitals (the 192-wide contraction tiles), tiles of 1, 2, 3 and
// more planes (the three brick shapes, with bricks cut by the tile and grid edges) and a sheared
// grid (the brick's bounding sphere with non-orthogonal axes), against the reference.
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
  const char* saved = std::getenv("MOLACCEL_ORBITAL_MATRIX");
  const std::string saved_value = saved ? saved : "";
  for (const GridSpec* g : {&grid, &sheared}) {
    const auto expected = reference::evaluate_orbitals(wfn, *g, many, 0);
    const auto rho_expected = reference::evaluate_density(wfn, *g, DensityKind::total, 0);
    for (const char* path : {"sparse", "dense"}) {
      setenv("MOLACCEL_ORBITAL_MATRIX", path, 1);
      for (std::size_t per_tile : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{0}}) {
        EvaluateOptions options;
        options.backend = Backend::cuda_jit;
        options.planes_per_tile = per_tile;
        EvaluationInfo info;
        const auto got = evaluate_orbitals(resources, wfn, *g, many, options, &info);
        EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance)
            << path << " planes/tile " << per_tile << " " << info.backend;
        EXPECT_NE(info.backend.find(std::string(path) == "sparse" ? "sparse" : "cuda/basis-matrix"), std::string::npos)
            << info.backend;
        const auto rho = evaluate_density(resources, wfn, *g, DensityKind::total, options, &info);
        EXPECT_LT(test::relative_max_error(rho, rho_expected), kFp32Tolerance)
            << path << " planes/tile " << per_tile << " " << info.backend;
      }
    }
  }
  if (saved) setenv("MOLACCEL_ORBITAL_MATRIX", saved_value.c_str(), 1);
  else unsetenv("MOLACCEL_ORBITAL_MATRIX");
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
  const auto got = evaluate_orbitals(gpu_resources(true), wfn, grid, {parse_orbital("homo", wfn)}, options, &info);
  const auto expected = reference::evaluate_orbitals(wfn, grid, {parse_orbital("homo", wfn)}, 0);
  EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance);
  EXPECT_EQ(info.job.retries, 2u);
}

}  // namespace
}  // namespace molaccel::orbital

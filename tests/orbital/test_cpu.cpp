// Tier 2 for the CPU fast path: against the reference on random molecules and basis sets (every
// shell type, pure and Cartesian), odd grid sizes, planted edge cases; against Psi4's cubes; the
// density integral; every compiled SIMD variant.
#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

EvaluateOptions cpu_options() {
  EvaluateOptions o;
  o.backend = Backend::cpu;
  return o;
}

GridSpec small_grid(const Wavefunction& wfn, double spacing_angstrom = 0.37) {
  return automatic_grid(wfn, 2.0, spacing_angstrom);
}

// fp32 evaluation: each primitive term carries ~1e-6 relative error (fp32 r^2, exp to ~2e-7,
// products), and terms of a contracted function can be ~10x larger than the orbital value where
// contributions cancel; screening adds at most 1e-9 x coefficients. 2e-5 of the largest value
// bounds this with margin; an error in conventions or indexing is O(1).
constexpr double kFp32Tolerance = 2e-5;

TEST(OrbitalCpu, RandomBasisSetsMatchReference) {
  const auto resources = Resources::cpu(2);
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
    const auto wfn = test::random_wavefunction(seed, 1 + static_cast<int>(seed % 4), 3);
    const GridSpec grid = small_grid(wfn);
    std::vector<OrbitalRef> refs{{Spin::alpha, 0}, {Spin::alpha, 1}, {Spin::alpha, 2}};
    const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 2);
    const auto got = evaluate_orbitals(resources, wfn, grid, refs, cpu_options());
    EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance) << "seed " << seed;
    const auto rho_expected = reference::evaluate_density(wfn, grid, DensityKind::total, 2);
    const auto rho = evaluate_density(resources, wfn, grid, DensityKind::total, cpu_options());
    EXPECT_LT(test::relative_max_error(rho, rho_expected), kFp32Tolerance) << "seed " << seed;
  }
}

TEST(OrbitalCpu, EverySimdVariantMatchesReference) {
  const auto wfn = test::random_wavefunction(11, 3, 2);
  GridSpec grid = small_grid(wfn, 0.41);
  grid.counts[2] = 37;  // past two 16-lane blocks, odd remainder
  const std::vector<OrbitalRef> refs{{Spin::alpha, 0}, {Spin::alpha, 1}};
  const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 2);
  const auto basis = detail::pack_basis(wfn, 1e-9);
  const auto coefficients = detail::cartesian_coefficients(wfn, refs);
  std::vector<cpu::RowKernel> kernels{&cpu::isa_scalar::evaluate_rows};
  if (cpu_info().simd >= SimdLevel::avx2) kernels.push_back(&cpu::isa_avx2::evaluate_rows);
  if (cpu_info().simd >= SimdLevel::avx512) kernels.push_back(&cpu::isa_avx512::evaluate_rows);
  for (auto kernel : kernels) {
    std::vector<float> out(grid.point_count() * refs.size());
    cpu::KernelArgs args{&basis, coefficients.data(), refs.size(), nullptr, &grid, out.data()};
    kernel(args, 0, grid.counts[0] * grid.counts[1]);
    EXPECT_LT(test::relative_max_error(out, expected), kFp32Tolerance);
  }
}

TEST(OrbitalCpu, EdgeCases) {
  const auto resources = Resources::cpu(2);
  auto wfn = test::random_wavefunction(21, 2, 2);
  // One point exactly on a nucleus (r = 0: x^0 powers, no NaN), a single-point grid, a 1 x 1 x 17 row.
  GridSpec one;
  one.origin = wfn.atoms[0].position;
  one.axes = {{{0.1, 0, 0}, {0, 0.1, 0}, {0, 0, 0.1}}};
  one.counts = {1, 1, 1};
  const std::vector<OrbitalRef> refs{{Spin::alpha, 1}};
  auto expected = reference::evaluate_orbitals(wfn, one, refs, 1);
  auto got = evaluate_orbitals(resources, wfn, one, refs, cpu_options());
  EXPECT_NEAR(got[0], expected[0], kFp32Tolerance * std::max(1.0, std::abs(expected[0])));
  one.counts = {1, 1, 17};
  expected = reference::evaluate_orbitals(wfn, one, refs, 1);
  got = evaluate_orbitals(resources, wfn, one, refs, cpu_options());
  EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance);
  // Far from every atom: everything screened, exact zeros, no NaN.
  one.origin = {1e3, 1e3, 1e3};
  got = evaluate_orbitals(resources, wfn, one, refs, cpu_options());
  for (float v : got) EXPECT_EQ(v, 0.0f);
}

TEST(OrbitalCpu, NonOrthogonalGridMatchesReference) {
  const auto wfn = test::random_wavefunction(31, 2, 1);
  GridSpec grid;
  grid.origin = {-3, -3, -3};
  grid.axes = {{{0.31, 0.05, 0}, {0.02, 0.29, 0.04}, {0.03, -0.02, 0.33}}};
  grid.counts = {13, 11, 19};
  const std::vector<OrbitalRef> refs{{Spin::alpha, 0}};
  const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 2);
  const auto got = evaluate_orbitals(Resources::cpu(2), wfn, grid, refs, cpu_options());
  EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance);
}

TEST(OrbitalCpu, ThreonineMatchesPsi4Cubes) {
  const auto dir = molaccel::testing::shared_data_dir() / "orbital" / "threonine_631gs";
  if (!std::filesystem::exists(dir / "Psi_a_32_32-A.cube.gz")) GTEST_SKIP() << "shared data not present";
  const auto wfn = read_molden(test::bundled("threonine_631gs.molden"));
  const Cube homo = read_cube(dir / "Psi_a_32_32-A.cube.gz");
  const auto values = evaluate_orbitals(Resources::cpu(0), wfn, homo.grid, {parse_orbital("homo", wfn)}, cpu_options());
  EXPECT_LT(test::relative_max_error(values, homo.values), 1e-5);
  const Cube lumo = read_cube(dir / "Psi_a_33_33-A.cube.gz");
  const auto lumo_values = evaluate_orbitals(Resources::cpu(0), wfn, lumo.grid, {parse_orbital("lumo", wfn)}, cpu_options());
  EXPECT_LT(test::relative_max_error(lumo_values, lumo.values), 1e-5);
  const Cube dt = read_cube(dir / "Dt.cube.gz");
  const auto rho = evaluate_density(Resources::cpu(0), wfn, dt.grid, DensityKind::total, cpu_options());
  EXPECT_LT(test::relative_max_error(rho, dt.values), 1e-5);
}

TEST(OrbitalCpu, WaterDensityMatchesPsi4AndIntegratesToElectronCount) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const Cube psi4 = read_cube(test::bundled("h2o_Dt.cube.gz"));
  const auto resources = Resources::cpu(0);
  const auto rho = evaluate_density(resources, wfn, psi4.grid, DensityKind::total, cpu_options());
  EXPECT_LT(test::relative_max_error(rho, psi4.values), 1e-5);
  // Riemann sum on a 0.06 bohr grid with 6 bohr padding: the density's smooth part integrates to
  // far better than 1e-4; the oxygen 1s cusp (exponents up to 5484) is under-resolved and
  // contributes the remaining ~1e-3 relative error.
  const GridSpec fine = automatic_grid(wfn, 6.0 * bohr_in_angstrom, 0.06 * bohr_in_angstrom);
  const auto fine_rho = evaluate_density(resources, wfn, fine, DensityKind::total, cpu_options());
  double sum = 0;
  for (float v : fine_rho) sum += v;
  EXPECT_NEAR(sum * fine.voxel_volume(), wfn.electron_count(), 2e-3 * wfn.electron_count());
}

TEST(OrbitalCpu, FailingTilesAreNeverDropped) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 1.0, 0.3);
  EvaluateOptions options = cpu_options();
  options.planes_per_tile = 1;
  options.inject_fault = [](const WorkerInfo&, std::size_t tile, int) { return tile == 3; };
  // One CPU worker: the failed tile has nowhere else to go, so the job fails loudly.
  EXPECT_THROW((void)evaluate_orbitals(Resources::cpu(1), wfn, grid, {parse_orbital("homo", wfn)}, options), Error);
}

}  // namespace
}  // namespace molaccel::orbital

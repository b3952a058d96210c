// Tier 2 for the CPU fast path: against the reference on random molecules and basis sets (every
// shell type, pure and Cartesian), odd grid sizes, planted edge cases; against Psi4's cubes; the
// density integral; every compiled SIMD variant.
#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

#include <cfloat>
#include <cstring>

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

// The kernels used in this build on this machine (every compiled variant the CPU supports).
std::vector<std::pair<std::string, cpu::RowKernel>> kernels_here() {
  std::vector<std::pair<std::string, cpu::RowKernel>> kernels{{"scalar", &cpu::isa_scalar::evaluate_rows}};
  if (cpu_info().simd >= SimdLevel::avx2) kernels.push_back({"avx2", &cpu::isa_avx2::evaluate_rows});
  if (cpu_info().simd >= SimdLevel::avx512) kernels.push_back({"avx512", &cpu::isa_avx512::evaluate_rows});
  return kernels;
}

// Shells on one atom that share their exponents (as Pople sp shells do): the kernel evaluates one
// exp() per distinct exponent and atom and feeds every shell that uses it. The grid has row and
// column counts that are not multiples of the 4 x 4 tile, and the rows are evaluated in ranges that
// cut tiles: values are within the fp32 tolerance of the reference and bit for bit the same
// whatever the split (tiles are aligned to the grid, not to the range).
TEST(OrbitalCpu, SharedExponentsAndRowSplitsMatchReference) {
  Wavefunction wfn = test::random_wavefunction(41, 3, 0);
  const std::vector<double> e{5.1, 1.2, 0.31}, c{0.3, 0.5, 0.4};
  std::vector<Shell> shared{{0, 0, false, e, c},
                            {0, 1, false, e, {0.2, 0.6, 0.3}},
                            {0, 2, true, e, c},
                            {0, 1, false, {0.31}, {1.0}},
                            {0, 0, false, {0.31}, {1.0}}};
  wfn.shells.insert(wfn.shells.begin(), shared.begin(), shared.end());
  const int n = wfn.function_count();
  std::mt19937 rng(41);
  std::uniform_real_distribution<double> signed_unit(-1.0, 1.0);
  for (int o = 0; o < 3; ++o) {
    wfn.alpha.energies.push_back(-1.0 + 0.1 * o);
    wfn.alpha.occupations.push_back(2.0);
    wfn.alpha.symmetries.push_back("A");
    for (int f = 0; f < n; ++f)
      wfn.alpha.coefficients.push_back(signed_unit(rng) / std::sqrt(static_cast<double>(n)));
  }
  const auto basis = detail::pack_basis(wfn, 1e-9);
  // 11 primitives in the added shells, 3 distinct exponents (the random shells' are all distinct).
  EXPECT_EQ(basis.exponent.size() - basis.groups.size(), 8u);

  GridSpec grid;
  grid.origin = {-4.0, -3.9, -4.1};
  grid.axes = {{{0.43, 0, 0}, {0.01, 0.41, 0}, {0, 0.02, 0.39}}};
  grid.counts = {5, 19, 22};
  const std::size_t rows = grid.counts[0] * grid.counts[1], points = grid.point_count();
  const std::vector<OrbitalRef> refs{{Spin::alpha, 0}, {Spin::alpha, 1}, {Spin::alpha, 2}};
  const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 2);
  const std::vector<float> weights{2.0f, 1.0f, 0.5f};
  std::vector<double> rho_expected(points, 0.0);
  for (std::size_t o = 0; o < refs.size(); ++o)
    for (std::size_t p = 0; p < points; ++p)
      rho_expected[p] += weights[o] * expected[o * points + p] * expected[o * points + p];
  const std::vector<std::size_t> cuts{0, 1, 4, 11, 12, 19, 20, 38, 41, 70, rows};
  for (const auto& [name, kernel] : kernels_here()) {
    for (std::size_t n_orb : {std::size_t{1}, std::size_t{3}}) {
      for (bool density : {false, true}) {
        if (density && n_orb == 1) continue;
        const auto coefficients =
            detail::cartesian_coefficients(wfn, std::vector<OrbitalRef>(refs.begin(), refs.begin() + n_orb));
        const std::size_t size = density ? points : points * n_orb;
        std::vector<float> whole(size), split(size);
        cpu::KernelArgs args{&basis, coefficients.data(), n_orb, density ? weights.data() : nullptr,
                             &grid,  whole.data()};
        kernel(args, 0, rows);
        args.out = split.data();
        for (std::size_t c = 0; c + 1 < cuts.size(); ++c) kernel(args, cuts[c], cuts[c + 1]);
        EXPECT_EQ(std::memcmp(whole.data(), split.data(), size * sizeof(float)), 0)
            << name << " " << n_orb << " " << density;
        if (density) {
          EXPECT_LT(test::relative_max_error(whole, rho_expected), kFp32Tolerance) << name;
        } else {
          const std::vector<double> want(expected.begin(),
                                         expected.begin() + static_cast<std::ptrdiff_t>(size));
          EXPECT_LT(test::relative_max_error(whole, want), kFp32Tolerance) << name << " " << n_orb;
        }
      }
    }
  }
}

// The kernel's exp() on [-87.3, 0] against double exp: relative error below 2e-7 (degree-5 minimax
// polynomial, 7.5e-8 in exact arithmetic, plus fp32 rounding of the reduction and the Horner
// steps); below -87.3 the argument is clamped, so underflow returns a normal float, never a
// denormal or zero.
TEST(OrbitalCpu, ExpIsAccurateAndNeverDenormal) {
  std::vector<float> x;
  for (int i = 0; i <= 2000000; ++i) x.push_back(-87.3f * static_cast<float>(i) / 2000000.0f);
  for (float v : {0.0f, -0.0f, -1e-30f, -0.34657359f, -0.34657360f, -87.29f, -87.3f}) x.push_back(v);
  const std::vector<float> below{-87.31f, -88.0f, -103.9f, -1e4f, -1e30f, -INFINITY};
  using ExpFn = void (*)(const float*, float*, std::size_t);
  std::vector<ExpFn> fns{&cpu::isa_scalar::exp_nonpositive};
  if (cpu_info().simd >= SimdLevel::avx2) fns.push_back(&cpu::isa_avx2::exp_nonpositive);
  if (cpu_info().simd >= SimdLevel::avx512) fns.push_back(&cpu::isa_avx512::exp_nonpositive);
  for (ExpFn fn : fns) {
    std::vector<float> y(x.size());
    fn(x.data(), y.data(), x.size());
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      worst = std::max(worst, std::abs(y[i] - want) / want);
    }
    EXPECT_LT(worst, 2e-7);
    std::vector<float> yb(below.size());
    fn(below.data(), yb.data(), below.size());
    for (float v : yb) {
      EXPECT_GE(v, FLT_MIN);
      EXPECT_LT(v, 1.3e-38f);
    }
  }
}

// --screening 0: every cutoff is FLT_MAX, so every atom, shell and primitive is within reach.
TEST(OrbitalCpu, ScreeningOffMatchesReference) {
  const auto wfn = test::random_wavefunction(51, 3, 2);
  const GridSpec grid = small_grid(wfn, 0.45);
  const std::vector<OrbitalRef> refs{{Spin::alpha, 0}, {Spin::alpha, 1}};
  EvaluateOptions options = cpu_options();
  options.screening_tolerance = 0;
  const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 2);
  EXPECT_LT(
      test::relative_max_error(evaluate_orbitals(Resources::cpu(2), wfn, grid, refs, options), expected),
      kFp32Tolerance);
  EXPECT_LT(test::relative_max_error(
                evaluate_orbitals(Resources::cpu(2), wfn, grid, {refs[0]}, options),
                std::vector<double>(expected.begin(),
                                    expected.begin() + static_cast<std::ptrdiff_t>(grid.point_count()))),
            kFp32Tolerance);
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
  const auto values =
      evaluate_orbitals(Resources::cpu(0), wfn, homo.grid, {parse_orbital("homo", wfn)}, cpu_options());
  EXPECT_LT(test::relative_max_error(values, homo.values), 1e-5);
  const Cube lumo = read_cube(dir / "Psi_a_33_33-A.cube.gz");
  const auto lumo_values =
      evaluate_orbitals(Resources::cpu(0), wfn, lumo.grid, {parse_orbital("lumo", wfn)}, cpu_options());
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
  EXPECT_THROW((void)evaluate_orbitals(Resources::cpu(1), wfn, grid, {parse_orbital("homo", wfn)}, options),
               Error);
}

}  // namespace
}  // namespace molaccel::orbital

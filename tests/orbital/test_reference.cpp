// Tier 1: the reference on hand-checkable cases; then the reference against Psi4's cubes for the
// same wavefunctions (an independent program), and the density integral.
#include <numbers>

#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

Wavefunction one_shell(int l, bool pure, std::vector<double> exponents, std::vector<double> coefficients) {
  Wavefunction wfn;
  wfn.source = "test";
  wfn.atoms.push_back({1, "H", {0, 0, 0}, 1});
  Shell shell;
  shell.l = l;
  shell.pure = pure;
  shell.exponents = std::move(exponents);
  shell.coefficients = std::move(coefficients);
  wfn.shells.push_back(shell);
  return wfn;
}

TEST(OrbitalReference, SinglePrimitiveS) {
  const double a = 0.7;
  const auto wfn = one_shell(0, false, {a}, {1.0});
  const auto v = reference::basis_values(wfn, {0.3, -0.2, 0.5});
  const double r2 = 0.09 + 0.04 + 0.25;
  EXPECT_NEAR(v[0], std::pow(2 * a / std::numbers::pi, 0.75) * std::exp(-a * r2), 1e-14);
}

TEST(OrbitalReference, PFunctionIsNormalisedX) {
  const double a = 1.3;
  const auto wfn = one_shell(1, false, {a}, {0.5});  // contraction scale must not matter
  const auto v = reference::basis_values(wfn, {0.4, 0.1, -0.3});
  const double n = std::pow(2 * a / std::numbers::pi, 0.75) * 2 * std::sqrt(a);
  const double e = std::exp(-a * (0.16 + 0.01 + 0.09));
  EXPECT_NEAR(v[0], n * 0.4 * e, 1e-13);
  EXPECT_NEAR(v[1], n * 0.1 * e, 1e-13);
  EXPECT_NEAR(v[2], n * -0.3 * e, 1e-13);
}

TEST(OrbitalReference, PureDMatchesCartesianCombinations) {
  // d0 = (2zz - xx - yy) / 2 in units of the xx-normalised function; d+2 = sqrt(3)/2 (xx - yy);
  // d-2 = sqrt(3) xy with xy normalised like xx: all with unit norm.
  const double a = 0.9;
  const auto pure = one_shell(2, true, {a}, {1.0});
  const auto cart = one_shell(2, false, {a}, {1.0});
  const std::array<double, 3> p{0.3, -0.7, 0.45};
  const auto s = reference::basis_values(pure, p);
  const auto c = reference::basis_values(cart, p);  // xx yy zz xy xz yz, each unit-normalised
  const double xy_as_xx = c[3] / std::sqrt(3.0);    // xy normalised has sqrt(3) larger norm factor
  EXPECT_NEAR(s[0], (2 * c[2] - c[0] - c[1]) / 2, 1e-13);
  EXPECT_NEAR(s[3], std::sqrt(3.0) / 2 * (c[0] - c[1]), 1e-13);
  EXPECT_NEAR(s[4], std::sqrt(3.0) * xy_as_xx, 1e-13);
  EXPECT_NEAR(s[1], c[4], 1e-13);  // d+1 = xz
  EXPECT_NEAR(s[2], c[5], 1e-13);  // d-1 = yz
}

// Psi4 1.3.2 cubes of the same SCF wavefunction. Psi4 writes 6 significant digits (relative
// rounding 5e-6 of each value), so agreement within 1e-5 of the largest value checks the basis
// conventions (normalisation, ordering, signs of d and f functions) exactly.
void compare_with_psi4_orbital(const std::string& molden, const std::string& cube, int orbital) {
  const auto wfn = read_molden(test::bundled(molden));
  const Cube psi4 = read_cube(test::bundled(cube));
  const auto values =
      reference::evaluate_orbitals(wfn, psi4.grid, {{Spin::alpha, static_cast<std::size_t>(orbital - 1)}});
  // The overall sign of an orbital is arbitrary; Psi4 writes the molden and the cube from the
  // same coefficients, so they agree without a flip.
  EXPECT_LT(test::relative_max_error(values, psi4.values), 1e-5) << cube;
}

TEST(OrbitalReference, WaterHomoAndLumoMatchPsi4) {
  compare_with_psi4_orbital("h2o_631gs.molden", "h2o_Psi_a_5_5-A.cube.gz", 5);
  compare_with_psi4_orbital("h2o_631gs.molden", "h2o_Psi_a_6_6-A.cube.gz", 6);
}

TEST(OrbitalReference, NitrogenFShellsMatchPsi4) {
  compare_with_psi4_orbital("n2_ccpvtz.molden", "n2_Psi_a_7_7-A.cube.gz", 7);
}

TEST(OrbitalReference, DensityMatchesPsi4) {
  const auto wfn = read_molden(test::bundled("h2o_631gs.molden"));
  const Cube psi4 = read_cube(test::bundled("h2o_Dt.cube.gz"));
  const auto rho = reference::evaluate_density(wfn, psi4.grid, DensityKind::total);
  EXPECT_LT(test::relative_max_error(rho, psi4.values), 1e-5);
}

}  // namespace
}  // namespace molaccel::orbital

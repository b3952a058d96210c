// Basis functions as Cartesian expansions: every function of a shell is
//   chi_f(r) = sum_c weight[f][c] * x^i y^j z^k * R(r),  R(r) = sum_p radial[p] exp(-alpha_p r^2),
// with (i, j, k) over the shell's Cartesian components in Molden order and the weights chosen so
// that every chi_f has unit self-overlap. The overlap matrix, the normalisation check and the fast
// backends (cpu, cuda) build on this; the reference backend deliberately does not.
#pragma once

#include <array>
#include <vector>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital::detail {

struct CartesianPower {
  int x = 0, y = 0, z = 0;
};

// The powers (x, y, z) of the Cartesian components of angular momentum l = 0..6, our order: Molden's
// for s..g; for h and i (which the Molden format does not define) Gaussian's order, x power
// ascending, then y (zzzzz yzzzz yyzzz ... xxxxy xxxxx), as Gaussian writes them in fchk files and
// as Molden2AIM and Multiwfn read Molden files. One table for the run-time view below and for
// kernels that need the powers at compile time.
// clang-format off
inline constexpr int kCartesianPowers[max_angular_momentum + 1][28][3] = {
    {{0, 0, 0}},
    {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}},
    {{2, 0, 0}, {0, 2, 0}, {0, 0, 2}, {1, 1, 0}, {1, 0, 1}, {0, 1, 1}},
    {{3, 0, 0}, {0, 3, 0}, {0, 0, 3}, {1, 2, 0}, {2, 1, 0}, {2, 0, 1}, {1, 0, 2}, {0, 1, 2}, {0, 2, 1},
     {1, 1, 1}},
    {{4, 0, 0}, {0, 4, 0}, {0, 0, 4}, {3, 1, 0}, {3, 0, 1}, {1, 3, 0}, {0, 3, 1}, {1, 0, 3}, {0, 1, 3},
     {2, 2, 0}, {2, 0, 2}, {0, 2, 2}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}},
    {{0, 0, 5}, {0, 1, 4}, {0, 2, 3}, {0, 3, 2}, {0, 4, 1}, {0, 5, 0}, {1, 0, 4}, {1, 1, 3}, {1, 2, 2},
     {1, 3, 1}, {1, 4, 0}, {2, 0, 3}, {2, 1, 2}, {2, 2, 1}, {2, 3, 0}, {3, 0, 2}, {3, 1, 1}, {3, 2, 0},
     {4, 0, 1}, {4, 1, 0}, {5, 0, 0}},
    {{0, 0, 6}, {0, 1, 5}, {0, 2, 4}, {0, 3, 3}, {0, 4, 2}, {0, 5, 1}, {0, 6, 0}, {1, 0, 5}, {1, 1, 4},
     {1, 2, 3}, {1, 3, 2}, {1, 4, 1}, {1, 5, 0}, {2, 0, 4}, {2, 1, 3}, {2, 2, 2}, {2, 3, 1}, {2, 4, 0},
     {3, 0, 3}, {3, 1, 2}, {3, 2, 1}, {3, 3, 0}, {4, 0, 2}, {4, 1, 1}, {4, 2, 0}, {5, 0, 1}, {5, 1, 0},
     {6, 0, 0}},
};
// clang-format on

// Cartesian components of angular momentum l, in the order of kCartesianPowers.
const std::vector<CartesianPower>& cartesian_powers(int l);
inline int cartesian_count(int l) {
  return (l + 1) * (l + 2) / 2;
}

// Expansion of the real solid harmonic S_lm (m in Molden order 0, +1, -1, +2, -2, ...) in the
// Cartesian monomials of cartesian_powers(l): row per m, column per component (unnormalised).
std::vector<double> solid_harmonic_expansion(int l);

// Normalisation constant of the primitive x^l exp(-alpha r^2).
double axis_primitive_norm(double alpha, int l);
// (2n-1)!! with (-1)!! = 1.
double double_factorial_odd(int n);

struct ExpandedShell {
  int atom = 0;
  int l = 0;
  std::array<double, 3> center{};
  std::vector<double> alpha;
  std::vector<double> radial;  // contraction coefficient times the primitive's norm
  int functions = 0;
  int components = 0;
  std::vector<double> weight;  // functions x components, unit-normalised functions
};

std::vector<ExpandedShell> expand_shells(const Wavefunction& wavefunction);

// Overlap block <chi_f(a) | chi_g(b)>, row-major a.functions x b.functions.
std::vector<double> shell_overlap(const ExpandedShell& a, const ExpandedShell& b);

}  // namespace molaccel::orbital::detail

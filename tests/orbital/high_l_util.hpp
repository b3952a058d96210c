// Shared by the h and i shell tests (CPU and GPU): a molecule with every shell type up to i and
// orthonormal orbitals for it.
#pragma once

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital::test {

// A molecule with every l from 0 to 6 (h and i on two of its three atoms); shells of l >= 2 all
// pure or all Cartesian, as Molden files have them.
inline Wavefunction high_l_basis(bool pure) {
  Wavefunction wfn;
  wfn.source = "high-l";
  wfn.format = "test";
  const std::array<std::array<double, 3>, 3> positions{
      {{0.1, -0.2, 0.3}, {1.9, 0.4, -0.6}, {-0.8, 1.7, 0.9}}};
  for (std::size_t a = 0; a < positions.size(); ++a)
    wfn.atoms.push_back({26 - 18 * static_cast<int>(a % 2), a % 2 ? "O" : "Fe", positions[a], 26.0});
  auto add = [&](int atom, int l, std::vector<double> e, std::vector<double> c) {
    wfn.shells.push_back({atom, l, pure && l >= 2, std::move(e), std::move(c)});
  };
  add(0, 0, {4.1, 0.9}, {0.4, 0.7});
  add(0, 1, {2.2, 0.5}, {0.5, 0.6});
  add(0, 2, {1.4}, {1.0});
  add(0, 5, {1.1, 0.45}, {0.6, 0.5});
  add(0, 6, {0.95}, {1.0});
  add(1, 0, {3.0}, {1.0});
  add(1, 3, {0.8, 0.3}, {0.7, 0.4});
  add(1, 4, {0.9}, {1.0});
  add(2, 1, {1.3}, {1.0});
  add(2, 5, {0.7}, {1.0});
  add(2, 6, {1.2, 0.5}, {0.3, 0.8});
  return wfn;
}

// `orbitals` random orbitals made orthonormal in the overlap metric (Gram-Schmidt, twice), so the
// normalisation check accepts the wavefunction as it is.
inline void add_orthonormal_orbitals(Wavefunction& wfn, int orbitals, std::uint32_t seed) {
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  const std::vector<double> s = overlap_matrix(wfn);
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> c, sc;
  for (int o = 0; o < orbitals; ++o) {
    std::vector<double> v(n), sv(n, 0.0);
    for (double& x : v) x = normal(rng);
    for (int pass = 0; pass < 2; ++pass)
      for (int q = 0; q < o; ++q) {
        double dot = 0;
        for (std::size_t f = 0; f < n; ++f) dot += v[f] * sc[q * n + f];
        for (std::size_t f = 0; f < n; ++f) v[f] -= dot * c[q * n + f];
      }
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) sv[i] += s[i * n + j] * v[j];
    double norm2 = 0;
    for (std::size_t f = 0; f < n; ++f) norm2 += v[f] * sv[f];
    for (std::size_t f = 0; f < n; ++f) {
      c.push_back(v[f] / std::sqrt(norm2));
      sc.push_back(sv[f] / std::sqrt(norm2));
    }
    wfn.alpha.energies.push_back(-1.0 + 0.1 * o);
    wfn.alpha.occupations.push_back(o < orbitals / 2 ? 2.0 : 0.0);
    wfn.alpha.symmetries.push_back("A");
  }
  wfn.alpha.coefficients = c;
}

}  // namespace molaccel::orbital::test

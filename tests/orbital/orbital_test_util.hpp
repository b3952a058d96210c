// Helpers shared by the orbital tests: bundled files, cube comparison, random wavefunctions.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "molaccel/orbital.hpp"
#include "testing/testing.hpp"

namespace molaccel::orbital::test {

inline std::filesystem::path bundled(const std::string& name) {
  return molaccel::testing::data_dir() / "orbital" / name;
}

// max |a - b| / max |b|.
template <class A, class B>
double relative_max_error(const std::vector<A>& a, const std::vector<B>& b) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? worst / scale : worst;
}

// A random molecule with a random basis: every l in 0..4, pure and Cartesian shells, 1-4
// primitives, and an orthonormal-ish random coefficient set (values only need to be reproducible,
// not orthonormal, so the normalisation check is off).
inline Wavefunction random_wavefunction(std::uint32_t seed, int atoms, int orbitals, bool include_g = true) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coord(-2.5, 2.5), unit(0.0, 1.0), signed_unit(-1.0, 1.0);
  Wavefunction wfn;
  wfn.source = "random-" + std::to_string(seed);
  wfn.format = "test";
  for (int a = 0; a < atoms; ++a) {
    Atom atom;
    atom.atomic_number = 1 + static_cast<int>(rng() % 9);
    atom.charge = atom.atomic_number;
    atom.label = "X";
    atom.position = {coord(rng), coord(rng), coord(rng)};
    wfn.atoms.push_back(atom);
    const int shells = 1 + static_cast<int>(rng() % 4);
    for (int s = 0; s < shells; ++s) {
      Shell shell;
      shell.atom = a;
      shell.l = static_cast<int>(rng() % (include_g ? 5 : 4));
      shell.pure = shell.l >= 2 && (rng() % 2 == 0);
      const int prims = 1 + static_cast<int>(rng() % 4);
      for (int p = 0; p < prims; ++p) {
        shell.exponents.push_back(0.08 * std::pow(40.0, unit(rng)) * (p + 1));
        shell.coefficients.push_back(0.2 + unit(rng));
      }
      wfn.shells.push_back(shell);
    }
  }
  const int n = wfn.function_count();
  for (int o = 0; o < orbitals; ++o) {
    wfn.alpha.energies.push_back(-1.0 + 0.1 * o);
    wfn.alpha.occupations.push_back(o < orbitals / 2 ? 2.0 : 0.0);
    wfn.alpha.symmetries.push_back("A");
    for (int f = 0; f < n; ++f)
      wfn.alpha.coefficients.push_back(signed_unit(rng) / std::sqrt(static_cast<double>(n)));
  }
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

// A random wavefunction whose orbitals are orthonormal (Gram-Schmidt in the overlap metric), so
// the normalisation check accepts it; shells at l >= 2 all pure or all Cartesian.
inline Wavefunction orthonormal_random_wavefunction(std::uint32_t seed, int atoms, int orbitals,
                                                    bool pure = true) {
  Wavefunction wfn = random_wavefunction(seed, atoms, 0);
  // Always at least one g and one f shell (keeping shells grouped by atom, as files have them).
  wfn.shells.insert(wfn.shells.begin(), Shell{0, 4, false, {0.9}, {1.0}});
  wfn.shells.push_back({atoms - 1, 3, false, {1.3, 0.4}, {0.6, 0.5}});
  for (Shell& s : wfn.shells) s.pure = pure && s.l >= 2;
  add_orthonormal_orbitals(wfn, orbitals, seed);
  return wfn;
}

}  // namespace molaccel::orbital::test

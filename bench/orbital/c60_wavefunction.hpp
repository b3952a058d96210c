// C60 with 6-31G* (Cartesian d: 900 basis functions) and generated orthonormal MO coefficients: the
// wavefunction of the seed's benchmark, shared by the orbital benchmarks. The 6-31G* carbon basis
// is typed in (Hehre, Ditchfield, Pople 1972; d exponent 0.8, Hariharan and Pople 1973); the
// coefficients are random vectors orthonormalised in the overlap metric (fixed seed), all doubly
// occupied: the grid work depends on the basis and the geometry, not on the values.
#pragma once

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital::bench_data {

inline Wavefunction c60_631gs(std::size_t orbitals) {
  Wavefunction wfn;
  wfn.source = "C60 6-31G* (generated coefficients)";
  std::ifstream in(std::string(MOLACCEL_SOURCE_DIR) + "/data/orbital/c60_geometry_bohr.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Atom atom;
    int number = 0;
    fields >> atom.label >> number >> atom.atomic_number >> atom.position[0] >> atom.position[1] >>
        atom.position[2];
    atom.charge = atom.atomic_number;
    wfn.atoms.push_back(atom);
  }
  if (wfn.atoms.size() != 60)
    throw Error("bench: data/orbital/c60_geometry_bohr.txt not found or incomplete");
  const std::vector<double> s_exp{3047.5249, 457.36951, 103.94869, 29.210155, 9.2866630, 3.1639270};
  const std::vector<double> s_coef{0.0018347, 0.0140373, 0.0688426, 0.2321844, 0.4679413, 0.3623120};
  const std::vector<double> sp_exp{7.8682724, 1.8812885, 0.5442493};
  const std::vector<double> sp_s{-0.1193324, -0.1608542, 1.1434564};
  const std::vector<double> sp_p{0.0689991, 0.3164240, 0.7443083};
  for (int a = 0; a < 60; ++a) {
    wfn.shells.push_back({a, 0, false, s_exp, s_coef});
    wfn.shells.push_back({a, 0, false, sp_exp, sp_s});
    wfn.shells.push_back({a, 1, false, sp_exp, sp_p});
    wfn.shells.push_back({a, 0, false, {0.1687144}, {1.0}});
    wfn.shells.push_back({a, 1, false, {0.1687144}, {1.0}});
    wfn.shells.push_back({a, 2, false, {0.8}, {1.0}});
  }
  // Random vectors, Gram-Schmidt in the S metric.
  const std::vector<double> s = overlap_matrix(wfn);
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  std::mt19937_64 rng(60);
  std::normal_distribution<double> normal;
  std::vector<double> c(orbitals * n), sc(orbitals * n);
  for (std::size_t o = 0; o < orbitals; ++o) {
    double* v = &c[o * n];
    for (std::size_t f = 0; f < n; ++f) v[f] = normal(rng);
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t q = 0; q < o; ++q) {
        double dot = 0;
        for (std::size_t f = 0; f < n; ++f) dot += v[f] * sc[q * n + f];
        for (std::size_t f = 0; f < n; ++f) v[f] -= dot * c[q * n + f];
      }
    double* sv = &sc[o * n];
    for (std::size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (std::size_t j = 0; j < n; ++j) sum += s[i * n + j] * v[j];
      sv[i] = sum;
    }
    double norm2 = 0;
    for (std::size_t f = 0; f < n; ++f) norm2 += v[f] * sv[f];
    const double scale = 1.0 / std::sqrt(norm2);
    for (std::size_t f = 0; f < n; ++f) {
      v[f] *= scale;
      sv[f] *= scale;
    }
  }
  wfn.alpha.coefficients = c;
  for (std::size_t o = 0; o < orbitals; ++o) {
    wfn.alpha.energies.push_back(-1.0 + 0.005 * static_cast<double>(o));
    wfn.alpha.occupations.push_back(2.0);
    wfn.alpha.symmetries.push_back("A");
  }
  return wfn;
}

}  // namespace molaccel::orbital::bench_data

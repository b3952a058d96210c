// Shared by the h and i shell tests (CPU and GPU): a molecule with every shell type up to i and
// orthonormal orbitals for it.
#pragma once

#include <array>
#include <vector>

#include "molaccel/orbital.hpp"
#include "orbital_test_util.hpp"

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

}  // namespace molaccel::orbital::test

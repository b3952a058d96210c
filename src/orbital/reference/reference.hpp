// The oracle: double precision, primitive by primitive, no screening, and no code shared with the
// fast backends (its own primitive norms, its own spherical harmonics via Legendre recursion).
#pragma once

#include <array>
#include <vector>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital::reference {

// Values of every basis function at one point (bohr), in basis order.
std::vector<double> basis_values(const Wavefunction& wfn, const std::array<double, 3>& point);

// Orbital values on the grid: result[o * points + p]. Threads: 0 = all cores.
std::vector<double> evaluate_orbitals(const Wavefunction& wfn, const GridSpec& grid,
                                      const std::vector<OrbitalRef>& orbitals, int threads = 0);

std::vector<double> evaluate_density(const Wavefunction& wfn, const GridSpec& grid, DensityKind kind,
                                     int threads = 0);

}  // namespace molaccel::orbital::reference

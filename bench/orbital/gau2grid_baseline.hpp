// The CPU baseline of issue 6: one orbital on a grid through gau2grid (Debian libgg-dev), shared
// by bench_orbital_c60 and bench_orbital_cpu. gau2grid evaluates every shell's collocation (Molden
// Cartesian order) for blocks of points, in double precision and without screening, as its API
// offers; the orbital is the dot product with the same folded Cartesian coefficients.
#pragma once

#if MOLACCEL_HAVE_GAU2GRID
#include <gau2grid/gau2grid.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "molaccel/orbital.hpp"
#include "orbital/basis_functions.hpp"
#include "orbital/packed_basis.hpp"

namespace molaccel::orbital::bench_data {

// psi[p] for every point p of `grid` (row-major), `coefficients` per Cartesian component.
inline void gau2grid_orbital(const detail::PackedBasis& basis, const float* coefficients,
                             const GridSpec& grid, double* psi) {
  constexpr std::size_t kBlock = 256;
  const std::size_t points = grid.point_count();
  std::vector<double> xyz(3 * kBlock), phi(15 * kBlock), acc(kBlock);
  for (std::size_t start = 0; start < points; start += kBlock) {
    const std::size_t n = std::min(kBlock, points - start);
    for (std::size_t q = 0; q < n; ++q) {
      const std::size_t p = start + q;
      const std::size_t i = p / (grid.counts[1] * grid.counts[2]), j = (p / grid.counts[2]) % grid.counts[1],
                        k = p % grid.counts[2];
      for (int d = 0; d < 3; ++d)
        xyz[3 * q + d] = grid.origin[d] + i * grid.axes[0][d] + j * grid.axes[1][d] + k * grid.axes[2][d];
    }
    std::fill(acc.begin(), acc.begin() + n, 0.0);
    for (std::size_t a = 0; a < basis.atom_count(); ++a) {
      const double center[3] = {basis.atom_xyz[3 * a], basis.atom_xyz[3 * a + 1], basis.atom_xyz[3 * a + 2]};
      for (int sh = basis.atom_first_shell[a]; sh < basis.atom_first_shell[a + 1]; ++sh) {
        const auto& shell = basis.shells[static_cast<std::size_t>(sh)];
        double exps[8], coefs[8];
        for (int q = 0; q < shell.primitive_count; ++q) {
          exps[q] = basis.exponent[static_cast<std::size_t>(shell.first_primitive + q)];
          coefs[q] = basis.coefficient[static_cast<std::size_t>(shell.first_primitive + q)];
        }
        gg_collocation(shell.l, n, xyz.data(), 3, shell.primitive_count, coefs, exps, center,
                       GG_CARTESIAN_MOLDEN, phi.data());
        const int nc = detail::cartesian_count(shell.l);
        for (int c = 0; c < nc; ++c) {
          const double w = coefficients[static_cast<std::size_t>(shell.first_component + c)];
          for (std::size_t q = 0; q < n; ++q) acc[q] += w * phi[c * n + q];
        }
      }
    }
    std::copy(acc.begin(), acc.begin() + n, psi + start);
  }
}

}  // namespace molaccel::orbital::bench_data
#endif

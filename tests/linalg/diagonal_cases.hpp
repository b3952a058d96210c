// Matrices for the diagonal storage (src/linalg/diagonal.hpp) tests, CPU and GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg::testing {

// A random matrix on the given diagonals (offsets increasing, 0 among them): each off-diagonal
// entry inside the matrix is left out with probability `holes` (holes in the band, which the
// diagonal storage pads with NaN), stored as an explicit +0 or -0 with probability 0.05 each,
// else uniform in [-1, 1]; the diagonal is 1 + the row's sum of |off-diagonal| (strictly
// diagonally dominant, so both solvers converge), with a random sign flip of the
// off-diagonals making it nonsymmetric.
inline HostCsr<double> random_banded(std::size_t n, const std::vector<int>& offsets, double holes,
                                     std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), p(0.0, 1.0);
  HostCsr<double> a;
  a.rows = a.cols = n;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::pair<std::int32_t, double>> row;
    double off_sum = 0;
    for (int off : offsets) {
      const long long j = (long long)i + off;
      if (j < 0 || j >= (long long)n) continue;
      if (off == 0) {
        row.push_back({std::int32_t(j), 0.0});
        continue;
      }
      const double q = p(rng);
      if (q < holes) continue;
      const double v = q < holes + 0.05 ? 0.0 : q < holes + 0.1 ? -0.0 : u(rng);
      off_sum += std::abs(v);
      row.push_back({std::int32_t(j), v});
    }
    for (auto& [j, v] : row) {
      if (std::size_t(j) == i) v = 1.0 + off_sum;
      a.col_idx.push_back(j);
      a.values.push_back(v);
    }
    a.row_ptr.push_back(std::int32_t(a.col_idx.size()));
  }
  return a;
}

// A random stencil on a height x width grid (row = i * width + j): row (i, j) couples to the
// cells (i + a, j + b) of `stencil` that lie in the grid (none across the grid's edges, so the
// matrix is a grid in diagonal_grid_of's sense), with holes, +-0 and the diagonal as in
// random_banded. `stencil` holds (a, b) pairs; (0, 0) must be among them.
inline HostCsr<double> random_stencil(int height, int width, const std::vector<std::pair<int, int>>& stencil,
                                      double holes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), p(0.0, 1.0);
  HostCsr<double> a;
  a.rows = a.cols = std::size_t(height) * std::size_t(width);
  for (int i = 0; i < height; ++i)
    for (int j = 0; j < width; ++j) {
      std::vector<std::pair<std::int32_t, double>> row;
      double off_sum = 0;
      for (auto [da, db] : stencil) {
        if (i + da < 0 || i + da >= height || j + db < 0 || j + db >= width) continue;
        const auto col = std::int32_t((i + da) * width + j + db);
        if (da == 0 && db == 0) {
          row.push_back({col, 0.0});
          continue;
        }
        const double q = p(rng);
        if (q < holes) continue;
        const double v = q < holes + 0.05 ? 0.0 : q < holes + 0.1 ? -0.0 : u(rng);
        off_sum += std::abs(v);
        row.push_back({col, v});
      }
      std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (auto& [col, v] : row) {
        if (col == std::int32_t(i * width + j)) v = 1.0 + off_sum;
        a.col_idx.push_back(col);
        a.values.push_back(v);
      }
      a.row_ptr.push_back(std::int32_t(a.col_idx.size()));
    }
  return a;
}

// A constant stencil on a height x width grid: row (i, j) holds value v at cell (i + a, j + b)
// for each {a, b, v} of `stencil` whose cell lies in the grid (sorted by column), so every
// diagonal is one value (diagonal_constant_of).
struct StencilTerm {
  int a, b;
  double v;
};
inline HostCsr<double> constant_stencil(int height, int width, const std::vector<StencilTerm>& stencil) {
  HostCsr<double> m;
  m.rows = m.cols = std::size_t(height) * std::size_t(width);
  for (int i = 0; i < height; ++i)
    for (int j = 0; j < width; ++j) {
      std::vector<std::pair<std::int32_t, double>> row;
      for (const auto& t : stencil)
        if (i + t.a >= 0 && i + t.a < height && j + t.b >= 0 && j + t.b < width)
          row.push_back({std::int32_t((i + t.a) * width + j + t.b), t.v});
      std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [col, v] : row) {
        m.col_idx.push_back(col);
        m.values.push_back(v);
      }
      m.row_ptr.push_back(std::int32_t(m.col_idx.size()));
    }
  return m;
}

// A random sparse matrix with no band structure (columns anywhere): never stored by diagonals.
inline HostCsr<double> random_scattered(std::size_t n, int per_row, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> col(0, n - 1);
  HostCsr<double> a;
  a.rows = a.cols = n;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> cols{std::int32_t(i)};
    for (int k = 0; k < per_row; ++k) cols.push_back(std::int32_t(col(rng)));
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    for (auto j : cols) {
      a.col_idx.push_back(j);
      a.values.push_back(std::size_t(j) == i ? 2.0 * per_row + 1.0 : -1.0);
    }
    a.row_ptr.push_back(std::int32_t(a.col_idx.size()));
  }
  return a;
}

}  // namespace molaccel::linalg::testing

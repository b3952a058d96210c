// Diagonal storage of a sparse matrix whose nonzeros lie on a few constant diagonals (every
// stencil and structured-grid matrix, the 2-D Poisson one included): per diagonal offset j - i,
// one value per row, so a product reads no column indices and no row pointers (fp64, 5
// diagonals: 40 B per row instead of 64 B). Used by the generated program kernels
// (docs/linalg.md).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

inline constexpr int diagonal_max_count = 8;      // distinct offsets j - i at most
inline constexpr double diagonal_max_fill = 1.3;  // stored entries (count x rows) <= 1.3 x nnz

struct DiagonalLayout {
  std::vector<int> offsets;    // increasing (so a row's entries come in increasing column order)
  std::vector<double> values;  // offsets.size() x rows, diagonal-major: values[k * rows + i] = a(i, i +
                               // offsets[k]); a quiet NaN where the CSR row has no such entry (outside the
                               // matrix or a hole in the band): the kernel skips those entries
};

// The diagonal layout of `a`, or nothing when the matrix does not qualify: not square, a row
// whose columns are not strictly increasing (unsorted or duplicated: the CSR order would not be
// the increasing-offset order, so the sums would differ), a NaN value (NaN marks the padding),
// more than diagonal_max_count distinct offsets, or more than max_fill x nnz stored entries.
// A product over the layout that adds, row by row, value x entry for the non-NaN values in
// increasing offset order performs exactly the CSR row's operations in the CSR order, so it is
// bit-for-bit the CSR product (padding never enters a sum: no 0 x Inf = NaN, no +0 for -0).
std::optional<DiagonalLayout> diagonal_storage(const HostCsr<double>& a, double max_fill = diagonal_max_fill);

// A diagonal layout that is a stencil on a 2-D grid: rows = height x width, row = i * width + j,
// every offset a * width + b with |b| <= diagonal_grid_max_reach, and no entry that crosses the
// edge of a grid row (no entry of row (i, j) at offset (a, b) with j + b outside [0, width)).
// Then each entry of row (i, j) is the grid cell (i + a, j + b), so a partition of the grid into
// 2-D tiles has a halo of a few cells around each tile instead of whole grid rows (the
// tile form of the generated kernels, docs/linalg.md). The 2-D Poisson matrix is one (width N).
inline constexpr int diagonal_grid_max_reach = 3;
struct DiagonalGrid {
  int width = 0, height = 0;
  std::vector<int> a, b;  // per offset of the layout: offsets[k] = a[k] * width + b[k]
};
// The grid of `d` (n rows), or nothing. Widths tried: |offset| - reach .. |offset| + reach for
// the offsets with |offset| > reach, wider than 2 x reach, dividing n with a height of at least 2; of those
// that qualify, the one with the smallest largest |b|, then the widest.
std::optional<DiagonalGrid> diagonal_grid_of(const DiagonalLayout& d, std::size_t n);

// The coefficients of a constant stencil: per diagonal k one finite value c[k] that every row
// (i, j) of the grid holds at offset k exactly (bit for bit) when the cell (i + a[k], j + b[k]) is
// inside the grid, and no entry (NaN) when it is outside; else nothing (a varying value, a hole
// inside the grid, an infinite value). The 2-D Poisson matrix is one ({-1, -1, 4, -1, -1}). Then
// row (i, j) times x is sum_k c[k] x(i + a[k], j + b[k]) with x = 0 outside the grid: the same
// terms in the same order as the layout's product, plus +-0 for the missing entries (which
// never changes a sum that starts at +0), so the tile form reads no matrix values.
std::optional<std::vector<double>> diagonal_constant_of(const DiagonalLayout& d, const DiagonalGrid& g,
                                                        std::size_t n);

}  // namespace molaccel::linalg

// Diagonal storage of a sparse matrix whose nonzeros lie on a few constant diagonals (every
// stencil and structured-grid matrix, the 2-D Poisson one included): per diagonal offset j - i,
// one value per row, so a product reads no column indices and no row pointers (fp64, 5
// diagonals: 40 B per row instead of 64 B). Used by the fused BiCGStab kernel
// (solver_options::fused_matrix, docs/linalg.md).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

inline constexpr int diagonal_max_count = 8;     // distinct offsets j - i at most
inline constexpr double diagonal_max_fill = 1.3;  // stored entries (count x rows) <= 1.3 x nnz

struct diagonal_layout {
  std::vector<int> offsets;    // increasing (so a row's entries come in increasing column order)
  std::vector<double> values;  // offsets.size() x rows, diagonal-major: values[k * rows + i] = a(i, i + offsets[k]);
                               // a quiet NaN where the CSR row has no such entry (outside the
                               // matrix or a hole in the band): the kernel skips those entries
};

// The diagonal layout of `a`, or nothing when the matrix does not qualify: not square, a row
// whose columns are not strictly increasing (unsorted or duplicated: the CSR order would not be
// the increasing-offset order, so the sums would differ), a NaN value (NaN marks the padding),
// more than diagonal_max_count distinct offsets, or more than max_fill x nnz stored entries.
// A product over the layout that adds, row by row, value x entry for the non-NaN values in
// increasing offset order performs exactly the CSR row's operations in the CSR order, so it is
// bit-for-bit the CSR product (padding never enters a sum: no 0 x Inf = NaN, no +0 for -0).
std::optional<diagonal_layout> diagonal_storage(const host_csr<double>& a, double max_fill = diagonal_max_fill);

}  // namespace molaccel::linalg

#include "linalg/diagonal.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace molaccel::linalg {

std::optional<diagonal_layout> diagonal_storage(const host_csr<double>& a, double max_fill) {
  const std::size_t n = a.rows;
  if (n == 0 || a.cols != n || a.row_ptr.size() != n + 1 || a.col_idx.size() != a.values.size() ||
      std::size_t(a.row_ptr[n]) != a.values.size())
    return std::nullopt;
  // Distinct offsets (at most diagonal_max_count), rows strictly increasing, no NaN.
  std::vector<long long> offsets;
  for (std::size_t i = 0; i < n; ++i) {
    long long prev = -1;
    for (auto k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
      const long long j = a.col_idx[k];
      if (j <= prev || j >= (long long)n || std::isnan(a.values[k])) return std::nullopt;
      prev = j;
      const long long off = j - (long long)i;
      if (std::find(offsets.begin(), offsets.end(), off) == offsets.end()) {
        if (offsets.size() == std::size_t(diagonal_max_count)) return std::nullopt;
        offsets.push_back(off);
      }
    }
  }
  if (offsets.empty() || double(offsets.size()) * double(n) > max_fill * double(a.nnz())) return std::nullopt;
  std::sort(offsets.begin(), offsets.end());
  diagonal_layout d;
  d.offsets.assign(offsets.begin(), offsets.end());
  d.values.assign(offsets.size() * n, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t kd = 0;  // both in increasing order
    for (auto k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
      const long long off = (long long)a.col_idx[k] - (long long)i;
      while (offsets[kd] != off) ++kd;
      d.values[kd * n + i] = a.values[k];
    }
  }
  return d;
}

}  // namespace molaccel::linalg

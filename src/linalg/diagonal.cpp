#include "linalg/diagonal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace molaccel::linalg {

std::optional<DiagonalLayout> diagonal_storage(const HostCsr<double>& a, double max_fill) {
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
  DiagonalLayout d;
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

std::optional<DiagonalGrid> diagonal_grid_of(const DiagonalLayout& d, std::size_t n) {
  const int reach = diagonal_grid_max_reach;
  if (n < 4 || d.offsets.empty() || d.values.size() != d.offsets.size() * n || n > (std::size_t(1) << 30))
    return std::nullopt;
  std::vector<long long> widths;
  for (int off : d.offsets) {
    const long long m = off < 0 ? -(long long)off : off;
    if (m < reach + 1) continue;
    for (long long w = m - reach; w <= m + reach; ++w)
      if (w > 2 * reach && (long long)n % w == 0 && (long long)n / w >= 2 &&
          std::find(widths.begin(), widths.end(), w) == widths.end())
        widths.push_back(w);
  }
  std::optional<DiagonalGrid> best;
  int best_reach = reach + 1;
  for (long long w : widths) {
    DiagonalGrid g;
    g.width = int(w);
    g.height = int((long long)n / w);
    int most = 0;
    bool ok = true;
    for (int off : d.offsets) {
      // a = off / w rounded to the nearest, b the remainder (|b| <= w / 2).
      long long a = off >= 0 ? (off + w / 2) / w : -((-(long long)off + w / 2) / w);
      long long b = off - a * w;
      if (b > reach || b < -reach) {
        ok = false;
        break;
      }
      g.a.push_back(int(a));
      g.b.push_back(int(b));
      most = std::max(most, int(b < 0 ? -b : b));
    }
    // No entry crosses a grid row's edge (the layout holds NaN where the CSR row has no entry).
    for (std::size_t k = 0; ok && k < d.offsets.size(); ++k) {
      const int b = g.b[k];
      if (b == 0) continue;
      for (std::size_t row = 0; row < n && ok; ++row) {
        const long long j = (long long)(row % std::size_t(w));
        if ((j + b < 0 || j + b >= w) && !std::isnan(d.values[k * n + row])) ok = false;
      }
    }
    if (ok && (most < best_reach || (most == best_reach && g.width > best->width))) {
      best_reach = most;
      best = std::move(g);
    }
  }
  return best;
}

std::optional<std::vector<double>> diagonal_constant_of(const DiagonalLayout& d, const DiagonalGrid& g,
                                                        std::size_t n) {
  const std::size_t count = d.offsets.size();
  if (count == 0 || g.a.size() != count || g.b.size() != count || d.values.size() != count * n ||
      std::size_t(g.width) * std::size_t(g.height) != n)
    return std::nullopt;
  std::vector<double> c(count, 0.0);
  for (std::size_t k = 0; k < count; ++k) {
    bool seen = false;
    for (std::size_t row = 0; row < n; ++row) {
      const long long i = (long long)(row / std::size_t(g.width)) + g.a[k];
      const long long j = (long long)(row % std::size_t(g.width)) + g.b[k];
      const double v = d.values[k * n + row];
      if (i < 0 || i >= g.height || j < 0 || j >= g.width) {
        if (!std::isnan(v)) return std::nullopt;  // an entry outside the grid (not a grid stencil)
        continue;
      }
      if (!std::isfinite(v)) return std::nullopt;  // a hole (NaN) inside the grid, or infinite
      if (!seen) {
        c[k] = v;
        seen = true;
      } else if (std::memcmp(&v, &c[k], sizeof v) != 0) {
        return std::nullopt;
      }
    }
    if (!seen) return std::nullopt;
  }
  return c;
}

}  // namespace molaccel::linalg

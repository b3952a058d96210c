// Diagonal storage (src/linalg/diagonal.hpp): which matrices qualify, the layout, and that a
// product over it that skips the NaN padding is the CSR product bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "linalg/diagonal.hpp"
#include "linalg/diagonal_cases.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg::testing {
namespace {

// The CSR row sums in CSR order, and the same over the layout as the fused kernel does them
// (stream_product<2>: the non-NaN values in increasing offset order), both with fused
// multiply-adds as nvcc contracts acc += v * x.
std::vector<double> csr_product(const HostCsr<double>& a, const std::vector<double>& x) {
  std::vector<double> y(a.rows);
  for (std::size_t i = 0; i < a.rows; ++i) {
    double acc = 0;
    for (auto k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) acc = std::fma(a.values[k], x[a.col_idx[k]], acc);
    y[i] = acc;
  }
  return y;
}
std::vector<double> diagonal_product(const DiagonalLayout& d, const std::vector<double>& x) {
  const std::size_t n = x.size();
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    double acc = 0;
    for (std::size_t k = 0; k < d.offsets.size(); ++k) {
      const double v = d.values[k * n + i];
      if (v == v) acc = std::fma(v, x[std::size_t((long long)i + d.offsets[k])], acc);
    }
    y[i] = acc;
  }
  return y;
}
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Every CSR entry sits at its place in the layout, and every other slot is NaN.
void expect_layout_matches(const HostCsr<double>& a, const DiagonalLayout& d) {
  const std::size_t n = a.rows;
  ASSERT_EQ(d.values.size(), d.offsets.size() * n);
  for (std::size_t k = 1; k < d.offsets.size(); ++k) EXPECT_LT(d.offsets[k - 1], d.offsets[k]);
  std::size_t present = 0;
  for (double v : d.values) present += v == v ? 1 : 0;
  EXPECT_EQ(present, a.nnz());
  for (std::size_t i = 0; i < n; ++i)
    for (auto k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
      const int off = a.col_idx[k] - int(i);
      std::size_t kd = 0;
      while (kd < d.offsets.size() && d.offsets[kd] != off) ++kd;
      ASSERT_LT(kd, d.offsets.size());
      const double v = d.values[kd * n + i];
      EXPECT_EQ(std::signbit(v), std::signbit(a.values[k]));  // -0 stays -0
      EXPECT_EQ(v, a.values[k]);
    }
}

TEST(LinalgDiagonal, PoissonAndBandedQualify) {
  const auto p = poisson_2d(7);
  const auto d = diagonal_storage(p);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->offsets, (std::vector<int>{-7, -1, 0, 1, 7}));
  expect_layout_matches(p, *d);
  // Holes in the band (the +-1 couplings across grid rows): NaN, not 0.
  EXPECT_TRUE(std::isnan(d->values[3 * 49 + 6]));  // a(6, 7) is not an entry
  EXPECT_TRUE(std::isnan(d->values[0 * 49 + 0]));  // outside the matrix
  const auto r = random_banded(1000, {-31, -2, -1, 0, 1, 5, 31, 400}, 0.15, 7);
  const auto dr = diagonal_storage(r);
  ASSERT_TRUE(dr.has_value());
  EXPECT_EQ(dr->offsets, (std::vector<int>{-31, -2, -1, 0, 1, 5, 31, 400}));
  expect_layout_matches(r, *dr);
  // One row (n = 1), and a diagonal matrix.
  const auto one = random_banded(1, {-1, 0, 1}, 0.0, 3);
  ASSERT_TRUE(diagonal_storage(one).has_value());
  EXPECT_EQ(diagonal_storage(one)->offsets, std::vector<int>{0});
}

// diagonal_grid_of: the 2-D grid of a stencil matrix (the one-barrier resident kernel's tiles).
TEST(LinalgDiagonal, GridOfStencils) {
  const auto p = poisson_2d(317);
  const auto g = diagonal_grid_of(*diagonal_storage(p), p.rows);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->width, 317);
  EXPECT_EQ(g->height, 317);
  EXPECT_EQ(g->a, (std::vector<int>{-1, 0, 0, 0, 1}));
  EXPECT_EQ(g->b, (std::vector<int>{0, -1, 0, 1, 0}));
  // A rectangular grid, 7 diagonals reaching diagonally, with holes: width 61, not the
  // neighbouring widths (their remainders would cross grid rows).
  const std::vector<std::pair<int, int>> seven = {{-1, -1}, {-1, 0}, {0, -1}, {0, 0}, {0, 1}, {1, 0}, {1, 1}};
  const auto s = random_stencil(37, 61, seven, 0.2, 5);
  const auto ds = diagonal_storage(s);
  ASSERT_TRUE(ds.has_value());
  EXPECT_EQ(ds->offsets, (std::vector<int>{-62, -61, -1, 0, 1, 61, 62}));
  const auto gs = diagonal_grid_of(*ds, s.rows);
  ASSERT_TRUE(gs.has_value());
  EXPECT_EQ(gs->width, 61);
  EXPECT_EQ(gs->height, 37);
  EXPECT_EQ(gs->a, (std::vector<int>{-1, -1, 0, 0, 0, 1, 1}));
  EXPECT_EQ(gs->b, (std::vector<int>{-1, 0, -1, 0, 1, 0, 1}));
  // A band with entries across every would-be grid row's edge: not a grid (n = 1000, offsets
  // +-40 would give width 40, but a(39, 40) is an entry).
  const auto band = random_banded(1000, {-40, -1, 0, 1, 40}, 0.0, 9);
  EXPECT_FALSE(diagonal_grid_of(*diagonal_storage(band), band.rows).has_value());
  // One crossing entry is enough: Poisson 20 with a(19, 20) added.
  auto crossed = poisson_2d(20);
  {
    HostCsr<double> c;
    c.rows = c.cols = crossed.rows;
    for (std::size_t i = 0; i < crossed.rows; ++i) {
      for (auto k = crossed.row_ptr[i]; k < crossed.row_ptr[i + 1]; ++k) {
        c.col_idx.push_back(crossed.col_idx[k]);
        c.values.push_back(crossed.values[k]);
        if (i == 19 && crossed.col_idx[k] == 19) {
          c.col_idx.push_back(20);
          c.values.push_back(-0.5);
        }
      }
      c.row_ptr.push_back(std::int32_t(c.col_idx.size()));
    }
    crossed = c;
  }
  ASSERT_TRUE(diagonal_storage(crossed).has_value());
  EXPECT_FALSE(diagonal_grid_of(*diagonal_storage(crossed), crossed.rows).has_value());
  // No offset beyond the reach (tridiagonal), and a width not dividing n: bands.
  const auto tri = random_banded(500, {-1, 0, 1}, 0.0, 4);
  EXPECT_FALSE(diagonal_grid_of(*diagonal_storage(tri), tri.rows).has_value());
  const auto odd = random_banded(1009, {-50, 0, 50}, 0.0, 4);  // 1009 is prime
  EXPECT_FALSE(diagonal_grid_of(*diagonal_storage(odd), odd.rows).has_value());
}

// Constant stencils (diagonal_constant_of): Poisson and a 7-point stencil with a -0 coefficient
// are; a random stencil, one changed value, a hole inside the grid and an infinite coefficient
// are not.
TEST(LinalgDiagonal, ConstantStencils) {
  auto constant = [](const HostCsr<double>& m) -> std::optional<std::vector<double>> {
    const auto d = diagonal_storage(m);
    if (!d) return std::nullopt;
    const auto g = diagonal_grid_of(*d, m.rows);
    if (!g) return std::nullopt;
    return diagonal_constant_of(*d, *g, m.rows);
  };
  const auto p = poisson_2d(40);
  const auto cp = constant(p);
  ASSERT_TRUE(cp.has_value());
  EXPECT_EQ(*cp, (std::vector<double>{-1, -1, 4, -1, -1}));
  const std::vector<StencilTerm> seven = {{-1, -1, -0.5}, {-1, 0, -1.25}, {0, -1, -0.0}, {0, 0, 6.0},
                                          {0, 1, -1.0},   {1, 0, -1.5},   {1, 1, -0.25}};
  const auto s = constant_stencil(23, 41, seven);
  const auto cs = constant(s);
  ASSERT_TRUE(cs.has_value());
  EXPECT_EQ(*cs, (std::vector<double>{-0.5, -1.25, -0.0, 6.0, -1.0, -1.5, -0.25}));
  EXPECT_TRUE(std::signbit((*cs)[2]));  // -0 kept as -0
  EXPECT_FALSE(
      constant(random_stencil(23, 41, {{-1, 0}, {0, -1}, {0, 0}, {0, 1}, {1, 0}}, 0.0, 7)).has_value());
  auto changed = p;
  changed.values[changed.row_ptr[500]] = -1.0000000000000002;  // one off-diagonal of row 500
  EXPECT_TRUE(diagonal_storage(changed).has_value());
  EXPECT_FALSE(constant(changed).has_value());
  // A hole: row 500 without its first entry (a neighbour inside the grid).
  HostCsr<double> hole;
  hole.rows = hole.cols = p.rows;
  for (std::size_t i = 0; i < p.rows; ++i) {
    for (auto k = p.row_ptr[i]; k < p.row_ptr[i + 1]; ++k)
      if (!(i == 500 && k == p.row_ptr[i])) {
        hole.col_idx.push_back(p.col_idx[k]);
        hole.values.push_back(p.values[k]);
      }
    hole.row_ptr.push_back(std::int32_t(hole.col_idx.size()));
  }
  EXPECT_FALSE(constant(hole).has_value());
  auto infinite = seven;
  infinite[0].v = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(constant(constant_stencil(23, 41, infinite)).has_value());
}

TEST(LinalgDiagonal, OtherMatricesDoNotQualify) {
  EXPECT_FALSE(diagonal_storage(random_scattered(500, 4, 1)).has_value());  // offsets everywhere
  // Nine diagonals (one more than diagonal_max_count).
  EXPECT_FALSE(diagonal_storage(random_banded(100, {-4, -3, -2, -1, 0, 1, 2, 3, 4}, 0.0, 2)).has_value());
  // Too much padding: 2 x 100 slots for 101 entries.
  HostCsr<double> far;
  far.rows = far.cols = 100;
  for (std::size_t i = 0; i < 100; ++i) {
    far.col_idx.push_back(std::int32_t(i));
    far.values.push_back(1.0);
    if (i == 0) {
      far.col_idx.push_back(50);
      far.values.push_back(1.0);
    }
    far.row_ptr.push_back(std::int32_t(far.col_idx.size()));
  }
  EXPECT_FALSE(diagonal_storage(far).has_value());
  EXPECT_TRUE(diagonal_storage(far, 2.0).has_value());
  auto base = poisson_2d(5);
  ASSERT_TRUE(diagonal_storage(base).has_value());
  auto unsorted = base;  // row 6's first two entries swapped: the CSR order is not the offset order
  std::swap(unsorted.col_idx[unsorted.row_ptr[6]], unsorted.col_idx[unsorted.row_ptr[6] + 1]);
  std::swap(unsorted.values[unsorted.row_ptr[6]], unsorted.values[unsorted.row_ptr[6] + 1]);
  EXPECT_FALSE(diagonal_storage(unsorted).has_value());
  auto duplicate = base;
  duplicate.col_idx[duplicate.row_ptr[6] + 1] = duplicate.col_idx[duplicate.row_ptr[6]];
  EXPECT_FALSE(diagonal_storage(duplicate).has_value());
  auto nan = base;  // NaN marks the padding
  nan.values[3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(diagonal_storage(nan).has_value());
  auto rect = base;
  rect.cols = 26;
  EXPECT_FALSE(diagonal_storage(rect).has_value());
}

// The product over the layout (NaN padding skipped) is the CSR product bit for bit, also where a
// padding 0 x x would not be: x with +-Inf and NaN next to holes (0 x Inf = NaN), signed zeros.
TEST(LinalgDiagonal, ProductIsTheCsrProductBitForBit) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto a = random_banded(2000, {-45, -1, 0, 1, 3, 45}, 0.2, seed);
    const auto d = diagonal_storage(a);
    ASSERT_TRUE(d.has_value());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> x(a.rows);
    for (auto& v : x) v = u(rng);
    EXPECT_TRUE(same_bits(csr_product(a, x), diagonal_product(*d, x)));
    for (std::size_t i = 0; i < x.size(); i += 17) x[i] = i % 3 == 0 ? inf : i % 3 == 1 ? -inf : nan;
    EXPECT_TRUE(same_bits(csr_product(a, x), diagonal_product(*d, x)));
  }
  // Signed zeros and non-finite x on a 3 x 3 matrix with a hole (a(0, 1)) and -0 entries.
  HostCsr<double> z;
  z.rows = z.cols = 3;
  z.row_ptr = {0, 1, 3, 4};
  z.col_idx = {0, 1, 2, 2};
  z.values = {-0.0, -1.0, -0.0, 2.0};
  const auto dz = diagonal_storage(z, 3.0);
  ASSERT_TRUE(dz.has_value());
  for (double x0 : {0.0, -0.0, inf, nan})
    for (double x1 : {0.0, -0.0, 1.0, -inf}) {
      const std::vector<double> x{x0, x1, -0.0};
      EXPECT_TRUE(same_bits(csr_product(z, x), diagonal_product(*dz, x)));
    }
}

}  // namespace
}  // namespace molaccel::linalg::testing

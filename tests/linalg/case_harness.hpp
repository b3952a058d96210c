// Shared by the CPU and GPU tests: expression cases run through CustomOperation on a device
// (or the host) and through the loop-per-operation reference, on the same random data.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg::testing {

enum class OperandKind { vec, dense, csr, host_scalar, device_scalar };

struct TestCase {
  std::string name;
  std::vector<Statement> statements;
  std::vector<OperandKind> operands;
  bool has_reduction = false;
};

MOLACCEL_EW_MODIFIER(F, "1/(1+X)");
MOLACCEL_EW_MODIFIER(G, "X*X");

template <class T>
std::vector<TestCase> expression_cases() {
  using K = OperandKind;
  SymbolicVector<T, 0> x;
  SymbolicVector<T, 1> y;
  SymbolicVector<T, 2> z;
  std::vector<TestCase> c;
  c.push_back({"vec0_eq_vec1_plus_vec2", {x = y + z}, {K::vec, K::vec, K::vec}});
  {
    CpuSymbolicScalar<T, 3> alpha;
    c.push_back({"scaled_difference", {x = 2.5 * y - z * alpha}, {K::vec, K::vec, K::vec, K::host_scalar}});
  }
  {  // the paper's BLAS-1 example: x += (alpha + beta) * x - (y - F(G(z)))
    GpuSymbolicScalar<T, 1> alpha;
    GpuSymbolicScalar<T, 2> beta;
    SymbolicVector<T, 3> y3;
    SymbolicVector<T, 4> z4;
    c.push_back({"paper_blas1",
                 {x += (alpha + beta) * x - (y3 - F(G(z4)))},
                 {K::vec, K::device_scalar, K::device_scalar, K::vec, K::vec}});
  }
  c.push_back({"functions",
               {x = exp(-abs(y)) + sqrt(z) + log(y) + element_div(y, z) + element_prod(y, z) + tanh(y) * 0.5 +
                    element_prod(sin(z), cos(y)) + max(y, z) - min(y, z) + pow(y, z)},
               {K::vec, K::vec, K::vec}});
  c.push_back({"inner_prod_times_sum", {x = inner_prod(y, z) * (y + z)}, {K::vec, K::vec, K::vec}, true});
  c.push_back({"normalise", {x = y / norm_2(y)}, {K::vec, K::vec}, true});
  c.push_back({"nested_inner_products",
               {x = inner_prod(y, inner_prod(y, z) * y + z) * z},
               {K::vec, K::vec, K::vec},
               true});
  {  // the paper's BLAS-2 example: x = prod(A, inner_prod(y, y + z) * y + z), dense
    SymbolicMatrix<T, 1> a;
    SymbolicVector<T, 2> y2;
    SymbolicVector<T, 3> z3;
    c.push_back({"paper_blas2_dense",
                 {x = prod(a, inner_prod(y2, y2 + z3) * y2 + z3)},
                 {K::vec, K::dense, K::vec, K::vec},
                 true});
  }
  {  // x = y - alpha * (prod(A, y) - z): tokens, no temporary
    SymbolicCsrMatrix<T, 1> a;
    SymbolicVector<T, 2> y2;
    SymbolicVector<T, 3> z3;
    CpuSymbolicScalar<T, 4> alpha;
    c.push_back({"paper_tokens_csr",
                 {x = y2 - alpha * (prod(a, y2) - z3)},
                 {K::vec, K::csr, K::vec, K::vec, K::host_scalar}});
    SymbolicMatrix<T, 1> d;
    c.push_back({"paper_tokens_dense",
                 {x = y2 - alpha * (prod(d, y2) - z3)},
                 {K::vec, K::dense, K::vec, K::vec, K::host_scalar}});
  }
  c.push_back({"plane_rotation", {x = x + y, y = -x + y}, {K::vec, K::vec}});
  {  // a product that reads the vector it writes needs a temporary
    SymbolicCsrMatrix<T, 1> a;
    c.push_back({"product_of_target_csr", {x = prod(a, x) + 0.5 * x}, {K::vec, K::csr}});
    // ... and a product of a product of it: two temporaries, the outer one's a stage later
    c.push_back({"nested_product_of_target_csr", {x = prod(a, prod(a, x) - 0.5 * x)}, {K::vec, K::csr}});
    SymbolicMatrix<T, 1> d;
    c.push_back({"product_of_target_dense", {x = prod(d, element_prod(x, x))}, {K::vec, K::dense}});
  }
  {  // scalar target beside a vector target that uses the same inner product
    GpuSymbolicScalar<T, 3> s;
    c.push_back({"scalar_and_vector_targets",
                 {s = inner_prod(y, z), x = inner_prod(y, z) * y - z},
                 {K::vec, K::vec, K::vec, K::device_scalar},
                 true});
  }
  {
    GpuSymbolicScalar<T, 0> s;
    SymbolicVector<T, 1> y1;
    CpuSymbolicScalar<T, 2> alpha;
    c.push_back({"safe_div_by_zero",
                 {s = safe_div(inner_prod(y1, y1), alpha - alpha) + greater(norm_2(y1), alpha - alpha) +
                      nonzero(alpha)},
                 {K::device_scalar, K::vec, K::host_scalar},
                 true});
  }
  {
    CpuSymbolicScalar<T, 2> alpha;
    c.push_back({"modifier_of_scalar", {x -= F(alpha) * y}, {K::vec, K::vec, K::host_scalar}});
  }
  return c;
}

inline HostCsr<double> random_csr(std::size_t n, std::mt19937_64& rng) {
  // About five entries per row (the seed's Poisson systems), random columns, sorted, unique.
  std::uniform_real_distribution<double> value(0.5, 1.5);
  std::uniform_int_distribution<std::size_t> column(0, n - 1);
  HostCsr<double> a;
  a.rows = a.cols = n;
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<std::int32_t> cols{static_cast<std::int32_t>(r)};
    for (int k = 0; k < 4; ++k) cols.push_back(static_cast<std::int32_t>(column(rng)));
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    for (auto c : cols) {
      a.col_idx.push_back(c);
      a.values.push_back(value(rng));
    }
    a.row_ptr.push_back(static_cast<std::int32_t>(a.values.size()));
  }
  return a;
}

// Runs `tc` on containers at `where` and on the reference; checks every target.
template <class T>
void check_case(const TestCase& tc, std::size_t n, const Placement& where, std::uint64_t seed) {
  SCOPED_TRACE(fmt::format("{} n={} {} on {}", tc.name, n, to_string(value_type_of<T>()), where.describe()));
  std::mt19937_64 rng(seed);
  // Values in [0.5, 1.5]: log, sqrt and divisions stay well conditioned.
  std::uniform_real_distribution<double> value(0.5, 1.5);
  const std::size_t k = tc.operands.size();
  std::vector<ReferenceOperand> ref(k);
  std::vector<HostCsr<double>> csr(k);
  std::vector<Vector<T>> vecs(k);
  std::vector<Matrix<T>> mats(k);
  std::vector<CsrMatrix<T>> csrs(k);
  std::vector<Scalar<T>> scalars(k);
  std::vector<Argument> args;
  for (std::size_t i = 0; i < k; ++i) {
    auto fill = [&](std::size_t count) {
      std::vector<double> v(count);
      for (auto& e : v) e = double(T(value(rng)));  // representable in T: same inputs for both sides
      return v;
    };
    switch (tc.operands[i]) {
      case OperandKind::vec: {
        ref[i].values = fill(n);
        vecs[i] = Vector<T>(where, n);
        vecs[i].copy_from_host(std::vector<T>(ref[i].values.begin(), ref[i].values.end()));
        args.emplace_back(vecs[i]);
        break;
      }
      case OperandKind::dense: {
        ref[i].values = fill(n * n);
        for (auto& e : ref[i].values) e /= double(n);  // keeps products O(1)
        for (auto& e : ref[i].values) e = double(T(e));
        ref[i].rows = ref[i].cols = n;
        mats[i] = Matrix<T>(where, n, n);
        mats[i].copy_from_host(std::vector<T>(ref[i].values.begin(), ref[i].values.end()));
        args.emplace_back(mats[i]);
        break;
      }
      case OperandKind::csr: {
        csr[i] = random_csr(n, rng);
        for (auto& e : csr[i].values) e = double(T(e));
        ref[i].csr = &csr[i];
        csrs[i] = CsrMatrix<T>(where, csr[i]);
        args.emplace_back(csrs[i]);
        break;
      }
      case OperandKind::host_scalar: {
        ref[i].values = fill(1);
        args.emplace_back(T(ref[i].values[0]));
        break;
      }
      case OperandKind::device_scalar: {
        ref[i].values = fill(1);
        scalars[i] = Scalar<T>(where, T(ref[i].values[0]));
        args.emplace_back(scalars[i]);
        break;
      }
    }
  }
  CustomOperation op(tc.statements);
  op.run(args);
  reference_execute(tc.statements, ref);

  // Tolerance: a few roundings per element, plus summation error of inner products and
  // products, which grows at most like log2(n) levels of pairwise/lane sums (and the sequential
  // lane sums of a dense row: n/32 terms) relative to the magnitude of the result.
  const double eps = std::numeric_limits<T>::epsilon();
  const double depth =
      1.0 + std::log2(double(n) + 1.0) + double(n) / 32.0 * (tc.name.find("dense") != std::string::npos);
  for (const auto& s : tc.statements) {
    const int t = s.target()->index;
    std::vector<double> got;
    if (tc.operands[t] == OperandKind::vec) {
      const auto h = vecs[t].to_host();
      got.assign(h.begin(), h.end());
    } else {
      got = {double(scalars[t].value())};
    }
    double scale = 1.0;
    for (double e : ref[t].values) scale = std::max(scale, std::fabs(e));
    const double tol = 64.0 * eps * depth * scale;
    ASSERT_EQ(got.size(), ref[t].values.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!(std::fabs(got[i] - ref[t].values[i]) <= tol)) {
        if (++bad <= 3)
          ADD_FAILURE() << "target " << t << " element " << i << ": got " << got[i] << ", reference "
                        << ref[t].values[i] << ", tolerance " << tol;
      }
    }
    EXPECT_EQ(bad, 0u);
  }
}

}  // namespace molaccel::linalg::testing

// Shared pieces of the GPU solver tests (test_linalg_gpu.cpp): the first GPU, banded test
// systems and the checks every solve must pass.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "linalg/diagonal.hpp"
#include "molaccel/linalg.hpp"
#include "residual.hpp"
#include "testing/test_arguments.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg::testing {

// A test system and the name its failures are reported under.
struct NamedSystem {
  std::string name;
  HostCsr<double> a;
};

// Resources on the first GPU, where every test here runs.
inline Resources first_gpu() {
  Resources::Options ro;
  ro.device = DeviceSpec::parse("gpu:0");
  return Resources::create(ro);
}

using molaccel::linalg::testing::true_residual;

inline std::vector<double> ones_rhs(const HostCsr<double>& a) {
  return multiply(a, std::vector<double>(a.rows, 1.0));
}

// A banded test matrix of any size: 4 + shift on the diagonal, couplings at +-1 and +-m (m about
// sqrt(n), the 5-point stencil's shape without its boundary pattern); `skew` makes the +1 and -1
// couplings differ (a convection term), so the matrix is not symmetric.
inline HostCsr<double> banded(std::size_t n, double skew) {
  HostCsr<double> a;
  a.rows = a.cols = n;
  const std::size_t m = std::max<std::size_t>(2, std::size_t(std::sqrt(double(n))));
  for (std::size_t i = 0; i < n; ++i) {
    auto add = [&](std::size_t j, double v) {
      a.col_idx.push_back(std::int32_t(j));
      a.values.push_back(v);
    };
    if (i >= m) add(i - m, -1.0);
    if (i >= 1) add(i - 1, -1.0 - skew);
    add(i, 4.0 + 0.1 * double(i % 7));
    if (i + 1 < n) add(i + 1, -1.0 + skew);
    if (i + m < n) add(i + m, -1.0);
    a.row_ptr.push_back(std::int32_t(a.col_idx.size()));
  }
  return a;
}

// The skew-symmetric 2 x 2 matrix: (p, Ap) = 0 for CG, rho = 0 for BiCGStab.
inline HostCsr<double> skew_2x2() {
  HostCsr<double> skew;
  skew.rows = skew.cols = 2;
  skew.row_ptr = {0, 1, 2};
  skew.col_idx = {1, 0};
  skew.values = {1.0, -1.0};
  return skew;
}

// What every solve must give: one residual per iteration plus the initial one; when converged,
// its own residual and the one recomputed in double on the host within tol (fp32: 10 tol, the
// recurrence drifts from the true residual by n * eps * cond, as in the CPU test); no NaN or
// infinity in x.
inline void expect_valid_solution(const SolverResult& r, const HostCsr<double>& a,
                                  const std::vector<double>& b, const SolverOptions& o) {
  EXPECT_EQ(r.residual_history.size(), std::size_t(r.iterations) + 1);
  if (r.status == SolverStatus::converged) {
    EXPECT_LE(r.relative_residual, o.tolerance);
    EXPECT_LE(true_residual(a, b, r.x), o.tolerance * (o.precision == Precision::fp32 ? 10.0 : 1.0));
  }
  for (double v : r.x) ASSERT_TRUE(std::isfinite(v));
}

// Two solves that must be the same arithmetic (another batch size, load path or matrix storage):
// the same iteration count, residual history and x, bit for bit.
inline void expect_bitwise_same(const SolverResult& got, const SolverResult& want) {
  EXPECT_EQ(got.status, want.status);
  EXPECT_EQ(got.iterations, want.iterations);
  EXPECT_EQ(got.residual_history, want.residual_history);
  EXPECT_EQ(got.x, want.x);
}

// The systems solve()'s generated kernels are compared with the graph path on: n = 1, 2, 7,
// 1000, 10007 (banded) and 100,489 (the 317 x 317 Poisson system), fp64 and fp32 (fp32 only up to
// 20,000 rows: it stalls near 1e-4 on large Poisson), no preconditioner and Jacobi; CG and
// BiCGStab on the symmetric matrix, BiCGStab on the nonsymmetric one. check(a, b, options, what).
// Under compute-sanitizer (--sanitizer-sizes) 3,001 rows stand for 10,007 (still above one block,
// so the cluster form runs) and the 100,489-row system is left out.
template <class Check>
void for_each_graph_comparison(Check check) {
  const bool small = ::molaccel::testing::sanitizer_sizes();
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(1000),
                        std::size_t(small ? 3001 : 10007), std::size_t(100489)}) {
    if (n > 20000 && small) continue;
    const auto sym = n == 100489 ? poisson_2d(317) : banded(n, 0.0);
    const auto nonsym = banded(n, 0.3);
    for (auto prec : {Precision::fp64, Precision::fp32}) {
      if (prec == Precision::fp32 && n > 20000) continue;
      for (auto precond : {Preconditioner::none, Preconditioner::jacobi}) {
        SolverOptions o;
        o.precision = prec;
        o.preconditioner = precond;
        o.tolerance = prec == Precision::fp64 ? 1e-8 : 1e-4;
        o.max_iterations = 4000;
        for (auto solver : {Solver::cg, Solver::bicgstab}) {
          o.solver = solver;
          check(sym, ones_rhs(sym), o, std::string("symmetric"));
        }
        o.solver = Solver::bicgstab;
        check(nonsym, ones_rhs(nonsym), o, std::string("nonsymmetric"));
      }
    }
  }
}

// Against the graph path: the same status; the iteration count within +-1 in fp64 on small
// systems (only the summation order differs; one-barrier BiCGStab tests the residual of the
// iteration before, one more), 10% on BiCGStab above 20,000 rows (erratic enough that the order
// moves the count) and in fp32.
inline void expect_close_to_graph(const SolverResult& r, const SolverResult& ref, const HostCsr<double>& a,
                                  const SolverOptions& o) {
  EXPECT_EQ(r.status, ref.status) << to_string(r.status) << " vs " << to_string(ref.status);
  if (o.precision == Precision::fp32) {
    EXPECT_NEAR(r.iterations, ref.iterations, 3 + ref.iterations / 10);
  } else if (o.solver == Solver::bicgstab && a.rows > 20000)
    EXPECT_NEAR(r.iterations, ref.iterations, 1 + ref.iterations / 10);
  else {
    EXPECT_NEAR(r.iterations, ref.iterations, 1);
  }
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace molaccel::linalg::testing

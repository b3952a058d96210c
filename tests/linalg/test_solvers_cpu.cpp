// Solvers on the CPU backend; the residual is recomputed independently in double precision.
#include <gtest/gtest.h>

#include <cmath>

#include "molaccel/linalg.hpp"
#include "residual.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg {
namespace {

using testing::true_residual;

struct SolverCase {
  Solver solver;
  Preconditioner precond;
};

void check_converges(const HostCsr<double>& a, const SolverOptions& options) {
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));  // exact x = ones
  const auto result = solve(Resources::cpu(2), a, b, options);
  SCOPED_TRACE(fmt::format("{} {} {}", to_string(options.solver),
                           options.preconditioner == Preconditioner::jacobi ? "jacobi" : "none",
                           options.precision == Precision::fp32 ? "fp32" : "fp64"));
  EXPECT_EQ(result.status, SolverStatus::converged)
      << to_string(result.status) << " after " << result.iterations;
  EXPECT_EQ(result.residual_history.size(), std::size_t(result.iterations) + 1);
  EXPECT_LE(result.relative_residual, options.tolerance);
  // The recurrence residual drifts from the true one by rounding only: fp64 stays within
  // tolerance; fp32 loses about n * eps * cond relative accuracy, allowed as a factor of 10.
  const double slack = options.precision == Precision::fp32 ? 10.0 : 1.0;
  EXPECT_LE(true_residual(a, b, result.x), options.tolerance * slack);
  for (double v : result.x) EXPECT_TRUE(std::isfinite(v));
}

TEST(LinalgSolversCpu, PoissonAllSolversAndPrecisions) {
  const auto a = poisson_2d(24);
  for (auto solver : {Solver::cg, Solver::bicgstab})
    for (auto precond : {Preconditioner::none, Preconditioner::jacobi}) {
      SolverOptions o;
      o.solver = solver;
      o.preconditioner = precond;
      o.tolerance = 1e-8;
      check_converges(a, o);
      o.precision = Precision::fp32;
      o.tolerance = 1e-4;
      check_converges(a, o);
    }
}

TEST(LinalgSolversCpu, BundledMatrices) {
  const auto bus = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  SolverOptions o;
  o.solver = Solver::cg;
  o.preconditioner = Preconditioner::jacobi;
  o.max_iterations = 20000;
  check_converges(bus, o);
  const auto ani = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "ani4.mtx");
  o.solver = Solver::bicgstab;
  o.max_iterations = 5000;
  check_converges(ani, o);
}

TEST(LinalgSolversCpu, BreakdownIsReportedWithoutNaN) {
  // Skew-symmetric A with b = e1: (r0, A r0) = 0, so BiCGStab's first alpha has a zero
  // denominator; CG on the zero matrix has (p, Ap) = 0.
  HostCsr<double> skew;
  skew.rows = skew.cols = 2;
  skew.row_ptr = {0, 1, 2};
  skew.col_idx = {1, 0};
  skew.values = {1.0, -1.0};
  SolverOptions o;
  auto r = solve(Resources::cpu(1), skew, std::vector<double>{1.0, 0.0}, o);
  EXPECT_EQ(r.status, SolverStatus::breakdown_rho);
  for (double v : r.x) EXPECT_TRUE(std::isfinite(v));
  HostCsr<double> zero;
  zero.rows = zero.cols = 1;
  zero.row_ptr = {0, 1};
  zero.col_idx = {0};
  zero.values = {0.0};
  o.solver = Solver::cg;
  r = solve(Resources::cpu(1), zero, std::vector<double>{1.0}, o);
  EXPECT_EQ(r.status, SolverStatus::breakdown_alpha);
  EXPECT_TRUE(std::isfinite(r.x[0]));
}

TEST(LinalgSolversCpu, IterationCapAndZeroRhs) {
  const auto a = poisson_2d(16);
  SolverOptions o;
  o.max_iterations = 3;
  const auto b = multiply(a, std::vector<double>(a.rows, 1.0));
  auto r = solve(Resources::cpu(1), a, b, o);
  EXPECT_EQ(r.status, SolverStatus::max_iterations);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_EQ(r.residual_history.size(), 4u);
  r = solve(Resources::cpu(1), a, std::vector<double>(a.rows, 0.0), o);
  EXPECT_EQ(r.status, SolverStatus::zero_rhs);
  EXPECT_EQ(r.x, std::vector<double>(a.rows, 0.0));
}

}  // namespace
}  // namespace molaccel::linalg

// Programs on the GPU: the generated persistent kernel against the host executor (random
// programs, the methods) and the methods against the hand-written solve().
#include <gtest/gtest.h>

#include <cmath>

#include "linalg/program_cases.hpp"
#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg {
namespace {

TEST(LinalgProgramGpu, RandomProgramsMatchTheHostExecutor) {
  MOLACCEL_REQUIRE_GPU();
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    // Up to 3 blocks' worth of rows and, for some seeds, many blocks (the grid-wide paths).
    const std::size_t n = seed % 5 == 0 ? 20000 + rng() % 20000 : 1 + rng() % 700;
    int iterations = 0;
    const auto rp = testing::random_program(seed, iterations);
    const HostCsr<double> a = testing::random_matrix(n, rng);
    const ProgramInputs in = testing::random_inputs(rp->program, a, iterations, rng);
    const auto host = run_program_on_host(rp->program, in);
    const auto gpu = run_program_on_gpu(rp->program, in);
    SCOPED_TRACE(fmt::format("seed {} n {} blocks {}", seed, n, gpu.blocks));
    ASSERT_EQ(gpu.iterations, host.iterations);
    // Reductions summed per block and then over blocks (another order than the host's row
    // order: 1e-16 relative per sum), amplified by at most a few steps of tanh/products of
    // values in [-1, 1]: 1e-9 absolute.
    for (const auto& [name, v] : host.vectors)
      for (std::size_t r = 0; r < n; ++r)
        ASSERT_NEAR(gpu.vectors.at(name)[r], v[r], 1e-9) << name << "[" << r << "]";
    for (const auto& [name, v] : host.scalars) ASSERT_NEAR(gpu.scalars.at(name), v, 1e-9) << name;
  }
}

double true_residual(const HostCsr<double>& a, const std::vector<double>& b, const std::vector<double>& x) {
  const auto ax = multiply(a, x);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += (b[i] - ax[i]) * (b[i] - ax[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

void check_method(const HostCsr<double>& a, int method, double iteration_slack, double residual_slack,
                  std::size_t same_history) {
  const double tol = 1e-8;
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  double bb = 0;
  for (double v : b) bb += v * v;
  const Program p = method == 0 ? cg_program() : method == 1 ? bicgstab_program() : pipelined_cg_program();
  ProgramInputs in;
  in.matrix = &a;
  in.vectors["b"] = b;
  in.scalars["bound"] = tol * tol * bb;
  in.max_iterations = 20000;
  const auto gpu = run_program_on_gpu(p, in);
  const auto host = run_program_on_host(p, in);
  SolverOptions o;
  o.solver = method == 1 ? Solver::bicgstab : Solver::cg;
  o.tolerance = tol;
  o.max_iterations = 20000;
  const auto hand = solve(Resources::create({}), a, b, o);
  SCOPED_TRACE(fmt::format("{} n {}: gpu {} host {} hand-written {} ({})", p.name(), a.rows, gpu.iterations,
                           host.iterations, hand.iterations, hand.backend));
  EXPECT_EQ(gpu.status, "converged");
  EXPECT_LE(true_residual(a, b, gpu.vectors.at("x")), tol * residual_slack);
  EXPECT_NEAR(gpu.iterations, host.iterations, std::max(2.0, iteration_slack * host.iterations));
  EXPECT_NEAR(gpu.iterations, hand.iterations, std::max(2.0, iteration_slack * hand.iterations));
  for (std::size_t k = 0; k < same_history && k < gpu.monitor_history[0].size(); ++k)
    EXPECT_NEAR(gpu.monitor_history[0][k], host.monitor_history[0][k], 1e-6 * host.monitor_history[0][k])
        << k;
}

// Tolerances as in test_program.cpp (the host executor against solve()).
TEST(LinalgProgramGpu, MethodsSolvePoisson) {
  MOLACCEL_REQUIRE_GPU();
  for (std::size_t grid : {24, 200})
    for (int m = 0; m < 3; ++m) check_method(poisson_2d(grid), m, 0.05, 1.0, 10);
}

TEST(LinalgProgramGpu, MethodsSolve1138Bus) {
  MOLACCEL_REQUIRE_GPU();
  const auto a = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  check_method(a, 0, 0.05, 10.0, 10);
  check_method(a, 1, 0.25, 10.0, 5);  // BiCGStab's residuals part by 1e-5 from the 7th on
  check_method(a, 2, 0.45, 10.0, 10);
}

}  // namespace
}  // namespace molaccel::linalg

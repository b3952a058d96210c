// run_program on the CPU (one CustomOperation per step) against the host executor on random
// programs, and the pipelined methods through solve().
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "linalg/program/program_plan.hpp"
#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"
#include "program_cases.hpp"
#include "residual.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg {
namespace {

// `products`: levels of products (2: nested).
void check_random_programs_on_cpu(int products, std::uint64_t seeds) {
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    std::mt19937_64 rng(seed);
    const std::size_t n = 1 + rng() % 3000;  // over the CPU loops' 256-row batches and 8,192-row chunks
    int iterations = 0;
    const auto rp = testing::random_program(seed, iterations, products);
    const HostCsr<double> a = testing::random_matrix(n, rng);
    const ProgramInputs in = testing::random_inputs(rp->program, a, iterations, rng);
    SCOPED_TRACE(fmt::format("seed {} n {}\n{}", seed, n,
                             program::describe(rp->program, program::plan_program(rp->program))));
    const ProgramResult want = run_program_on_host(rp->program, in);
    const ProgramResult got = run_program(Resources::cpu(2), rp->program, in);
    ASSERT_EQ(got.iterations, iterations);
    EXPECT_EQ(got.status, want.status);
    // Values in [-1, 1] through |row sum| <= 1 matrices and damped functions; the CPU loops sum
    // reductions by chunks and may contract a * b + c into one rounding: differences of a few
    // ulps per operation, grown by at most 3 iterations of at most 9 steps: 1e-10 is far above.
    for (const auto& [name, v] : want.vectors)
      for (std::size_t r = 0; r < n; ++r)
        ASSERT_NEAR(got.vectors.at(name)[r], v[r], 1e-10) << name << "[" << r << "]";
    for (const auto& [name, v] : want.scalars) ASSERT_NEAR(got.scalars.at(name), v, 1e-10) << name;
  }
}

TEST(LinalgProgramRun, RandomProgramsOnTheCpuMatchTheHostExecutor) {
  check_random_programs_on_cpu(1, 60);
}
TEST(LinalgProgramRun, RandomNestedProgramsOnTheCpuMatchTheHostExecutor) {
  check_random_programs_on_cpu(2, 30);
}

TEST(LinalgProgramRun, StopTestsMonitorsAndProgramsWithoutAMatrix) {
  Program p("count");
  auto x = p.vector("x");
  auto k = p.scalar("k");
  p.step({x += 1.0 + 0.0 * k, k += 1.0 + 0.0 * k});
  p.stop_when(greater(k, 4.5 + 0.0 * k), "five");
  p.monitor(k * 10.0);
  ProgramInputs in;
  in.vectors["x"] = {0.0, 0.0, 0.0};
  const auto got = run_program(Resources::cpu(1), p, in);
  EXPECT_EQ(got.status, "five");
  EXPECT_EQ(got.iterations, 5);
  EXPECT_EQ(got.vectors.at("x"), (std::vector<double>{5, 5, 5}));
  EXPECT_EQ(got.monitor_history.at(0), (std::vector<double>{0, 10, 20, 30, 40, 50}));
  in.vectors["x"] = {1.0};
  in.vectors["y"] = {1.0};
  EXPECT_THROW(run_program(Resources::cpu(1), p, in), Error);  // no symbol y
}

using testing::true_residual;

TEST(LinalgProgramRun, PipelinedSolversThroughSolve) {
  const auto a = poisson_2d(30);
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  for (const Solver solver : {Solver::pipelined_cg, Solver::pipelined_bicgstab}) {
    SCOPED_TRACE(std::string(to_string(solver)));
    SolverOptions o;
    o.solver = solver;
    const auto got = solve(Resources::cpu(2), a, b, o);
    ASSERT_EQ(got.status, SolverStatus::converged);
    EXPECT_EQ(got.residual_history.size(), std::size_t(got.iterations) + 1);
    EXPECT_LE(got.relative_residual, o.tolerance);
    EXPECT_LE(true_residual(a, b, got.x), 10 * o.tolerance);
    EXPECT_NE(got.backend.find("cpu"), std::string::npos) << got.backend;
    // CG's iteration count within 5 % on this well-conditioned system (pipelined CG is CG in
    // exact arithmetic; pipelined BiCGStab is BiCGStab).
    o.solver = solver == Solver::pipelined_cg ? Solver::cg : Solver::bicgstab;
    const auto plain = solve(Resources::cpu(2), a, b, o);
    EXPECT_NEAR(got.iterations, plain.iterations, std::max(2.0, 0.05 * plain.iterations));
  }
}

// Launch::generated: CG and BiCGStab (Jacobi too) through their programs, as solve()'s own
// (on Poisson with an uneven diagonal, so Jacobi scales the rows unevenly): the same iteration
// counts within 5 %, the true residual, the program in the backend.
TEST(LinalgProgramRun, GeneratedLaunchThroughSolve) {
  const auto a = testing::uneven_diagonal(poisson_2d(30));
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  for (const Solver solver : {Solver::cg, Solver::bicgstab})
    for (const Preconditioner pre : {Preconditioner::none, Preconditioner::jacobi}) {
      SolverOptions o;
      o.solver = solver;
      o.preconditioner = pre;
      const auto plain = solve(Resources::cpu(2), a, b, o);
      o.launch = Launch::generated;
      const auto got = solve(Resources::cpu(2), a, b, o);
      SCOPED_TRACE(got.backend);
      ASSERT_EQ(got.status, SolverStatus::converged);
      EXPECT_EQ(got.residual_history.size(), std::size_t(got.iterations) + 1);
      EXPECT_LE(true_residual(a, b, got.x), 10 * o.tolerance);
      EXPECT_NEAR(got.iterations, plain.iterations, std::max(2.0, 0.05 * plain.iterations));
      EXPECT_NE(got.backend.find(pre == Preconditioner::jacobi ? "jacobi_" : "cpu"), std::string::npos);
    }
  EXPECT_EQ(to_string(Launch::generated), "generated");
}

// A NaN residual is not convergence (the stop test is NaN-safe in every method).
TEST(LinalgProgramRun, NanResidualIsNotConvergence) {
  auto a = poisson_2d(3);
  a.values[4] = std::nan("");
  const std::vector<double> b(a.rows, 1.0);
  for (const Program& p :
       {cg_program(), bicgstab_program(), pipelined_cg_program(), pipelined_bicgstab_program()}) {
    const auto got = run_program(Resources::cpu(1), p, testing::method_inputs(a, b, 1e-8, 5));
    EXPECT_NE(got.status, "converged") << p.name();
    EXPECT_NE(run_program_on_host(p, testing::method_inputs(a, b, 1e-8, 5)).status, "converged") << p.name();
  }
}

TEST(LinalgProgramRun, PipelinedSolverOptionsAndZeroRightHandSide) {
  const auto a = poisson_2d(4);
  const std::vector<double> b(a.rows, 1.0), zero(a.rows, 0.0);
  SolverOptions o;
  o.solver = Solver::pipelined_cg;
  o.preconditioner = Preconditioner::jacobi;
  EXPECT_THROW(solve(Resources::cpu(1), a, b, o), InputError);
  o.preconditioner = Preconditioner::none;
  o.launch = Launch::graph;
  EXPECT_THROW(solve(Resources::cpu(1), a, b, o), InputError);
  o.launch = Launch::generated;  // the pipelined methods' own launch
  EXPECT_EQ(solve(Resources::cpu(1), a, b, o).status, SolverStatus::converged);
  o.launch = Launch::automatic;
  const auto got = solve(Resources::cpu(1), a, zero, o);
  EXPECT_EQ(got.status, SolverStatus::zero_rhs);
  EXPECT_EQ(got.x, zero);
  EXPECT_EQ(to_string(Solver::pipelined_bicgstab), "pipelined-bicgstab");
}

}  // namespace
}  // namespace molaccel::linalg

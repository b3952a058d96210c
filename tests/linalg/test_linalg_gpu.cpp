// Every generated kernel on the GPU against the reference, up to a million elements; the solvers
// in the graph path, and solve()'s generated kernels against it.
#include "linalg/case_harness.hpp"
#include "linalg/diagonal_cases.hpp"
#include "linalg/gpu_solver_cases.hpp"
#include "linalg/matrix_cases.hpp"

namespace molaccel::linalg::testing {
namespace {

Placement gpu0() {
  Placement p;
  p.device = 0;
  return p;
}

template <class T>
void run_all_cases_gpu() {
  std::uint64_t seed = 100;
  for (const auto& tc : expression_cases<T>())
    for (std::size_t n : {std::size_t(1), std::size_t(31), std::size_t(33), std::size_t(257),
                          std::size_t(1000), std::size_t(4097), std::size_t(65537), std::size_t(1000003)}) {
      if (tc.name.find("dense") != std::string::npos && n > 2000) continue;
      check_case<T>(tc, n, gpu0(), seed++);
    }
}

TEST(LinalgGpuOperations, AllCasesDouble) {
  MOLACCEL_REQUIRE_GPU();
  run_all_cases_gpu<double>();
}

TEST(LinalgGpuOperations, AllCasesFloat) {
  MOLACCEL_REQUIRE_GPU();
  run_all_cases_gpu<float>();
}

TEST(LinalgGpuOperations, MatrixTargets) {
  MOLACCEL_REQUIRE_GPU();
  check_all_matrix_cases<double>(gpu0());
  check_all_matrix_cases<float>(gpu0());
  check_matrix_errors<double>(gpu0());
}

TEST(LinalgGpuSolvers, GraphPathConverges) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  // Poisson 100 and 600 (3.6 x 10^5 rows) and a nonsymmetric matrix; under compute-sanitizer
  // (--sanitizer-sizes) Poisson 20 and 40, the same kernels over fewer rows and iterations.
  const bool small = molaccel::testing::sanitizer_sizes();
  const std::vector<HostCsr<double>> systems = {
      poisson_2d(small ? 20 : 100), poisson_2d(small ? 40 : 600),
      read_matrix_market(molaccel::testing::data_dir() / "linalg" / "ani4.mtx")};
  for (std::size_t s = 0; s < systems.size(); ++s) {
    const auto& a = systems[s];
    const auto b = ones_rhs(a);
    for (auto solver : {Solver::cg, Solver::bicgstab})
      for (auto precond : {Preconditioner::none, Preconditioner::jacobi})
        for (auto prec : {Precision::fp64, Precision::fp32}) {
          if (s == 2 && solver == Solver::cg) continue;     // ani4 is not symmetric
          if (s == 1 && prec == Precision::fp32) continue;  // fp32 stalls near 1e-4 at this size
          SolverOptions o;
          o.solver = solver;
          o.preconditioner = precond;
          o.launch = Launch::graph;
          o.precision = prec;
          o.tolerance = prec == Precision::fp64 ? 1e-8 : 1e-4;
          o.max_iterations = 8000;
          const auto r = solve(res, a, b, o);
          SCOPED_TRACE(fmt::format("system {} {} {} {} -> {}", s, to_string(solver), int(precond), int(prec),
                                   r.backend));
          EXPECT_EQ(r.status, SolverStatus::converged) << to_string(r.status) << " " << r.iterations;
          EXPECT_TRUE(contains(r.backend, "graph x8")) << r.backend;
          EXPECT_GT(r.kernels_per_iteration, 0);
          expect_valid_solution(r, a, b, o);
        }
  }
}

TEST(LinalgGpuSolvers, BreakdownWithoutNaN) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  for (auto launch : {Launch::automatic, Launch::graph}) {
    SolverOptions o;
    o.launch = launch;
    const auto r = solve(res, skew_2x2(), std::vector<double>{1.0, 0.0}, o);
    EXPECT_EQ(r.status, SolverStatus::breakdown_rho);
    for (double v : r.x) EXPECT_TRUE(std::isfinite(v));
  }
}

// ---- solve()'s generated kernels (one per solve) ----

// Launch::automatic on a GPU (the generated kernel solve() picks) against the graph path on the
// systems of for_each_graph_comparison: the same status, the iteration count as
// expect_close_to_graph allows, the true residual recomputed in double on the host.
TEST(LinalgGpuSolvers, GeneratedAgreesWithGraphPath) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  for_each_graph_comparison([&](const HostCsr<double>& a, const std::vector<double>& b,
                                const SolverOptions& base, const std::string& what) {
    SolverOptions o = base;
    o.launch = Launch::graph;
    const auto ref = solve(res, a, b, o);
    o.launch = Launch::automatic;
    const auto r = solve(res, a, b, o);
    SCOPED_TRACE(fmt::format("{} {} n={} {} {} -> {} ({} vs {} iterations)", to_string(o.solver), what,
                             a.rows, o.preconditioner == Preconditioner::jacobi ? "jacobi" : "none",
                             o.precision == Precision::fp32 ? "fp32" : "fp64", r.backend, r.iterations,
                             ref.iterations));
    EXPECT_TRUE(contains(r.backend, "generated")) << r.backend;
    EXPECT_EQ(r.kernels_per_iteration, 1);
    EXPECT_EQ(r.host_checks, 1);
    expect_close_to_graph(r, ref, a, o);
    expect_valid_solution(r, a, b, o);
  });
}

// The kernel form solve() picks for the headline systems (parts of the backend description), and
// the general sparse matrix of the CLI example: CG with Jacobi converges on 1138_bus.
TEST(LinalgGpuSolvers, AutomaticChoice) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  struct Expected {
    std::size_t grid;
    std::string bicgstab, cg;
  };
  for (const auto& e :
       std::vector<Expected>{{32, "generated bicgstab (one block", "generated cg (one block"},
                             {100, "generated one_barrier_bicgstab (grid of", "generated cg (one cluster"},
                             {316, "generated one_barrier_bicgstab (grid of", "generated cg (grid"},
                             {1000, "generated bicgstab (grid", "generated cg (grid"}}) {
    if (molaccel::testing::sanitizer_sizes() && e.grid > 100) continue;
    const auto a = poisson_2d(e.grid);
    const auto b = ones_rhs(a);
    SolverOptions o;
    o.max_iterations = 30;
    const auto r = solve(res, a, b, o);
    EXPECT_TRUE(contains(r.backend, e.bicgstab)) << r.backend;
    EXPECT_EQ(r.iterations, 30);
    o.solver = Solver::cg;
    const auto rc = solve(res, a, b, o);
    EXPECT_TRUE(contains(rc.backend, e.cg)) << rc.backend;
    EXPECT_EQ(rc.iterations, 30);
  }
  if (molaccel::testing::sanitizer_sizes()) return;  // 1138_bus takes thousands of iterations
  const auto bus = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  SolverOptions o;
  o.solver = Solver::cg;
  o.preconditioner = Preconditioner::jacobi;
  o.max_iterations = 20000;
  const auto r = solve(res, bus, ones_rhs(bus), o);
  EXPECT_TRUE(contains(r.backend, "generated jacobi_cg (one block")) << r.backend;
  EXPECT_EQ(r.status, SolverStatus::converged) << to_string(r.status);
  expect_valid_solution(r, bus, ones_rhs(bus), o);
}

// A million rows (rows streamed through memory) and 200,000 (BiCGStab: one-barrier tiles of 4 rows
// per thread on an H100 or H200) against the graph path, both solvers, with and without Jacobi.
TEST(LinalgGpuSolvers, LargePoissonAgainstGraph) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  // Under compute-sanitizer (--sanitizer-sizes) Poisson 60 and 61, half the combinations.
  const bool small = molaccel::testing::sanitizer_sizes();
  std::size_t case_number = 0;
  for (std::size_t grid : {std::size_t(small ? 60 : 1000), std::size_t(small ? 61 : 447)}) {
    const auto a = poisson_2d(grid);
    const auto b = ones_rhs(a);
    for (auto precond : {Preconditioner::none, Preconditioner::jacobi})
      for (auto solver : {Solver::bicgstab, Solver::cg}) {
        if (!molaccel::testing::sanitizer_sample(case_number++ + grid, 2)) continue;
        SolverOptions o;
        o.solver = solver;
        o.preconditioner = precond;
        o.tolerance = 1e-6;
        o.max_iterations = 8000;
        o.launch = Launch::graph;
        const auto ref = solve(res, a, b, o);
        o.launch = Launch::automatic;
        const auto r = solve(res, a, b, o);
        SCOPED_TRACE(fmt::format("{} n={} precond {} -> {} ({} vs {} iterations)", to_string(solver), a.rows,
                                 int(precond), r.backend, r.iterations, ref.iterations));
        EXPECT_EQ(ref.status, SolverStatus::converged);
        EXPECT_EQ(r.status, SolverStatus::converged);
        EXPECT_NEAR(r.iterations, ref.iterations, 1 + ref.iterations / 5);
        EXPECT_LE(true_residual(a, b, r.x), o.tolerance);
      }
  }
}

// The iteration cap, b = 0, convergence before the first iteration and breakdowns (no NaN), in
// both precisions, with and without Jacobi, through the generated kernels.
TEST(LinalgGpuSolvers, CapImmediateConvergenceAndBreakdown) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  const auto a = banded(1000, 0.0);
  SolverOptions o;
  SolverResult r;
  for (auto solver : {Solver::cg, Solver::bicgstab}) {
    o.solver = solver;
    r = solve(res, a, std::vector<double>(a.rows, 0.0), o);
    EXPECT_EQ(r.status, SolverStatus::zero_rhs);
    EXPECT_EQ(r.iterations, 0);
    // Just above 1: the initial residual 1 is within it (the device's (b, b) rounds differently).
    o.tolerance = 1.0 + 1e-9;
    r = solve(res, a, ones_rhs(a), o);
    EXPECT_EQ(r.status, SolverStatus::converged);
    EXPECT_EQ(r.iterations, 0);
    EXPECT_EQ(r.residual_history.size(), 1u);
    if (!r.residual_history.empty()) {
      EXPECT_NEAR(r.residual_history[0], 1.0, 1e-12);
    }
    o.tolerance = 1e-12;
    o.max_iterations = 10;
    for (const auto& system : {a, poisson_2d(100)}) {  // poisson 100: one-barrier BiCGStab's tiles
      r = solve(res, system, ones_rhs(system), o);
      SCOPED_TRACE(r.backend);
      EXPECT_EQ(r.status, SolverStatus::max_iterations);
      EXPECT_EQ(r.iterations, 10);
      EXPECT_EQ(r.residual_history.size(), 11u);
    }
    o = SolverOptions{};
  }
  for (auto precision : {Precision::fp64, Precision::fp32})
    for (auto precond : {Preconditioner::none, Preconditioner::jacobi}) {
      o.precision = precision;
      o.preconditioner = precond;
      o.solver = Solver::bicgstab;
      r = solve(res, skew_2x2(), std::vector<double>{1.0, 0.0}, o);
      EXPECT_EQ(r.status, SolverStatus::breakdown_rho) << to_string(r.status);
      EXPECT_EQ(r.residual_history.size(), std::size_t(r.iterations) + 1);
      for (double v : r.x) EXPECT_TRUE(std::isfinite(v));
      o.solver = Solver::cg;
      r = solve(res, skew_2x2(), std::vector<double>{1.0, 0.0}, o);
      EXPECT_EQ(r.status, SolverStatus::breakdown_alpha) << to_string(r.status);
      EXPECT_EQ(r.iterations, 1);
      for (double v : r.x) EXPECT_TRUE(std::isfinite(v));
    }
}

}  // namespace
}  // namespace molaccel::linalg::testing

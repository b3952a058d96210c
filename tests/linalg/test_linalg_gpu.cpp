// Every generated kernel on the GPU against the reference, up to a million elements; the solvers
// in the graph path and the fused kernel against it (the resident kernels:
// test_linalg_gpu_resident.cpp).
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

// ---- The fused kernel (one streaming cooperative kernel, any n) ----

// Against the graph path: the automatic geometry, a few small blocks (many rows per thread), one
// block (the grid barrier with one arrival), both load paths, CSR (the fallback for matrices
// that are not banded). The same status; x valid.
void check_fused(const Resources& res, const HostCsr<double>& a, const std::vector<double>& b,
                 const SolverOptions& base, const std::string& what) {
  SolverOptions o = base;
  o.launch = Launch::graph;
  const auto ref = solve(res, a, b, o);
  const bool cg = o.solver == Solver::cg;
  struct Geometry {
    int blocks, threads, loads;
    bool diagonals;
    std::size_t max_rows;
  };
  const std::vector<Geometry> geometries = {
      {0, 0, 0, true, ~std::size_t(0)},   // automatic
      {8, 128, 0, true, 200000},          // few blocks: many rows per thread
      {1, 128, 0, true, 20000},           // one block
      {0, 256, 1, true, 200000},          // 256-thread blocks, vectors through L2
      {0, 0, 2, true, 200000},            // vectors through L1
      {0, 0, 0, false, ~std::size_t(0)},  // CSR
  };
  const bool qualifies = diagonal_storage(a).has_value();
  static std::size_t calls = 0;  // under compute-sanitizer a third of the geometries per call, rotating
  const std::size_t call = calls++;
  for (std::size_t i = 0; i < geometries.size(); ++i) {
    const auto& g = geometries[i];
    if (a.rows > g.max_rows || !molaccel::testing::sanitizer_sample(i + call, 3)) continue;
    const auto t = tuning_of(a, o, GpuPath::fused, [&](SolverTuning& t) {
      t.blocks = g.blocks;
      t.threads = g.threads;
      if (g.loads != 0) t.fused_loads = g.loads;
      t.diagonals = g.diagonals;
    });
    const auto r = solve_tuned(res, a, b, o, t);
    SCOPED_TRACE(fmt::format("{} {} n={} {} {} | {}x{} loads {} diagonals {} -> {}", to_string(o.solver),
                             what, a.rows, o.preconditioner == Preconditioner::jacobi ? "jacobi" : "none",
                             o.precision == Precision::fp32 ? "fp32" : "fp64", g.blocks, g.threads, g.loads,
                             g.diagonals, r.backend));
    EXPECT_TRUE(contains(r.backend, "fused (streaming")) << r.backend;
    EXPECT_TRUE(contains(r.backend, cg ? "1 barrier/iteration" : "2 barriers/iteration")) << r.backend;
    if (!cg) {
      EXPECT_TRUE(contains(r.backend, g.diagonals && qualifies ? "diagonals" : "CSR")) << r.backend;
    }
    EXPECT_EQ(r.status, ref.status) << to_string(r.status) << " vs " << to_string(ref.status);
    EXPECT_EQ(r.kernels_per_iteration, 1);
    expect_valid_solution(r, a, b, o);
  }
}

TEST(LinalgGpuFused, AgreesWithGraphPath) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  for_each_graph_comparison([&](const HostCsr<double>& a, const std::vector<double>& b,
                                const SolverOptions& o,
                                const std::string& what) { check_fused(res, a, b, o, what); });
  const auto ani = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "ani4.mtx");
  const auto bus = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  SolverOptions o;
  o.max_iterations = 8000;
  check_fused(res, ani, ones_rhs(ani), o, "ani4");
  if (molaccel::testing::sanitizer_sizes()) return;  // 1138_bus takes thousands of iterations
  o.solver = Solver::cg;                             // CG + Jacobi, as the CPU test
  o.preconditioner = Preconditioner::jacobi;
  o.max_iterations = 20000;
  check_fused(res, bus, ones_rhs(bus), o, "1138_bus");
}

// The two load paths (L1 automatic up to 2,000,000 rows, L2 above) and the two matrix storages
// (diagonals where the matrix qualifies, CSR) are the same arithmetic: bit for bit.
TEST(LinalgGpuFused, LoadPathsAndStoragesAgree) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  // Under compute-sanitizer (--sanitizer-sizes) the systems over 20,011 rows are left out.
  const std::vector<NamedSystem> systems = {
      {"poisson 317", poisson_2d(317)},
      {"poisson 1000", poisson_2d(1000)},
      {"banded 10007", banded(10007, 0.3)},
      {"banded 7", banded(7, 0.3)},
      {"random 8 diagonals", random_banded(20011, {-140, -9, -1, 0, 1, 2, 9, 141}, 0.15, 11)},
      {"random 3 diagonals", random_banded(3, {-1, 0, 1}, 0.0, 5)},
  };
  for (const auto& [name, a] : systems) {
    if (a.rows > 20011 && molaccel::testing::sanitizer_sizes()) continue;
    ASSERT_TRUE(diagonal_storage(a).has_value()) << name;
    const auto b = ones_rhs(a);
    for (auto prec : {Precision::fp64, Precision::fp32})
      for (auto precond : {Preconditioner::none, Preconditioner::jacobi}) {
        SolverOptions o;
        o.precision = prec;
        o.preconditioner = precond;
        o.tolerance = prec == Precision::fp64 ? 1e-8 : 1e-4;
        o.max_iterations = a.rows > 200000 ? 200 : 3000;
        o.batch = 64;
        auto run = [&](int loads, bool diagonals, int blocks) {
          return solve_tuned(res, a, b, o, tuning_of(a, o, GpuPath::fused, [&](SolverTuning& t) {
                               t.fused_loads = loads;
                               t.diagonals = diagonals;
                               t.blocks = blocks;
                               t.threads = blocks > 0 ? 128 : 0;
                             }));
        };
        const auto l1 = run(2, true, 0);
        const auto l2 = run(1, true, 0);
        const auto csr = run(1, false, 0);
        SCOPED_TRACE(fmt::format("{} n={} {} {} -> {} ({} iterations, {})", name, a.rows,
                                 prec == Precision::fp32 ? "fp32" : "fp64", int(precond), l1.backend,
                                 l1.iterations, to_string(l1.status)));
        EXPECT_TRUE(contains(l1.backend, "via L1")) << l1.backend;
        EXPECT_TRUE(contains(l2.backend, "diagonals")) << l2.backend;
        EXPECT_TRUE(contains(csr.backend, "CSR")) << csr.backend;
        expect_bitwise_same(l2, l1);
        expect_bitwise_same(csr, l2);
        if (a.rows <= 200000) expect_bitwise_same(run(1, false, 8), run(1, true, 8));  // many rows per thread
        if (a.rows <= 200000 && (prec == Precision::fp64 || a.rows <= 20011)) {
          EXPECT_EQ(l1.status, SolverStatus::converged) << to_string(l1.status);
        }
        expect_valid_solution(l1, a, b, o);
      }
  }
  // A matrix that is not banded stays on CSR.
  for (const auto& a : {random_scattered(molaccel::testing::sanitizer_sizes() ? 3000 : 30000, 4, 3),
                        read_matrix_market(molaccel::testing::data_dir() / "linalg" / "ani4.mtx")}) {
    ASSERT_FALSE(diagonal_storage(a).has_value());
    SolverOptions o;
    o.launch = Launch::fused;
    o.preconditioner = Preconditioner::jacobi;
    o.max_iterations = 8000;
    const auto r = solve(res, a, ones_rhs(a), o);
    EXPECT_TRUE(contains(r.backend, "CSR")) << r.backend;
    EXPECT_EQ(r.status, SolverStatus::converged) << to_string(r.status);
    expect_valid_solution(r, a, ones_rhs(a), o);
  }
}

// A million rows (the automatic path for BiCGStab there; CG asked for) against the graph path.
TEST(LinalgGpuFused, LargePoissonAgainstGraph) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  // Under compute-sanitizer (--sanitizer-sizes) Poisson 60 and 61, half the combinations: the
  // same kernels.
  const bool small = molaccel::testing::sanitizer_sizes();
  std::size_t case_number = 0;
  for (std::size_t grid : {std::size_t(small ? 60 : 1000), std::size_t(small ? 61 : 1001)}) {
    const auto a = poisson_2d(grid);
    const auto b = ones_rhs(a);
    for (auto precond : {Preconditioner::none, Preconditioner::jacobi})
      for (auto solver : {Solver::bicgstab, Solver::cg})
        for (int loads : {0, 1}) {
          if (!molaccel::testing::sanitizer_sample(case_number++ + grid, 2)) continue;
          SolverOptions o;
          o.solver = solver;
          o.preconditioner = precond;
          o.tolerance = 1e-6;
          o.max_iterations = 8000;
          o.launch = Launch::graph;
          const auto ref = solve(res, a, b, o);
          o.launch = Launch::fused;
          o.batch = 64;
          const auto r =
              loads == 0
                  ? solve(res, a, b, o)
                  : solve_tuned(res, a, b, o,
                                tuning_of(a, o, GpuPath::fused, [](SolverTuning& t) { t.fused_loads = 1; }));
          SCOPED_TRACE(fmt::format("{} n={} precond {} loads {} -> {} ({} vs {} iterations)",
                                   to_string(solver), a.rows, int(precond), loads, r.backend, r.iterations,
                                   ref.iterations));
          EXPECT_EQ(ref.status, SolverStatus::converged);
          EXPECT_EQ(r.status, SolverStatus::converged);
          EXPECT_NEAR(r.iterations, ref.iterations, 1 + ref.iterations / 5);
          EXPECT_LE(true_residual(a, b, r.x), o.tolerance);
          EXPECT_EQ(r.host_checks, (r.iterations + 63) / 64);
        }
  }
}

TEST(LinalgGpuFused, BatchesAndCap) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  const auto a = poisson_2d(100);
  const auto b = ones_rhs(a);
  for (auto solver : {Solver::cg, Solver::bicgstab})
    for (int blocks : {0, 8})
      for (auto prec : {Precision::fp64, Precision::fp32}) {
        SolverOptions o;
        o.solver = solver;
        o.precision = prec;
        o.tolerance = prec == Precision::fp64 ? 1e-8 : 1e-4;
        auto run = [&] {
          return solve_tuned(res, a, b, o,
                             tuning_of(a, o, GpuPath::fused, [&](SolverTuning& t) { t.blocks = blocks; }));
        };
        const auto whole = run();
        o.batch = 7;
        const auto batched = run();
        SCOPED_TRACE(
            fmt::format("{} blocks {} fp{}", to_string(solver), blocks, prec == Precision::fp64 ? 64 : 32));
        EXPECT_EQ(batched.status, SolverStatus::converged);
        EXPECT_EQ(batched.host_checks, (whole.iterations + 6) / 7);
        expect_bitwise_same(batched, whole);
        o.max_iterations = 10;
        const auto capped = run();
        EXPECT_EQ(capped.status, SolverStatus::max_iterations);
        EXPECT_EQ(capped.iterations, 10);
        EXPECT_EQ(capped.residual_history.size(), 11u);
      }
}

TEST(LinalgGpuFused, ImmediateConvergenceBreakdownAndErrors) {  // both solvers
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  const auto a = banded(1000, 0.0);
  SolverOptions o;
  o.launch = Launch::fused;
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
    o.tolerance = 1e-8;
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
  // More blocks than can be co-resident: an error, not a hang.
  o = SolverOptions{};
  EXPECT_THROW(solve_tuned(res, a, ones_rhs(a), o,
                           tuning_of(a, o, GpuPath::fused, [](SolverTuning& t) { t.blocks = 1000000; })),
               Error);
}

}  // namespace
}  // namespace molaccel::linalg::testing

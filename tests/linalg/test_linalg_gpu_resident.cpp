// The resident kernels (one cooperative kernel, every thread's rows in registers) against the
// graph path, in every scope (one block, one cluster, a grid) and form the automatic choice takes
// or falls back to.
#include "linalg/diagonal_cases.hpp"
#include "linalg/gpu_solver_cases.hpp"

namespace molaccel::linalg::testing {
namespace {

// A resident geometry: SolverTuning's blocks, threads, scope and form (0: automatic), the matrix
// by diagonals or as CSR, and the largest system it holds.
struct Geometry {
  int blocks, threads, scope;
  std::size_t max_rows;
  int form = 0;
  bool diagonals = true;
};

SolverTuning resident_tuning(const HostCsr<double>& a, const SolverOptions& o, const Geometry& g) {
  return tuning_of(a, o, GpuPath::resident, [&](SolverTuning& t) {
    t.blocks = g.blocks;
    t.threads = g.threads;
    t.scope = g.scope;
    t.form = g.form;
    t.diagonals = g.diagonals;
  });
}

std::string describe(const SolverOptions& o, const Geometry& g) {
  return fmt::format("{} {} {} | {}x{} scope {} form {} {}", to_string(o.solver),
                     o.preconditioner == Preconditioner::jacobi ? "jacobi" : "none",
                     o.precision == Precision::fp32 ? "fp32" : "fp64", g.blocks, g.threads, g.scope, g.form,
                     g.diagonals ? "diagonals" : "CSR");
}

void check_resident(const Resources& res, const HostCsr<double>& a, const std::vector<double>& b,
                    const SolverOptions& base, const std::string& what) {
  SolverOptions o = base;
  o.launch = Launch::graph;
  const auto ref = solve(res, a, b, o);
  const bool banded_matrix = diagonal_storage(a).has_value();
  const std::vector<Geometry> geometries = {
      {0, 0, 0, ~std::size_t(0)},            // automatic
      {0, 0, 0, ~std::size_t(0), 0, false},  // automatic on CSR (general sparse matrices)
      {1, 0, 0, 2048},                       // one block of 512
      {1, 128, 0, 512},                      // one block of 128, 4 rows per thread near the top
      {0, 0, 2, 16384, 0, false},            // one cluster (CG; BiCGStab three barriers on CSR)
      {2, 128, 2, 1024, 0, false},           // a cluster of 2 x 128 (4 rows per thread)
      {4, 128, 2, 1024, 0, false},           // a cluster of 4 x 128 (2 rows per thread)
      {0, 0, 3, ~std::size_t(0)},            // a grid, automatic form (CG; BiCGStab one or two barriers)
      {8, 128, 3, 1024, 0, false},           // a grid of 8 small blocks, automatic form, CSR
      {0, 0, 3, ~std::size_t(0), 2},         // a grid, two barriers, diagonals where they fit
      {0, 0, 3, ~std::size_t(0), 2, false},  // a grid, two barriers, CSR (matrix in shared memory at 4 rows)
      {132, 512, 3, 200000, 2},              // the whole GPU, 1 row per thread
      {8, 128, 3, 1024, 2, false},           // a grid of 8 small blocks
      {0, 256, 3, 200000, 2},                // 256-thread blocks
      {0, 0, 3, ~std::size_t(0), 4},         // a grid, one barrier (banded matrices)
      {8, 128, 3, 2048, 4},                  // 8 x 128, one barrier (3,001 rows: halo windows too large)
  };
  static std::size_t calls = 0;  // under compute-sanitizer a quarter of the geometries per call, rotating
  const std::size_t call = calls++;
  for (std::size_t i = 0; i < geometries.size(); ++i) {
    const auto& g = geometries[i];
    if (a.rows > g.max_rows || !molaccel::testing::sanitizer_sample(i + call, 4)) continue;
    if (g.form != 0 && o.solver == Solver::cg) continue;
    if (g.form == 4 && !banded_matrix) continue;
    o.launch = Launch::resident;
    const auto r = solve_tuned(res, a, b, o, resident_tuning(a, o, g));
    SCOPED_TRACE(fmt::format("{} n={} {} -> {}", what, a.rows, describe(o, g), r.backend));
    EXPECT_TRUE(contains(r.backend, "resident")) << r.backend;
    if (g.form == 2) {
      EXPECT_TRUE(contains(r.backend, "2 barriers/iteration")) << r.backend;
    }
    if (g.form == 4) {
      EXPECT_TRUE(contains(r.backend, "1 barrier/iteration")) << r.backend;
    }
    if (g.scope == 2 && o.solver == Solver::bicgstab) {
      EXPECT_TRUE(contains(r.backend, "3 barriers")) << r.backend;
    }
    expect_close_to_graph(r, ref, a, o);
    expect_valid_solution(r, a, b, o);
  }
}

TEST(LinalgGpuResident, AgreesWithGraphPath) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  for_each_graph_comparison([&](const HostCsr<double>& a, const std::vector<double>& b,
                                const SolverOptions& o,
                                const std::string& what) { check_resident(res, a, b, o, what); });
  if (molaccel::testing::sanitizer_sizes()) return;  // 1138_bus takes thousands of iterations
  // The general sparse matrix of the CLI example: CG with Jacobi, automatic (one block, CSR).
  const auto bus = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  SolverOptions o;
  o.solver = Solver::cg;
  o.preconditioner = Preconditioner::jacobi;
  o.max_iterations = 20000;
  const auto r = solve(res, bus, ones_rhs(bus), o);
  EXPECT_TRUE(contains(r.backend, "resident (")) << r.backend;
  EXPECT_EQ(r.status, SolverStatus::converged) << to_string(r.status);
  expect_valid_solution(r, bus, ones_rhs(bus), o);
}

// Resident BiCGStab with the matrix by diagonals against the same geometry on CSR (two barriers
// in a block or on a grid): the diagonal product adds the CSR row's products in the CSR order
// (NaN padding skipped), so x, the residual history and the status are the same bit for bit.
// Registers hold 8 diagonals at 1 row per thread, 5 at 2; at 4 rows per thread shared or global
// memory, any count; where they do not fit, CSR.
TEST(LinalgGpuResident, DiagonalsAgreeWithCsr) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  const std::vector<NamedSystem> systems = {
      {"poisson 100", poisson_2d(100)},
      {"poisson 317", poisson_2d(317)},
      {"banded 1000", banded(1000, 0.3)},
      {"banded 7", banded(7, 0.3)},
      {"random 8 diagonals 3001", random_banded(3001, {-60, -9, -1, 0, 1, 2, 9, 61}, 0.15, 21)},
      {"random 8 diagonals 20011", random_banded(20011, {-140, -9, -1, 0, 1, 2, 9, 141}, 0.15, 11)},
      {"random 6 diagonals 5000", random_banded(5000, {-71, -1, 0, 1, 3, 71}, 0.15, 7)},
      {"random 3 diagonals", random_banded(3, {-1, 0, 1}, 0.0, 5)},
      {"poisson 50", poisson_2d(50)},    // 8 x 128 grid: 4 rows per thread, values in shared memory
      {"poisson 447", poisson_2d(447)},  // 4 rows per thread, values in shared memory
  };
  const std::vector<Geometry> geometries = {
      {1, 0, 1, 2048, 2},             // one block of 512
      {1, 128, 1, 512, 2},            // one block of 128, up to 4 rows per thread
      {0, 0, 3, ~std::size_t(0), 2},  // a grid
      {8, 128, 3, 4096, 2},           // a grid of 8 x 128, 4 rows per thread
      {132, 512, 3, 200000, 2},       // the whole GPU
  };
  std::size_t case_number = 0;  // under compute-sanitizer: up to 20,000 rows, a third of the cases
  for (const auto& [name, a] : systems) {
    if (a.rows > 20000 && ::molaccel::testing::sanitizer_sizes()) continue;
    const auto layout = diagonal_storage(a);
    ASSERT_TRUE(layout.has_value()) << name;
    const std::size_t dc = layout->offsets.size();
    const auto b = ones_rhs(a);
    for (auto prec : {Precision::fp64, Precision::fp32})
      for (auto precond : {Preconditioner::none, Preconditioner::jacobi})
        for (auto g : geometries) {
          if (a.rows > g.max_rows || !::molaccel::testing::sanitizer_sample(case_number++, 3)) continue;
          SolverOptions o;
          o.precision = prec;
          o.preconditioner = precond;
          o.tolerance = prec == Precision::fp64 ? 1e-8 : 1e-4;
          o.max_iterations = 3000;
          g.diagonals = false;
          const auto csr = solve_tuned(res, a, b, o, resident_tuning(a, o, g));
          g.diagonals = true;
          const auto dia = solve_tuned(res, a, b, o, resident_tuning(a, o, g));
          SCOPED_TRACE(fmt::format("{} n={} {} -> {} ({} iterations, {})", name, a.rows, describe(o, g),
                                   dia.backend, dia.iterations, to_string(dia.status)));
          EXPECT_TRUE(contains(csr.backend, ", CSR")) << csr.backend;
          const bool fits = contains(dia.backend, ", 1 rows/thread")   ? dc <= 8
                            : contains(dia.backend, ", 2 rows/thread") ? dc <= 5
                                                                       : true;
          EXPECT_TRUE(contains(dia.backend, fits ? fmt::format("{} diagonals", dc) : std::string(", CSR")))
              << dia.backend;
          expect_bitwise_same(dia, csr);
          if (prec == Precision::fp64) {
            EXPECT_EQ(dia.status, SolverStatus::converged) << to_string(dia.status);
          }
          expect_valid_solution(dia, a, b, o);
        }
  }
}

// The one-barrier form (grid, matrix by diagonals) against the two-barrier form on the same grid.
// The iterates are the same in exact arithmetic; sigma' = (M A^T r0, p') is summed as four terms
// and (r, r) one pass later, so the rounding differs: the same status, the iteration count within
// 10% + 1, x valid. Stencils on 2-D grids (tiles; constant ones apply their coefficients),
// banded matrices that are not (bands of rows), random values with holes and +-0.
TEST(LinalgGpuResident, OneBarrierForm) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  const std::vector<std::pair<int, int>> seven = {{-1, -1}, {-1, 0}, {0, -1}, {0, 0}, {0, 1}, {1, 0}, {1, 1}};
  const std::vector<std::pair<int, int>> five = {{-1, 0}, {0, -1}, {0, 0}, {0, 1}, {1, 0}};
  const std::vector<StencilTerm> constant_seven = {{-1, -1, -0.5}, {-1, 0, -1.25}, {0, -1, -0.0}, {0, 0, 6.0},
                                                   {0, 1, -1.0},   {1, 0, -1.5},   {1, 1, -0.25}};
  struct OneCase {
    std::string name;
    HostCsr<double> a;
    std::vector<Geometry> shapes;
    int tiles_i = 0, tiles_j = 0;  // forced tiles
  };
  // The one-barrier form runs 1 or 2 rows per thread: a given block count must hold the rows at
  // 2 per thread (n <= blocks x threads x 2). Larger systems (Poisson 447: 199,809 rows) take the
  // two-barrier form when the form is automatic.
  const std::vector<OneCase> cases = {
      {"poisson 100", poisson_2d(100), {{0, 0, 3, 0}, {40, 128, 3, 0}}},
      {"poisson 100 in 5 x 8 tiles", poisson_2d(100), {{40, 0, 3, 0}}, 5, 8},
      {"poisson 317", poisson_2d(317), {{0, 0, 3, 0}, {132, 512, 3, 0}}},
      {"stencil 7 on 97 x 203", random_stencil(97, 203, seven, 0.15, 41), {{0, 0, 3, 0}, {30, 512, 3, 0}}},
      {"stencil 5 on 211 x 89", random_stencil(211, 89, five, 0.15, 43), {{0, 0, 3, 0}, {20, 512, 3, 0}}},
      {"stencil 5 on 5 x 9", random_stencil(5, 9, five, 0.0, 47), {{0, 0, 3, 0}}},
      {"stencil constant 7 on 53 x 167", constant_stencil(53, 167, constant_seven), {{0, 0, 3, 0}}},
      {"banded 1000", banded(1000, 0.3), {{8, 128, 3, 0}}},
      {"random 8 diagonals 20011",
       random_banded(20011, {-140, -9, -1, 0, 1, 2, 9, 141}, 0.15, 11),
       {{132, 128, 3, 0}, {0, 0, 3, 0}}},
      {"random 8 diagonals 3001",
       random_banded(3001, {-60, -9, -1, 0, 1, 2, 9, 61}, 0.15, 21),
       {{8, 256, 3, 0}}},
      {"random 3 diagonals", random_banded(3, {-1, 0, 1}, 0.0, 5), {{0, 0, 3, 0}}},
      {"random 5 diagonals 9001",
       random_banded(9001, {-97, -1, 0, 1, 96}, 0.2, 31),
       {{0, 0, 3, 0}, {12, 512, 3, 0}}},
  };
  // Under compute-sanitizer (--sanitizer-sizes): up to 20,000 rows, a third of the cases.
  std::size_t case_number = 0;
  for (const auto& c : cases) {
    const auto& a = c.a;
    if (a.rows > 20000 && ::molaccel::testing::sanitizer_sizes()) continue;
    const auto b = ones_rhs(a);
    const bool grid = c.name.rfind("poisson", 0) == 0 || c.name.rfind("stencil", 0) == 0;
    for (auto prec : {Precision::fp64, Precision::fp32})
      for (auto precond : {Preconditioner::none, Preconditioner::jacobi})
        for (auto g : c.shapes) {
          if (prec == Precision::fp32 && a.rows > 20000) continue;  // fp32 stalls near 1e-4 on large Poisson
          if (!::molaccel::testing::sanitizer_sample(case_number++, 3)) continue;
          SolverOptions o;
          o.precision = prec;
          o.preconditioner = precond;
          o.tolerance = prec == Precision::fp64 ? 1e-8 : 1e-4;
          o.max_iterations = 4000;
          SolverResult two, one;
          try {
            g.form = 2;
            two = solve_tuned(res, a, b, o, resident_tuning(a, o, g));
            g.form = 4;
            auto t = resident_tuning(a, o, g);
            t.tiles_i = c.tiles_i;
            t.tiles_j = c.tiles_j;
            one = solve_tuned(res, a, b, o, t);
          } catch (const std::exception& e) {
            ADD_FAILURE() << c.name << " " << describe(o, g) << ": " << e.what();
            continue;
          }
          SCOPED_TRACE(fmt::format("{} {} -> {} ({} vs {} iterations, {})", c.name, describe(o, g),
                                   one.backend, one.iterations, two.iterations, to_string(one.status)));
          EXPECT_TRUE(contains(one.backend, "1 barrier/iteration")) << one.backend;
          EXPECT_EQ(contains(one.backend, " grid)"), grid) << one.backend;
          if (c.tiles_i > 0) {
            EXPECT_TRUE(contains(one.backend, "tiles 5 x 8")) << one.backend;
          }
          if (c.name.find("constant") != std::string::npos || c.name.rfind("poisson", 0) == 0) {
            EXPECT_TRUE(contains(one.backend, "constant stencil")) << one.backend;
          }
          EXPECT_TRUE(contains(two.backend, "2 barriers/iteration")) << two.backend;
          EXPECT_EQ(one.status, two.status);
          if (prec == Precision::fp64) {
            EXPECT_EQ(one.status, SolverStatus::converged) << to_string(one.status);
          }
          EXPECT_NEAR(one.iterations, two.iterations, 1 + two.iterations / 10);
          expect_valid_solution(one, a, b, o);
        }
  }
  // Breakdown on a skew-symmetric tridiagonal matrix: the two-barrier form's status, finite x.
  HostCsr<double> skew;
  skew.rows = skew.cols = 300;
  for (std::size_t i = 0; i < skew.rows; ++i) {
    if (i > 0) {
      skew.col_idx.push_back(std::int32_t(i - 1));
      skew.values.push_back(-1.0);
    }
    if (i + 1 < skew.rows) {
      skew.col_idx.push_back(std::int32_t(i + 1));
      skew.values.push_back(1.0);
    }
    skew.row_ptr.push_back(std::int32_t(skew.col_idx.size()));
  }
  ASSERT_TRUE(diagonal_storage(skew).has_value());
  std::vector<double> b(skew.rows, 0.0);
  b[0] = 1.0;
  for (auto prec : {Precision::fp64, Precision::fp32}) {
    SolverOptions o;
    o.precision = prec;
    const auto two = solve_tuned(res, skew, b, o, resident_tuning(skew, o, {0, 0, 3, 0, 2}));
    const auto one = solve_tuned(res, skew, b, o, resident_tuning(skew, o, {0, 0, 3, 0, 4}));
    SCOPED_TRACE(one.backend);
    EXPECT_EQ(one.status, two.status) << to_string(one.status) << " vs " << to_string(two.status);
    EXPECT_EQ(one.iterations, two.iterations);
    for (double v : one.x) EXPECT_TRUE(std::isfinite(v));
  }
}

// Batches of 7 iterations (the state through global memory between launches) give the same x as
// one launch, bit for bit; the cap stops the solve mid-batch.
TEST(LinalgGpuResident, BatchesAndCap) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  // Under compute-sanitizer (--sanitizer-sizes) Poisson 40 for 100 and a third of the cases,
  // rotating (every launch of 7 iterations is a kernel the sanitizer instruments anew).
  const auto poisson = poisson_2d(::molaccel::testing::sanitizer_sizes() ? 40 : 100);
  const auto small = banded(500, 0.3);  // fits one block of 128 (4 rows per thread)
  const auto fifty = poisson_2d(50);    // a grid of 8 x 128: 4 rows per thread
  const std::vector<std::pair<const HostCsr<double>*, Geometry>> runs = {
      {&poisson, {0, 0, 0, 0}},            // automatic (BiCGStab: one barrier on a grid)
      {&small, {1, 128, 1, 0, 2}},         // one block, two barriers
      {&poisson, {0, 0, 2, 0, 0, false}},  // a cluster (BiCGStab: three barriers, CSR)
      {&poisson, {0, 0, 3, 0, 2}},         // a grid, two barriers
      {&fifty, {8, 128, 3, 0, 2, false}},  // a grid of 4 rows per thread, matrix in shared memory
      {&poisson, {0, 0, 3, 0, 4}},         // a grid, one barrier
  };
  for (auto solver : {Solver::cg, Solver::bicgstab})
    for (auto precond : {Preconditioner::none, Preconditioner::jacobi})
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& [a, g] = runs[i];
        if (solver == Solver::cg && g.form != 0) continue;
        if (!::molaccel::testing::sanitizer_sample(i + 2 * int(solver) + int(precond), 3)) continue;
        SolverOptions o;
        o.solver = solver;
        o.preconditioner = precond;
        const auto b = ones_rhs(*a);
        const auto whole = solve_tuned(res, *a, b, o, resident_tuning(*a, o, g));
        o.batch = 7;
        const auto batched = solve_tuned(res, *a, b, o, resident_tuning(*a, o, g));
        SCOPED_TRACE(fmt::format("n={} {} -> {}", a->rows, describe(o, g), batched.backend));
        EXPECT_EQ(batched.status, SolverStatus::converged);
        EXPECT_EQ(batched.host_checks, (whole.iterations + 6) / 7);
        expect_bitwise_same(batched, whole);
        const int cap = std::min(10, whole.iterations - 1);  // stops before convergence
        o.max_iterations = cap;
        const auto capped = solve_tuned(res, *a, b, o, resident_tuning(*a, o, g));
        EXPECT_EQ(capped.status, SolverStatus::max_iterations);
        EXPECT_EQ(capped.iterations, cap);
        ASSERT_EQ(capped.residual_history.size(), std::size_t(cap) + 1);
        EXPECT_EQ(capped.residual_history, std::vector<double>(whole.residual_history.begin(),
                                                               whole.residual_history.begin() + cap + 1));
      }
}

TEST(LinalgGpuResident, ImmediateConvergenceAndBreakdown) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  const auto a = banded(1000, 0.0);
  SolverOptions o;
  o.launch = Launch::resident;
  for (auto solver : {Solver::cg, Solver::bicgstab}) {
    o.solver = solver;
    // b = 0: x = 0 without iterating.
    auto r = solve(res, a, std::vector<double>(a.rows, 0.0), o);
    EXPECT_EQ(r.status, SolverStatus::zero_rhs);
    EXPECT_EQ(r.iterations, 0);
    for (double v : r.x) EXPECT_EQ(v, 0.0);
    // Tolerance 1: ||r0|| / ||b|| = 1 is not above it, so the kernel's initial state stops.
    o.tolerance = 1.0;
    r = solve(res, a, ones_rhs(a), o);
    EXPECT_EQ(r.status, SolverStatus::converged);
    EXPECT_EQ(r.iterations, 0);
    // (b, b) summed on the device in another order than the host's: equal to rounding.
    ASSERT_EQ(r.residual_history.size(), 1u);
    EXPECT_NEAR(r.residual_history[0], 1.0, 1e-12);
    o.tolerance = 1e-8;
  }
  // Breakdowns of the skew-symmetric 2 x 2 matrix in one block, one cluster and on a grid.
  const auto skew = skew_2x2();
  for (const auto& g : std::vector<Geometry>{{0, 0, 0, 0}, {0, 0, 2, 0, 0, false}, {0, 0, 3, 0, 2}})
    for (auto precision : {Precision::fp64, Precision::fp32}) {
      SolverOptions s;
      s.precision = precision;
      s.solver = Solver::bicgstab;
      auto r = solve_tuned(res, skew, std::vector<double>{1.0, 0.0}, s, resident_tuning(skew, s, g));
      SCOPED_TRACE(r.backend);
      EXPECT_EQ(r.status, SolverStatus::breakdown_rho);
      for (double v : r.x) EXPECT_TRUE(std::isfinite(v));
      s.solver = Solver::cg;
      r = solve_tuned(res, skew, std::vector<double>{1.0, 0.0}, s, resident_tuning(skew, s, g));
      EXPECT_EQ(r.status, SolverStatus::breakdown_alpha);
      EXPECT_EQ(r.iterations, 1);
      for (double v : r.x) EXPECT_TRUE(std::isfinite(v));
    }
}

// What the automatic path picks (the headline inputs), its fallbacks, and the errors of a tuning
// that cannot run.
TEST(LinalgGpuResident, AutomaticChoice) {
  MOLACCEL_REQUIRE_GPU();
  const Resources res = first_gpu();
  struct Expected {
    std::size_t grid;
    std::string bicgstab, cg;  // parts of the backend description
  };
  for (const auto& e : std::vector<Expected>{
           {32, "block, 2 barriers/iteration", "resident (1 blocks of 512, 2 rows/thread, block"},
           {100, "256, 1 rows/thread, grid, 1 barrier/iteration", "cluster"},
           {316, "grid, 1 barrier/iteration", "grid, 3 barriers"},
           {600, "fused (streaming", "graph x8"}}) {
    const auto a = poisson_2d(e.grid);
    const auto b = ones_rhs(a);
    SolverOptions o;
    o.max_iterations = 30;
    const auto r = solve(res, a, b, o);
    EXPECT_TRUE(contains(r.backend, e.bicgstab)) << r.backend;
    if (e.grid < 600) {
      EXPECT_TRUE(contains(r.backend, "5 diagonals")) << r.backend;
    }
    o.solver = Solver::cg;
    const auto rc = solve(res, a, b, o);
    EXPECT_TRUE(contains(rc.backend, e.cg)) << rc.backend;
  }
  // A band too wide for the one-barrier form's windows: two barriers (automatic), an error when
  // the one-barrier form is asked for.
  const auto wide = random_banded(60001, {-30000, -1, 0, 1, 30000}, 0.0, 3);
  ASSERT_TRUE(diagonal_storage(wide).has_value());
  const auto bw = ones_rhs(wide);
  SolverOptions w;
  w.launch = Launch::resident;
  w.max_iterations = 5;
  const auto fallback = solve(res, wide, bw, w);
  EXPECT_TRUE(contains(fallback.backend, "2 barriers/iteration")) << fallback.backend;
  EXPECT_THROW(solve_tuned(res, wide, bw, w, resident_tuning(wide, w, {0, 0, 3, 0, 4})), Error);
  // Too large for one block; the one-barrier form in a cluster; the three-barrier form on a grid;
  // the two-barrier form in a cluster: clear errors, not wrong answers.
  const auto a = poisson_2d(100);
  const auto b = ones_rhs(a);
  SolverOptions o;
  EXPECT_THROW(solve_tuned(res, a, b, o, resident_tuning(a, o, {1, 0, 0, 0})), Error);
  EXPECT_THROW(solve_tuned(res, a, b, o, resident_tuning(a, o, {0, 0, 2, 0, 4})), Error);
  EXPECT_THROW(solve_tuned(res, a, b, o, resident_tuning(a, o, {0, 0, 3, 0, 3})), Error);
  EXPECT_THROW(solve_tuned(res, a, b, o, resident_tuning(a, o, {0, 0, 2, 0, 2})), Error);
  // Asked for explicitly, the resident path does not fall back: more rows than the GPU's threads.
  const auto big = poisson_2d(1500);
  o.launch = Launch::resident;
  EXPECT_THROW(solve(res, big, ones_rhs(big), o), Error);
}

}  // namespace
}  // namespace molaccel::linalg::testing

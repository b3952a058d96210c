// Programs on the GPU: the generated persistent kernel, in every form, against the host executor
// (random programs, the methods) and the methods against solve()'s CG and BiCGStab.
#include <gtest/gtest.h>

#include <cmath>

#include "linalg/diagonal.hpp"
#include "linalg/program/program_cuda.hpp"
#include "linalg/program/program_solve.hpp"
#include "linalg/program_cases.hpp"
#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"
#include "residual.hpp"
#include "testing/test_arguments.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg {
namespace {

// Every form of the emitter (program_cuda.hpp), where it holds the rows (the tile form first);
// diagonals = 1 asks for
// the matrix by diagonals (where it qualifies), grid_width = 1 besides for its constant stencil;
// the next three exchange the product operands in one block's shared memory (the automatic
// choice where they fit), the last three in one cluster's distributed shared memory (blocks as
// the rows need).
constexpr program::KernelShape kStencil(bool block, int rows) {
  program::KernelShape s{block, rows, 1};
  s.grid_width = 1;
  return s;
}
// The tile form: 8 x 8 tiles on a grid, or one block whose tile is the whole grid (up to 64 x 64).
constexpr program::KernelShape kTiled(bool block, int size) {
  return testing::with_tiles(kStencil(block, 1), size, size);
}
// clang-format off
constexpr program::KernelShape kShapes[] = {
    kTiled(false, 8), kTiled(true, 64),
    {false, 0},    {false, 1},    {false, 2},   {false, 4},         {true, 1},
    {true, 2},     {true, 4},     {true, 4, 1}, {false, 0, 1},      {false, 1, 1},
    {false, 4, 1}, {true, 2, 1},  kStencil(false, 0), kStencil(false, 1), kStencil(true, 4),
    testing::with_shared_exchange({true, 2}), testing::with_shared_exchange({true, 4, 1}),
    testing::with_shared_exchange(kStencil(true, 4)),
    testing::with_cluster({false, 1}, 1), testing::with_cluster({false, 2, 1}, 1),
    testing::with_cluster(kStencil(false, 4), 1)};
// clang-format on

bool is_constant_stencil(const HostCsr<double>& a) {
  const auto layout = diagonal_storage(a);
  const auto grid = layout ? diagonal_grid_of(*layout, a.rows) : std::nullopt;
  return grid && diagonal_constant_of(*layout, *grid, a.rows);
}

bool holds(program::KernelShape shape, const HostCsr<double>& a) {
  if (shape.tile_h > 0)  // one tile of at most 2,048 cells in a block; at most 625 tiles on a grid
    return is_constant_stencil(a) && a.rows <= (shape.block ? 2048 : 40000);
  if (shape.cluster_blocks > 0 && a.rows > 16 * 512 * std::size_t(shape.rows_per_thread)) return false;
  return (!shape.block || a.rows <= 512 * std::size_t(shape.rows_per_thread)) &&
         (shape.diagonals == 0 || diagonal_storage(a)) && (shape.grid_width == 0 || is_constant_stencil(a));
}

TEST(LinalgProgramGpu, RandomProgramsMatchTheHostExecutor) {
  MOLACCEL_REQUIRE_GPU();
  // 20 seeds: a kernel is compiled per program and form (about 1 s of NVRTC each, 150 s for 30
  // seeds on an H100), and with four forms per seed in rotation each form still runs
  // on a few programs.
  // Then 8 with products nested one level (seeds 21-28: nested seeds 1-8).
  for (std::uint64_t seed = 1; seed <= 28; ++seed) {
    std::mt19937_64 rng(seed);
    // One block's rows (some above 1,024: two to four rows per thread), and for some seeds many
    // blocks.
    const std::size_t n = seed % 5 == 0   ? 20000 + rng() % 20000
                          : seed % 5 == 1 ? 1025 + rng() % 1023
                                          : 1 + rng() % 700;
    int iterations = 0;
    const auto rp = seed > 20 ? testing::random_program(seed - 20, iterations, 2)
                              : testing::random_program(seed, iterations);
    // Every third a band (by diagonals, with holes), every seventh a constant stencil.
    const HostCsr<double> a = seed % 7 == 0   ? testing::stencil_matrix()
                              : seed % 3 == 0 ? testing::banded_matrix(n, rng)
                                              : testing::random_matrix(n, rng);
    const ProgramInputs in = testing::random_inputs(rp->program, a, iterations, rng);
    const auto host = run_program_on_host(rp->program, in);
    std::vector<ProgramResult> runs{run_program_on_gpu(rp->program, in)};
    // Beside the automatic form, four that hold the rows, in turn from seed % forms (a kernel
    // compiled per form and program: all of them would take minutes).
    const std::size_t forms = std::size(kShapes);
    for (std::size_t i = 0; i < forms && runs.size() < 5; ++i)
      if (const auto& shape = kShapes[(seed + i) % forms]; holds(shape, a))
        runs.push_back(program::run_shaped_on_gpu(rp->program, in, shape));
    for (const auto& gpu : runs) {
      SCOPED_TRACE(fmt::format("seed {} n {}: {}", seed, a.rows, gpu.kernel));
      ASSERT_EQ(gpu.iterations, host.iterations);
      // Reductions summed per block and then over blocks (another order than the host's row
      // order: 1e-16 relative per sum), amplified by at most a few steps of tanh/products of
      // values in [-1, 1]: 1e-9 absolute.
      for (const auto& [name, v] : host.vectors)
        for (std::size_t r = 0; r < v.size(); ++r)
          ASSERT_NEAR(gpu.vectors.at(name)[r], v[r], 1e-9) << name << "[" << r << "]";
      for (const auto& [name, v] : host.scalars) ASSERT_NEAR(gpu.scalars.at(name), v, 1e-9) << name;
    }
  }
}

using testing::true_residual;

void check_method(const HostCsr<double>& a, int method, double iteration_slack, double residual_slack,
                  std::size_t same_history) {
  const double tol = 1e-8;
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  const Program p = testing::emulated_methods()[std::size_t(method)];
  const ProgramInputs in = testing::method_inputs(a, b, tol, 20000);
  const auto gpu = run_program_on_gpu(p, in);
  const auto host = run_program_on_host(p, in);
  SolverOptions o;
  o.solver = method == 1 || method >= 3 ? Solver::bicgstab : Solver::cg;
  o.tolerance = tol;
  o.max_iterations = 20000;
  const auto plain = solve(Resources::create({}), a, b, o);
  SCOPED_TRACE(fmt::format("{} n {}: gpu {} host {} solve() {} ({})", p.name(), a.rows, gpu.iterations,
                           host.iterations, plain.iterations, plain.backend));
  EXPECT_EQ(gpu.status, "converged");
  EXPECT_LE(true_residual(a, b, gpu.vectors.at("x")), tol * residual_slack);
  EXPECT_NEAR(gpu.iterations, host.iterations, std::max(2.0, iteration_slack * host.iterations));
  EXPECT_NEAR(gpu.iterations, plain.iterations, std::max(2.0, iteration_slack * plain.iterations));
  for (std::size_t k = 0; k < same_history && k < gpu.monitor_history[0].size(); ++k)
    EXPECT_NEAR(gpu.monitor_history[0][k], host.monitor_history[0][k], 1e-6 * host.monitor_history[0][k])
        << k;
}

// Tolerances as in test_program.cpp (the host executor against solve()).
TEST(LinalgProgramGpu, MethodsSolvePoisson) {
  MOLACCEL_REQUIRE_GPU();
  for (std::size_t grid : {24, 200})
    for (int m = 0; m < 5; ++m) check_method(poisson_2d(grid), m, 0.05, 1.0, 10);
}

// Every form on one problem (40 x 40 = 1,600 rows: four rows per thread in one block; CSR and by
// diagonals): the same
// iterations as the host executor (the sums' order aside) and the true residual.
TEST(LinalgProgramGpu, MethodsInEveryForm) {
  MOLACCEL_REQUIRE_GPU();
  const auto a = poisson_2d(40);
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  const ProgramInputs in = testing::method_inputs(a, b, 1e-8, 2000);
  for (const Program& p : testing::emulated_methods()) {
    const auto host = run_program_on_host(p, in);
    for (const auto& shape : kShapes) {
      if (!holds(shape, a)) continue;
      const auto gpu = program::run_shaped_on_gpu(p, in, shape);
      SCOPED_TRACE(p.name() + ": " + gpu.kernel);
      EXPECT_EQ(gpu.status, "converged");
      EXPECT_NEAR(gpu.iterations, host.iterations, std::max(2.0, 0.05 * host.iterations));
      EXPECT_LE(true_residual(a, b, gpu.vectors.at("x")), 1e-8);
    }
  }
}

TEST(LinalgProgramGpu, MethodsSolve1138Bus) {
  MOLACCEL_REQUIRE_GPU();
  // Thousands of iterations per method; MethodsInEveryForm runs the same kernels (every CSR form)
  // under the sanitizer.
  if (molaccel::testing::sanitizer_sizes())
    GTEST_SKIP() << "left to MethodsInEveryForm under --sanitizer-sizes";
  const auto a = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  check_method(a, 0, 0.05, 10.0, 10);
  check_method(a, 1, 0.25, 10.0, 5);  // BiCGStab's residuals part by 1e-5 from the 7th on
  check_method(a, 2, 0.45, 10.0, 10);
  // Pipelined BiCGStab's count moves with the order of every sum (measured on an H100: 2,178 on
  // the GPU, 2,487 on the host executor, 2,976 for solve()'s GPU BiCGStab when it was written): 35 %.
  check_method(a, 3, 0.35, 10.0, 5);
  check_method(a, 4, 0.35, 10.0, 5);  // one-barrier BiCGStab: BiCGStab's recurrences, sums reordered
}

// Launch::generated on a GPU: CG and BiCGStab, Jacobi too, through one generated kernel per solve
// (Poisson with an uneven diagonal, 10,000 rows: the cluster form on sm_90) against solve()'s
// automatic launch, which on a GPU runs the same programs (no constant stencil here): the same
// iteration counts, the true residual, the program named in the backend. The generated kernels
// against the graph path: test_linalg_gpu.cpp.
TEST(LinalgProgramGpu, GeneratedLaunchThroughSolve) {
  MOLACCEL_REQUIRE_GPU();
  const auto a = testing::uneven_diagonal(poisson_2d(100));
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  const Resources gpu = Resources::create({});
  for (const Solver solver : {Solver::cg, Solver::bicgstab})
    for (const Preconditioner pre : {Preconditioner::none, Preconditioner::jacobi}) {
      SolverOptions o;
      o.solver = solver;
      o.preconditioner = pre;
      const auto plain = solve(gpu, a, b, o);
      o.launch = Launch::generated;
      const auto got = solve(gpu, a, b, o);
      SCOPED_TRACE(got.backend);
      ASSERT_EQ(got.status, SolverStatus::converged);
      EXPECT_EQ(got.residual_history.size(), std::size_t(got.iterations) + 1);
      EXPECT_LE(true_residual(a, b, got.x), 10 * o.tolerance);
      EXPECT_NEAR(got.iterations, plain.iterations, std::max(2.0, 0.05 * plain.iterations));
      EXPECT_NE(got.backend.find(pre == Preconditioner::jacobi ? "generated jacobi_" : "generated "),
                std::string::npos);
    }
}

// The iterations done, polled from the running kernel (CG on Poisson 1000², 1e6 rows, held to
// its cap of 20,000 iterations by a zero tolerance: about 0.5 s on an H200, so the poll runs a few
// times and its window doubles past its first 1,024 rows): non-decreasing counts within the
// run's, and the same solve, bit for bit, as without the poll.
TEST(LinalgProgramGpu, ProgressFromTheRunningKernel) {
  MOLACCEL_REQUIRE_GPU();
  const auto a = poisson_2d(1000);
  const std::vector<double> b(a.rows, 1.0);
  SolverOptions o;
  o.tolerance = 0;
  o.max_iterations = 20000;
  const Program p = program_of(o);
  const auto inputs = *program_inputs(a, b, o);
  std::vector<int> heard;
  const auto polled = program::run_on_gpu(p, inputs, 0, nullptr, [&](int done) { heard.push_back(done); });
  const auto plain = run_program_on_gpu(p, inputs);
  EXPECT_EQ(polled.iterations, o.max_iterations);
  EXPECT_EQ(polled.vectors.at("x"), plain.vectors.at("x"));
  EXPECT_EQ(polled.monitor_history, plain.monitor_history);
  ASSERT_GE(heard.size(), 2u) << polled.seconds << " s";
  EXPECT_GT(heard.back(), 1024);
  for (std::size_t i = 0; i < heard.size(); ++i) {
    EXPECT_LE(heard[i], polled.iterations);
    if (i > 0) {
      EXPECT_GE(heard[i], heard[i - 1]);
    }
  }
}

}  // namespace
}  // namespace molaccel::linalg

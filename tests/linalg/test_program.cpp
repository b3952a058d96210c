// Programs: the planner's barriers and renamings, random programs on the host executor against
// the reference evaluated statement by statement, and CG / BiCGStab / pipelined CG as programs
// with residuals recomputed independently.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "linalg/program/program_cuda.hpp"
#include "linalg/program/program_plan.hpp"
#include "linalg/program/program_solve.hpp"
#include "linalg/program_cases.hpp"
#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"
#include "residual.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg {
namespace {

using program::plan_program;

std::vector<int> steps_of(const program::Segment& s) {
  std::vector<int> out;
  for (const auto& item : s.body) out.push_back(item.step);
  return out;
}

TEST(LinalgProgramPlan, BarrierAfterProductOfWrittenVector) {
  Program p("t");
  auto u = p.vector("u"), v = p.vector("v"), w = p.vector("w");
  auto a = p.matrix("A");
  p.step(v = prod(a, u)).step(w = prod(a, v));  // w needs v at other rows: a barrier
  const auto plan = plan_program(p);
  ASSERT_EQ(plan.barriers_per_iteration(), 2);
  EXPECT_EQ(steps_of(plan.iteration.segments[0]), std::vector<int>{0});
  EXPECT_EQ(steps_of(plan.iteration.segments[1]), std::vector<int>{1});
  EXPECT_TRUE(plan.iteration.segments[0].renamed.empty());
}

TEST(LinalgProgramPlan, RowWiseReadsNeedNoBarrier) {
  Program p("t");
  auto u = p.vector("u"), v = p.vector("v"), w = p.vector("w");
  auto a = p.matrix("A");
  auto s = p.scalar("s");
  p.step(v = prod(a, u)).step(w = v + s * u).step(v = w - v);  // own-row reads only
  EXPECT_EQ(plan_program(p).barriers_per_iteration(), 1);
}

TEST(LinalgProgramPlan, ReductionReadByVectorNeedsBarrier) {
  Program p("t");
  auto u = p.vector("u"), v = p.vector("v");
  auto s = p.scalar("s"), t = p.scalar("t"), c = p.scalar("c");
  p.step(s = inner_prod(u, u));  // deferred: known after the barrier
  p.step(t = 2.0 * s);           // reads a deferred scalar: deferred too, no barrier
  p.step(c = c + 1.0);           // independent scalar: in place
  p.step(v = t * u);             // a row-wise read of t: barrier
  const auto plan = plan_program(p);
  ASSERT_EQ(plan.barriers_per_iteration(), 2);
  const auto& first = plan.iteration.segments[0];
  EXPECT_EQ(steps_of(first), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(first.deferred, (std::vector<int>{0, 1}));
  EXPECT_TRUE(first.body[2].scalars_in_place);
  EXPECT_EQ(first.reductions.size(), 1u);
}

TEST(LinalgProgramPlan, ScalarWrittenAfterDeferredReadIsDeferred) {
  Program p("t");
  auto u = p.vector("u");
  auto s = p.scalar("s"), t = p.scalar("t");
  p.step(s = t * inner_prod(u, u));  // reads t after the barrier
  p.step(t = 3.0 + 0.0 * t);         // must not overtake it
  const auto plan = plan_program(p);
  ASSERT_EQ(plan.barriers_per_iteration(), 1);
  EXPECT_EQ(plan.iteration.segments[0].deferred, (std::vector<int>{0, 1}));
}

TEST(LinalgProgramPlan, ProductOfOwnTargetIsRenamed) {
  Program p("t");
  auto v = p.vector("v"), w = p.vector("w");
  auto a = p.matrix("A");
  p.step(v = prod(a, v)).step(w = v);  // v read at other rows, then written: two buffers
  const auto plan = plan_program(p);
  ASSERT_EQ(plan.barriers_per_iteration(), 1);
  EXPECT_EQ(plan.iteration.segments[0].renamed, std::set<int>{0});
}

// Barriers per iteration of the methods (docs/linalg.md, "Programs").
TEST(LinalgProgramPlan, MethodsBarriersPerIteration) {
  const auto cg = cg_program();
  const auto cg_plan = plan_program(cg);
  SCOPED_TRACE(program::describe(cg, cg_plan));
  EXPECT_EQ(cg_plan.barriers_per_iteration(), 2);
  EXPECT_EQ(cg_plan.iteration.segments[0].renamed, std::set<int>{cg.index_of("p")});

  const auto bicg = bicgstab_program();
  const auto bicg_plan = plan_program(bicg);
  SCOPED_TRACE(program::describe(bicg, bicg_plan));
  EXPECT_EQ(bicg_plan.barriers_per_iteration(), 3);
  EXPECT_EQ(bicg_plan.iteration.segments[2].renamed, (std::set<int>{bicg.index_of("p"), bicg.index_of("v")}));

  const auto pcg = pipelined_cg_program();
  const auto pcg_plan = plan_program(pcg);
  SCOPED_TRACE(program::describe(pcg, pcg_plan));
  EXPECT_EQ(pcg_plan.barriers_per_iteration(), 1);
  EXPECT_EQ(pcg_plan.iteration.segments[0].renamed, std::set<int>{pcg.index_of("w")});
  EXPECT_EQ(pcg_plan.iteration.segments[0].reductions.size(), 2u);  // gamma and delta together

  const auto pbicg = pipelined_bicgstab_program();
  const auto pbicg_plan = plan_program(pbicg);
  SCOPED_TRACE(program::describe(pbicg, pbicg_plan));
  EXPECT_EQ(pbicg_plan.barriers_per_iteration(), 2);
  EXPECT_EQ(pbicg_plan.iteration.segments[0].renamed, std::set<int>{pbicg.index_of("z")});
  EXPECT_EQ(pbicg_plan.iteration.segments[1].reductions.size(), 5u);  // rho, (r, r), the next alpha's three

  const auto obicg = one_barrier_bicgstab_program();
  const auto obicg_plan = plan_program(obicg);
  SCOPED_TRACE(program::describe(obicg, obicg_plan));
  EXPECT_EQ(obicg_plan.barriers_per_iteration(), 1);
  EXPECT_EQ(
      obicg_plan.iteration.segments[0].renamed,
      (std::set<int>{obicg.index_of("p"), obicg.index_of("v"), obicg.index_of("s"), obicg.index_of("t")}));
  EXPECT_EQ(obicg_plan.iteration.segments[0].reductions.size(), 9u);
}

// A transposed product is computed from the inputs (a scatter) unless they give it.
TEST(LinalgProgram, TransposedProductOfAnInput) {
  Program p("t");
  auto u = p.vector("u"), h = p.vector("h"), w = p.vector("w");
  auto a = p.matrix("A");
  p.transposed_product(h, u).step(w = 2.0 * h);
  HostCsr<double> m;  // [[1 2] [0 3]]: A^T (1, 1) = (1, 5)
  m.rows = m.cols = 2;
  m.row_ptr = {0, 2, 3};
  m.col_idx = {0, 1, 1};
  m.values = {1.0, 2.0, 3.0};
  ProgramInputs in;
  in.matrix = &m;
  in.vectors["u"] = {1.0, 1.0};
  in.max_iterations = 1;
  EXPECT_EQ(run_program_on_host(p, in).vectors.at("w"), (std::vector<double>{2.0, 10.0}));
  EXPECT_EQ(run_program(Resources::cpu(1), p, in).vectors.at("w"), (std::vector<double>{2.0, 10.0}));
  in.vectors["h"] = {0.5, 0.5};  // given: used as it is
  EXPECT_EQ(run_program_on_host(p, in).vectors.at("w"), (std::vector<double>{1.0, 1.0}));
  EXPECT_THROW(p.transposed_product(h, Assignable(p.scalar("s").node())), Error);
}

// The textbook orders (no recomputed p or s): one barrier more per product of a fresh vector.
TEST(LinalgProgramPlan, TextbookOrdersNeedMoreBarriers) {
  Program cg("textbook_cg");
  auto x = cg.vector("x"), r = cg.vector("r"), p = cg.vector("p"), q = cg.vector("q");
  auto a = cg.matrix("A");
  auto rr = cg.scalar("rr"), alpha = cg.scalar("alpha"), beta = cg.scalar("beta"), rn = cg.scalar("rn");
  cg.step(q = prod(a, p)).step(alpha = rr / inner_prod(p, q)).step(x = x + alpha * p).step(r = r - alpha * q);
  cg.step(rn = inner_prod(r, r)).step(beta = rn / rr).step(rr = rn).step(p = r + beta * p);
  EXPECT_EQ(plan_program(cg).barriers_per_iteration(), 3);

  Program bi("textbook_bicgstab");
  auto bx = bi.vector("x"), br = bi.vector("r"), r0 = bi.vector("r0"), bp = bi.vector("p"),
       v = bi.vector("v"), s = bi.vector("s"), t = bi.vector("t");
  auto ba = bi.matrix("A");
  auto rho = bi.scalar("rho"), al = bi.scalar("alpha"), om = bi.scalar("omega"), be = bi.scalar("beta"),
       rho2 = bi.scalar("rho_new");
  bi.step(v = prod(ba, bp)).step(al = rho / inner_prod(r0, v)).step(s = br - al * v).step(t = prod(ba, s));
  bi.step(om = inner_prod(t, s) / inner_prod(t, t)).step({bx = bx + al * bp + om * s, br = s - om * t});
  bi.step(rho2 = inner_prod(r0, br)).step(be = (rho2 / rho) * (al / om)).step(rho = rho2);
  bi.step(bp = br + be * (bp - om * v));
  EXPECT_EQ(plan_program(bi).barriers_per_iteration(), 5);
}

TEST(LinalgProgram, RejectsWhatThePlannerCannotTake) {
  Program p("t");
  auto u = p.vector("u"), v = p.vector("v");
  auto a = p.matrix("A");
  auto s = p.scalar("s");
  EXPECT_THROW(p.step(v = inner_prod(u, u) * u), Error);                 // reduction in a vector statement
  EXPECT_THROW(p.step(v = prod(a, prod(a, prod(a, u)))), Error);         // products nested twice
  EXPECT_THROW(p.step(s = inner_prod(u, prod(a, prod(a, u)))), Error);   // nested in a reduction
  EXPECT_NO_THROW(p.step(v = prod(a, u - prod(a, u))));                  // once, in a vector statement
  EXPECT_THROW(p.step(s = inner_prod(u, inner_prod(u, u) * u)), Error);  // nested reductions
  EXPECT_THROW(p.step({v = u, v = 2.0 * u}), Error);                     // one target twice
  EXPECT_THROW(p.scalar("s"), Error);                                    // declared twice
  EXPECT_THROW(p.matrix("B"), Error);                                    // one matrix
  SymbolicVector<double, 7> foreign;
  EXPECT_THROW(p.step(v = foreign), Error);
}

// ---------------------------------------------------------------------------------------------
// Random programs against the reference, one step at a time.
// ---------------------------------------------------------------------------------------------
// `products`: levels of products (2: nested, a product inside a product's operand).
void check_random_programs(int products, std::uint64_t seeds, int min_segments, int min_renamed) {
  int segments = 0, renamed = 0, nested = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    std::mt19937_64 rng(seed);
    const std::size_t n = 1 + rng() % 150;
    int iterations = 0;
    const auto rp = testing::random_program(seed, iterations, products);
    const HostCsr<double> a = testing::random_matrix(n, rng);
    const ProgramInputs in = testing::random_inputs(rp->program, a, iterations, rng);
    std::vector<ReferenceOperand> ref(rp->program.symbols().size());
    for (std::size_t i = 0; i < rp->program.symbols().size(); ++i) {
      const auto& sym = rp->program.symbols()[i];
      if (sym.kind == NodeKind::vector) {
        ref[i].values = in.vectors.at(sym.name);
        ref[i].rows = n;
        ref[i].cols = 1;
      } else if (sym.kind == NodeKind::device_scalar) {
        ref[i].values = {in.scalars.at(sym.name)};
      } else {
        ref[i].csr = &a;
        ref[i].rows = ref[i].cols = n;
      }
    }
    const auto plan = plan_program(rp->program);
    segments += plan.barriers_per_iteration();
    for (const auto* steps : {&rp->program.setup_steps(), &rp->program.loop_steps()})
      for (const auto& step : *steps)
        for (const auto& st : step)
          program::visit(st.value(), [&](const NodePtr& m) {
            if (m->kind == NodeKind::matrix_product)
              program::visit(m->children[1],
                             [&](const NodePtr& k) { nested += k->kind == NodeKind::matrix_product; });
          });
    for (const auto& s : plan.iteration.segments) renamed += int(s.renamed.size());
    const ProgramResult got = run_program_on_host(rp->program, in);
    for (const auto& step : rp->program.setup_steps()) reference_execute(step, ref);
    for (int it = 0; it < iterations; ++it)
      for (const auto& step : rp->program.loop_steps()) reference_execute(step, ref);

    SCOPED_TRACE(fmt::format("seed {} n {}\n{}", seed, n, program::describe(rp->program, plan)));
    ASSERT_EQ(got.iterations, iterations);
    // Same tree, same order of every sum (products and inner products by increasing row):
    // the two evaluations differ only where the compiler contracts differently, far below 1e-12.
    for (std::size_t i = 0; i < rp->program.symbols().size(); ++i) {
      const auto& sym = rp->program.symbols()[i];
      if (sym.kind == NodeKind::vector) {
        const auto& v = got.vectors.at(sym.name);
        for (std::size_t r = 0; r < n; ++r)
          ASSERT_NEAR(v[r], ref[i].values[r], 1e-12) << sym.name << "[" << r << "]";
      } else if (sym.kind == NodeKind::device_scalar) {
        ASSERT_NEAR(got.scalars.at(sym.name), ref[i].values[0], 1e-12) << sym.name;
      }
    }
  }
  // The programs exercise barriers and renamed buffers, not only single segments.
  EXPECT_GT(segments, min_segments);
  EXPECT_GT(renamed, min_renamed);
  if (products > 1) {
    EXPECT_GT(nested, int(seeds) / 2);  // products inside products' operands
  } else {
    EXPECT_EQ(nested, 0);
  }
}

TEST(LinalgProgram, RandomProgramsMatchTheReference) {
  check_random_programs(1, 60, 100, 10);
}

// Products nested one level (the operand read at other rows recomputes the inner product there).
TEST(LinalgProgram, RandomNestedProgramsMatchTheReference) {
  check_random_programs(2, 40, 60, 6);
}

// The host executor does notice a missing barrier (so the test above checks the planner).
TEST(LinalgProgram, HostExecutorExposesAMissingBarrier) {
  Program p("t");
  auto u = p.vector("u"), v = p.vector("v"), w = p.vector("w");
  auto a = p.matrix("A");
  p.step(v = 2.0 * u).step(w = prod(a, v));
  const auto m = poisson_2d(5);
  ProgramInputs in;
  in.matrix = &m;
  in.vectors["u"] = std::vector<double>(m.rows, 1.0);
  in.max_iterations = 1;
  auto plan = plan_program(p);
  ASSERT_EQ(plan.barriers_per_iteration(), 2);
  const auto good = program::run_planned_on_host(p, plan, in);
  plan.iteration.segments[0].body.push_back(plan.iteration.segments[1].body[0]);
  plan.iteration.segments.pop_back();
  const auto bad = program::run_planned_on_host(p, plan, in);
  EXPECT_EQ(good.vectors.at("w"), multiply(m, std::vector<double>(m.rows, 2.0)));
  EXPECT_NE(bad.vectors.at("w"), good.vectors.at("w"));
}

// ---------------------------------------------------------------------------------------------
// The methods.
// ---------------------------------------------------------------------------------------------
using testing::true_residual;

ProgramResult run_method(const Program& p, const HostCsr<double>& a, const std::vector<double>& b, double tol,
                         int max_iterations) {
  return run_program_on_host(p, testing::method_inputs(a, b, tol, max_iterations));
}

struct MethodCase {
  const char* matrix;
  int program;  // 0 cg, 1 bicgstab, 2 pipelined cg, 3 pipelined bicgstab, 4 one-barrier bicgstab
  double true_residual_slack;
  double iteration_slack;                                // fraction of the hand-written solver's count
  std::size_t same_history;                              // leading residuals that agree to 1e-6 relative
  Preconditioner preconditioner = Preconditioner::none;  // cg, bicgstab, one-barrier bicgstab
};

void check_method(const HostCsr<double>& a, const MethodCase& c) {
  const double tol = 1e-8;
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  const auto f64 = ValueType::f64;
  const Program p = c.program == 0   ? cg_program(f64, c.preconditioner)
                    : c.program == 1 ? bicgstab_program(f64, c.preconditioner)
                    : c.program == 2 ? pipelined_cg_program()
                    : c.program == 3 ? pipelined_bicgstab_program()
                                     : one_barrier_bicgstab_program(f64, c.preconditioner);
  SCOPED_TRACE(fmt::format("{} on {}", p.name(), c.matrix));
  const auto got = run_method(p, a, b, tol, 20000);
  SolverOptions o;
  o.solver = c.program == 1 || c.program >= 3 ? Solver::bicgstab : Solver::cg;
  o.tolerance = tol;
  o.max_iterations = 20000;
  o.preconditioner = c.preconditioner;
  const auto hand = solve(Resources::cpu(2), a, b, o);
  ASSERT_EQ(hand.status, SolverStatus::converged);
  EXPECT_EQ(got.status, "converged") << got.iterations;
  ASSERT_EQ(got.monitor_history[0].size(), std::size_t(got.iterations) + 1);
  EXPECT_LE(got.monitor_history[0].back(), tol);
  EXPECT_LE(true_residual(a, b, got.vectors.at("x")), tol * c.true_residual_slack);
  // The same recurrences as solve()'s (pipelined CG: CG's in exact arithmetic), rounded in
  // another order (sums in another order: 1e-16 relative), which the iterations amplify: the
  // first residuals agree to 1e-6 relative ... One-barrier BiCGStab records the residual of the
  // iteration before (`lag`): its history starts with ||b|| twice and it runs one more iteration.
  const std::size_t lag = c.program == 4 ? 1 : 0;
  if (lag) {
    EXPECT_EQ(got.monitor_history[0][0], got.monitor_history[0][1]);
  }
  for (std::size_t k = 0;
       k < c.same_history && k < hand.residual_history.size() && k + lag < got.monitor_history[0].size(); ++k)
    EXPECT_NEAR(got.monitor_history[0][k + lag], hand.residual_history[k], 1e-6 * hand.residual_history[k])
        << k;
  // ... and the iteration counts stay close (c.iteration_slack says how close).
  const double slack = std::max(2.0, c.iteration_slack * hand.iterations);
  EXPECT_NEAR(got.iterations, hand.iterations + int(lag), slack) << "hand-written: " << hand.iterations;
}

// Poisson (condition number about 240 at 24 x 24): every count within 5 %.
TEST(LinalgProgram, MethodsSolvePoisson) {
  const auto a = poisson_2d(24);
  for (int m = 0; m < 5; ++m) check_method(a, {"poisson_2d(24)", m, 1.0, 0.05, 20});
}

// 1138_bus (condition number about 1e7, unpreconditioned: thousands of iterations): CG's count
// within 5 %. BiCGStab's irregular convergence and pipelined CG's extra recurrences make their
// counts depend on rounding far more: measured 3,101 against 2,635 (BiCGStab) and 2,959 against
// CG's 2,152 (pipelined CG, whose delayed convergence in floating point is the known cost of
// pipelining: docs/linalg.md), hence 25 % and 45 %; BiCGStab's residuals part from solve()'s
// by 1e-5 relative from its 7th iteration on. The true residual: 10x the tolerance.
TEST(LinalgProgram, MethodsSolve1138Bus) {
  const auto a = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  check_method(a, {"1138_bus", 0, 10.0, 0.05, 20});
  check_method(a, {"1138_bus", 1, 10.0, 0.25, 5});
  check_method(a, {"1138_bus", 2, 10.0, 0.45, 20});
  // Pipelined BiCGStab: 2,487 against 2,635, its true residual 1.6e-8 at 1e-8 (the drift of its
  // recurrences); its first residuals agree as BiCGStab's do.
  check_method(a, {"1138_bus", 3, 10.0, 0.25, 5});
  check_method(a, {"1138_bus", 4, 10.0, 0.25, 5});
}

// Jacobi preconditioning as solve() applies it (CG: z = M r; BiCGStab on the right), on Poisson
// with an uneven diagonal (4 to 6: M scales the rows unevenly; 27 and 17 iterations, as solve())
// and, CG, on 1138_bus, whose diagonal spans orders of magnitude (936 against solve()'s 933).
// BiCGStab with Jacobi on 1138_bus: solve()'s breaks down (rho = 0) after 286 iterations, the
// program converges after 3,290 (checked by its true residual); one-barrier BiCGStab with Jacobi
// did not converge there in 20,000 (docs/linalg.md).
TEST(LinalgProgram, JacobiMethodsSolveAsSolveDoes) {
  const auto jacobi = Preconditioner::jacobi;
  const auto uneven = testing::uneven_diagonal(poisson_2d(24));
  for (int m : {0, 1, 4}) check_method(uneven, {"uneven poisson_2d(24)", m, 1.0, 0.05, 20, jacobi});
  const auto bus = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  check_method(bus, {"1138_bus", 0, 10.0, 0.05, 20, jacobi});
  const std::vector<double> b = multiply(bus, std::vector<double>(bus.rows, 1.0));
  const auto got = run_method(bicgstab_program(ValueType::f64, jacobi), bus, b, 1e-8, 5000);
  EXPECT_EQ(got.status, "converged");
  EXPECT_LE(true_residual(bus, b, got.vectors.at("x")), 1e-7);
  // The preconditioned programs keep their methods' barriers.
  EXPECT_EQ(plan_program(cg_program(ValueType::f64, jacobi)).barriers_per_iteration(), 2);
  EXPECT_EQ(plan_program(bicgstab_program(ValueType::f64, jacobi)).barriers_per_iteration(), 3);
  EXPECT_EQ(plan_program(one_barrier_bicgstab_program(ValueType::f64, jacobi)).barriers_per_iteration(), 1);
}

// A CPU worker tells the progress callback each iteration as it ends: 1, 2, ... up to the count
// the result reports (the iteration cap here, and a converged solve's own count).
TEST(LinalgProgram, ProgressAfterEachIterationOnTheCpu) {
  const auto a = poisson_2d(20);
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  WorkerInfo cpu;
  cpu.cpu_threads = 2;
  for (const double tolerance : {0.0, 1e-6}) {
    SolverOptions o;
    o.tolerance = tolerance;
    o.max_iterations = 50;
    std::vector<int> heard;
    const auto run = run_program_on_worker(cpu, program_of(o), *program_inputs(a, b, o), nullptr,
                                           [&](int done) { heard.push_back(done); });
    SCOPED_TRACE(tolerance);
    EXPECT_EQ(run.status, tolerance == 0 ? "iteration limit" : "converged");
    ASSERT_EQ(heard.size(), std::size_t(run.iterations));
    for (std::size_t i = 0; i < heard.size(); ++i) EXPECT_EQ(heard[i], int(i) + 1);
  }
}

// The inverse diagonal comes from the matrix unless the inputs give it.
TEST(LinalgProgram, InverseDiagonalOfTheMatrix) {
  Program p("d");
  auto d = p.vector("d"), w = p.vector("w");
  auto a = p.matrix("A");
  p.inverse_diagonal(d).step(w = 2.0 * d);
  HostCsr<double> m;  // [[2 1 0] [0 0 3] [1 0 -4]]: no diagonal entry in row 1
  m.rows = m.cols = 3;
  m.row_ptr = {0, 2, 3, 5};
  m.col_idx = {0, 1, 2, 0, 2};
  m.values = {2.0, 1.0, 3.0, 1.0, -4.0};
  ProgramInputs in;
  in.matrix = &m;
  in.max_iterations = 1;
  const std::vector<double> want{1.0, 2.0, -0.5};
  EXPECT_EQ(run_program_on_host(p, in).vectors.at("w"), want);
  EXPECT_EQ(run_program(Resources::cpu(1), p, in).vectors.at("w"), want);
  in.vectors["d"] = {1.0, 1.0, 1.0};  // given: used as it is
  EXPECT_EQ(run_program_on_host(p, in).vectors.at("w"), (std::vector<double>{2.0, 2.0, 2.0}));
  EXPECT_THROW(p.inverse_diagonal(Assignable(p.scalar("s").node())), Error);
}

TEST(LinalgProgram, BreakdownStopsTheLoop) {
  HostCsr<double> zero;
  zero.rows = zero.cols = 1;
  zero.row_ptr = {0, 1};
  zero.col_idx = {0};
  zero.values = {0.0};
  for (const auto& p : {cg_program(), pipelined_cg_program()}) {
    const auto got = run_method(p, zero, {1.0}, 1e-8, 10);
    EXPECT_EQ(got.status, "breakdown ((p, Ap) = 0)") << p.name();
    EXPECT_TRUE(std::isfinite(got.vectors.at("x")[0]));
  }
  HostCsr<double> skew;  // (r0, A r0) = 0: BiCGStab's first alpha is 0
  skew.rows = skew.cols = 2;
  skew.row_ptr = {0, 1, 2};
  skew.col_idx = {1, 0};
  skew.values = {1.0, -1.0};
  for (const auto& p : {bicgstab_program(), one_barrier_bicgstab_program()}) {
    const auto got = run_method(p, skew, {1.0, 0.0}, 1e-8, 10);
    EXPECT_EQ(got.status, "breakdown (rho = 0)") << p.name();  // solve()'s name for alpha = 0 in BiCGStab
  }
}

// ---------------------------------------------------------------------------------------------
// CUDA emission: NVRTC compiles the generated kernel (no GPU needed).
// ---------------------------------------------------------------------------------------------
// Every form of the emitter (program_cuda.hpp: KernelShape), as run_program_on_gpu picks them;
// from the eighth on they read the matrix by diagonals (2-D Poisson's offsets), from the
// eleventh on as its constant stencil (the last two in the tile form).
constexpr program::KernelShape kStencil32{
    false, 1, 5, {-32, -1, 0, 1, 32}, 32, 32, {-1, 0, 0, 0, 1}, {0, -1, 0, 1, 0}, {-1, -1, 4, -1, -1}};
// The tile form of `s`: tiles of h x w, rows per thread in a block or on a grid.
constexpr program::KernelShape tiles(program::KernelShape s, bool block, int rows, int h, int w) {
  s.block = block;
  s.rows_per_thread = rows;
  return testing::with_tiles(s, h, w);
}
constexpr program::KernelShape clustered(program::KernelShape s, int rows, int blocks) {
  s.rows_per_thread = rows;
  return testing::with_cluster(s, blocks);
}
constexpr program::KernelShape kShapes[] = {
    {false, 0},
    {false, 1},
    {false, 2},
    {false, 4},
    {true, 1},
    {true, 2},
    {true, 4},
    {false, 0, 5, {-32, -1, 0, 1, 32}},
    {false, 4, 5, {-32, -1, 0, 1, 32}},
    {true, 2, 5, {-32, -1, 0, 1, 32}},
    kStencil32,
    {true, 2, kStencil32.diagonals, kStencil32.offsets, 32, 32, kStencil32.grid_a, kStencil32.grid_b,
     kStencil32.coef},
    testing::with_shared_exchange({true, 4}),
    testing::with_shared_exchange({true, 2, kStencil32.diagonals, kStencil32.offsets, 32, 32,
                                   kStencil32.grid_a, kStencil32.grid_b, kStencil32.coef}),
    tiles(kStencil32, false, 4, 8, 8),
    tiles(kStencil32, true, 2, 32, 32),
    clustered({false, 0}, 2, 10),
    clustered(kStencil32, 4, 16)};

void expect_compiles(const Program& p, program::KernelShape shape) {
  JitRequest request;
  request.source = program::generate_program_cuda(p, program::plan_program(p), shape);
  request.program_name = program::kernel_name(p) + ".cu";
  request.kernel_names = {program::kernel_name(p)};
  request.arch = "sm_90";
  SCOPED_TRACE(fmt::format("{}: block {}, {} rows per thread, {} diagonals", p.name(), shape.block,
                           shape.rows_per_thread, shape.diagonals));
  try {
    EXPECT_FALSE(default_jit_cache().compile(request).cubin.empty());
  } catch (const NvrtcError& e) {
    ADD_FAILURE() << e.what() << "\n" << e.log() << "\n" << request.source;
  }
}

TEST(LinalgProgramCuda, NvrtcCompilesTheMethods) {
  MOLACCEL_REQUIRE_NVRTC();
  // fp64 in every form, fp32 (the element type T) in three.
  for (const auto& shape : kShapes)
    for (const Program& p :
         {cg_program(), bicgstab_program(), pipelined_cg_program(), pipelined_bicgstab_program()})
      expect_compiles(p, shape);
  for (const auto& shape : {kShapes[0], kShapes[5], kShapes[10]})
    for (const Program& p : {cg_program(ValueType::f32), bicgstab_program(ValueType::f32)})
      expect_compiles(p, shape);
  // Jacobi (the vector d inside products) streamed, in a block, as a stencil, in a cluster.
  for (const auto& shape : {kShapes[0], kShapes[5], kShapes[10], kShapes[17]})
    for (const Program& p : {cg_program(ValueType::f64, Preconditioner::jacobi),
                             bicgstab_program(ValueType::f64, Preconditioner::jacobi)})
      expect_compiles(p, shape);
}

TEST(LinalgProgramCuda, NvrtcCompilesRandomPrograms) {
  MOLACCEL_REQUIRE_NVRTC();
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    int iterations = 0;
    const auto rp = testing::random_program(seed, iterations);
    // The kinds of form (streamed, registers on a grid, one block, the shared exchange; CSR, by
    // diagonals): the methods above cover every rows-per-thread count.
    for (const auto& shape :
         {kShapes[0], kShapes[2], kShapes[5], kShapes[7], kShapes[9], kShapes[11], kShapes[12], kShapes[16]})
      expect_compiles(rp->program, shape);
  }
}

// The building blocks on their own (grid_blocks.cuh, program_blocks.cuh) with a kernel calling
// each; test_program_gpu.cpp runs it.
TEST(LinalgProgramCuda, NvrtcCompilesTheBuildingBlocks) {
  MOLACCEL_REQUIRE_NVRTC();
  JitRequest request;
  request.source = program::program_cuda_blocks() + R"(
extern "C" __global__ void use(double* partials, double* out, unsigned long long* counter) {
  __shared__ double part[64], totals[2];
  mp_stage(1.0, part, 0);
  mp_stage(2.0, part, 1);
  __syncthreads();
  mp_publish_block_sums(part, 2, partials);
  molaccel_grid_barrier(counter);
  mp_gather_totals(partials, 2, totals);
  __syncthreads();
  out[0] = mp_block_total(part, 0) + totals[1] + mp_safe_div(1.0, 0.0);
})";
  request.program_name = "program_blocks.cu";
  request.kernel_names = {"use"};
  request.arch = "sm_90";
  try {
    EXPECT_FALSE(default_jit_cache().compile(request).cubin.empty());
  } catch (const NvrtcError& e) {
    ADD_FAILURE() << e.what() << "\n" << e.log();
  }
}

// The forms differ where they should: a block barrier and no grid barrier in one block;
// registers only in the resident kind, and there stores only of the vectors a product reads.
TEST(LinalgProgramCuda, EachFormHasItsBarrierAndRegisters) {
  const auto p = cg_program();
  const auto plan = program::plan_program(p);
  const std::string block = program::generate_program_cuda(p, plan, {true, 2});
  const std::string grid = program::generate_program_cuda(p, plan, {false, 1});
  const std::string streamed = program::generate_program_cuda(p, plan, {false, 0});
  EXPECT_EQ(block.find("molaccel_grid_barrier(counter)"), std::string::npos);
  EXPECT_NE(block.find("__launch_bounds__(512)"), std::string::npos);
  EXPECT_NE(block.find("mp_block_total("), std::string::npos);
  EXPECT_NE(grid.find("mp_gather_totals("), std::string::npos);
  EXPECT_NE(grid.find("T rv0[1]"), std::string::npos);
  EXPECT_NE(block.find("T rv0[2]"), std::string::npos);
  EXPECT_EQ(streamed.find("T rv0["), std::string::npos);
  // CG's q (vector 3) and x (vector 0) are read at their own rows only: never stored in the loop.
  const std::string loop = grid.substr(grid.find("for (;; ++it)"));
  EXPECT_EQ(loop.find("v3_f[row] ="), std::string::npos);
  EXPECT_EQ(loop.find("v0_f[row] ="), std::string::npos);
  EXPECT_NE(loop.find("v1_f[row] ="), std::string::npos);  // r: the product reads it
  // By diagonals: no CSR arrays; the resident kind keeps the values in registers.
  const std::string dia = program::generate_program_cuda(p, plan, kShapes[8]);
  EXPECT_EQ(dia.find("row_ptr[row]"), std::string::npos);
  EXPECT_NE(dia.find("row + (-32)"), std::string::npos);
  EXPECT_NE(dia.find("T av4[4]"), std::string::npos);
  // A constant stencil: no values read, the coefficients in the source.
  const std::string stencil = program::generate_program_cuda(p, plan, kStencil32);
  EXPECT_EQ(stencil.find("values["), std::string::npos);
  EXPECT_NE(stencil.find("(double)(T)(4.0)"), std::string::npos);
  // One block with the shared exchange: CG's product operands r and p in shared memory, p with
  // two buffers (renamed: written by the step whose product reads it), r with one; the form
  // without the exchange has none.
  EXPECT_EQ(program::exchange_buffers(p, plan), 3u);
  const std::string exchanged = program::generate_program_cuda(p, plan, kShapes[12]);
  EXPECT_NE(exchanged.find("extern __shared__ T mp_exchange[];"), std::string::npos);
  const std::string exchanged_loop = exchanged.substr(exchanged.find("for (;; ++it)"));
  EXPECT_NE(exchanged_loop.find("T* v1_f = mp_exchange + "), std::string::npos);  // r
  EXPECT_NE(exchanged_loop.find("T* v2_b = mp_exchange + "), std::string::npos);  // p's second buffer
  EXPECT_EQ(exchanged_loop.find("v1_f = vectors"), std::string::npos);
  EXPECT_EQ(block.find("mp_exchange"), std::string::npos);
  EXPECT_THROW(program::generate_program_cuda(p, plan, testing::with_shared_exchange({false, 1})), Error);
  // One cluster (10 blocks of 512 threads, 2 rows each): the operands in each block's shared
  // memory (RB = 1,024 rows), read at other rows from the block that owns them, the cluster
  // barrier, no grid barrier and no partials.
  const std::string cluster = program::generate_program_cuda(p, plan, kShapes[16]);
  const std::string cluster_loop = cluster.substr(cluster.find("for (;; ++it)"));
  EXPECT_NE(cluster.find("extern __shared__ T mp_exchange[];  // exchange_buffers() x 1024"),
            std::string::npos);
  EXPECT_NE(cluster_loop.find("mp_map(v1_f + ("), std::string::npos);
  EXPECT_NE(cluster_loop.find("% 1024, (unsigned)(("), std::string::npos);
  EXPECT_NE(cluster_loop.find("v1_f[(row - mp_first)] ="), std::string::npos);
  EXPECT_NE(cluster_loop.find("mp_push_block_sums("), std::string::npos);
  EXPECT_NE(cluster_loop.find("mp_cluster_barrier();"), std::string::npos);
  EXPECT_EQ(cluster.find("molaccel_grid_barrier(counter)"), std::string::npos);
  EXPECT_EQ(cluster_loop.find("partials"), std::string::npos);
  EXPECT_NE(cluster.find("const long long row_stride = 512;"), std::string::npos);
  EXPECT_THROW(program::generate_program_cuda(p, plan, testing::with_cluster({true, 1}, 2)), Error);
  EXPECT_THROW(program::generate_program_cuda(p, plan, testing::with_cluster({false, 0}, 2)), Error);
  EXPECT_THROW(program::generate_program_cuda(p, plan, testing::with_cluster({false, 1}, 17)), Error);
}

TEST(LinalgProgramCuda, OneKernelWithOneBarrierPerSegment) {
  const auto p = pipelined_cg_program();
  const std::string src = program_cuda_source(p);
  std::size_t barriers = 0;
  for (std::size_t at = src.find("molaccel_grid_barrier(counter)"); at != std::string::npos;
       at = src.find("molaccel_grid_barrier(counter)", at + 1))
    ++barriers;
  const auto plan = program::plan_program(p);
  EXPECT_EQ(barriers, plan.setup.segments.size() + plan.iteration.segments.size());
  EXPECT_NE(src.find("extern \"C\" __global__ void __launch_bounds__(256) molaccel_program_pipelined_cg("),
            std::string::npos);
}

}  // namespace
}  // namespace molaccel::linalg

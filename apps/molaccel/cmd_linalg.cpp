// `molaccel linalg solve` (alias `molaccel solve`): CG / BiCGStab on a Matrix Market system or
// the seed's 2-D Poisson system, and the linalg step of `molaccel demo`.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "command.hpp"
#include "molaccel/linalg.hpp"
#include "opencl_device.hpp"
#include "runtime/resource_limits.hpp"

namespace molaccel::cli {
namespace {

namespace la = molaccel::linalg;

struct SolveOptions {
  std::string matrix;
  std::size_t poisson = 0;
  std::string rhs;
  std::string solver = "bicgstab";
  std::string precond = "none";
  std::string precision = "fp64";
  std::string launch = "auto";
  double tol = 1e-8;
  int max_iter = 1000;
  int batch = 0;
  std::string output;
};

double true_relative_residual(const la::HostCsr<double>& a, const std::vector<double>& b,
                              const std::vector<double>& x) {
  const auto ax = la::multiply(a, x);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += (b[i] - ax[i]) * (b[i] - ax[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

la::SolverOptions to_solver_options(const SolveOptions& o) {
  la::SolverOptions s;
  s.solver = o.solver == "cg"                   ? la::Solver::cg
             : o.solver == "pipelined-cg"       ? la::Solver::pipelined_cg
             : o.solver == "pipelined-bicgstab" ? la::Solver::pipelined_bicgstab
                                                : la::Solver::bicgstab;
  s.preconditioner = o.precond == "jacobi" ? la::Preconditioner::jacobi : la::Preconditioner::none;
  s.precision = o.precision == "fp32" ? la::Precision::fp32 : la::Precision::fp64;
  s.launch = la::launch_from_string(o.launch).value_or(la::Launch::automatic);  // checked by CLI11
  s.tolerance = o.tol;
  s.max_iterations = o.max_iter;
  s.batch = o.batch;
  return s;
}

nlohmann::json describe(const la::SolverResult& r, double true_residual) {
  return {{"status", std::string(la::to_string(r.status))},
          {"iterations", r.iterations},
          {"relative_residual", r.relative_residual},
          {"true_relative_residual", true_residual},
          {"seconds", r.seconds},
          {"seconds_per_iteration", r.seconds_per_iteration},
          {"kernels_per_iteration", r.kernels_per_iteration},
          {"host_checks", r.host_checks},
          {"backend", r.backend},
          {"residual_history", r.residual_history}};
}

int run_solve(RunContext& ctx, const SolveOptions& o) {
  const double started = now_seconds();
  if (o.matrix.empty() == (o.poisson == 0))
    throw InputError("solve", 0, "give either a matrix file (A.mtx) or --poisson N");
  if (!o.rhs.empty() && o.poisson)
    throw InputError("--rhs", 0, "--rhs applies to a matrix file, not to --poisson");
  if (o.poisson) {
    // Per unknown: 5 CSR entries (12 bytes each), a row pointer, b, x and the solvers' work vectors
    // (8 doubles at most, BiCGStab); x is written as up to 25 characters a line.
    const double n = double(o.poisson) * double(o.poisson);
    const std::string smaller = "use a smaller --poisson N (the unknowns grow as N^2)";
    detail::require_memory(n * (5 * 12 + 4 + 10 * 8),
                           fmt::format("--poisson {0}: a {0} x {0} system", o.poisson), smaller);
    if (!o.output.empty()) detail::require_output_space(o.output, n * 25, smaller);
  }
  la::HostCsr<double> a = o.poisson ? la::poisson_2d(o.poisson) : la::read_matrix_market(o.matrix);
  const std::string system = o.poisson ? fmt::format("2-D Poisson {0} x {0}", o.poisson) : o.matrix;
  if (a.rows != a.cols)
    throw InputError(
        o.matrix, 0,
        fmt::format("the matrix is {} x {}; a linear system needs a square matrix", a.rows, a.cols));
  std::vector<double> b;
  if (!o.rhs.empty()) {
    b = la::read_matrix_market_vector(o.rhs);
    if (b.size() != a.rows)
      throw InputError(o.rhs, 0,
                       fmt::format("right-hand side has {} entries, the matrix {} rows", b.size(), a.rows));
  } else {
    b = la::multiply(a, std::vector<double>(a.rows, 1.0));  // exact solution: all ones
  }
  const auto options = to_solver_options(o);
  const double read = now_seconds();
  // `--device opencl[:N]`: the generated kernels in OpenCL C on that device (never chosen by auto).
  const std::optional<int> opencl_device = parse_opencl_device(ctx.common.device);
  std::optional<Resources> resources;
  if (!opencl_device) resources = ctx.resources();  // the devices start: the "start" stage
  const double ready = now_seconds();
  const auto result =
      opencl_device ? la::opencl::solve(*opencl_device, a, b, options) : la::solve(*resources, a, b, options);
  const double solved = now_seconds();
  const double true_residual = true_relative_residual(a, b, result.x);
  const double checked = now_seconds();
  std::FILE* out = ctx.summary(o.output);
  if (out) {
    std::fprintf(out, "system:     %s (n = %zu, %zu nonzeros)\n", system.c_str(), a.rows, a.nnz());
    std::fprintf(out, "solver:     %s, preconditioner %s, %s, tolerance %.3g\n",
                 std::string(la::to_string(options.solver)).c_str(), o.precond.c_str(), o.precision.c_str(),
                 o.tol);
    std::fprintf(out, "backend:    %s\n", result.backend.c_str());
    std::fprintf(out, "result:     %s after %d iterations\n",
                 std::string(la::to_string(result.status)).c_str(), result.iterations);
    std::fprintf(out, "residual:   %.3e (recurrence), %.3e (recomputed ||b - Ax|| / ||b||)\n",
                 result.relative_residual, true_residual);
    std::fprintf(out, "time:       %.3f ms, %.2f us per iteration", result.seconds * 1e3,
                 result.seconds_per_iteration * 1e6);
    if (result.kernels_per_iteration)
      std::fprintf(out, " (%d kernels per iteration)", result.kernels_per_iteration);
    std::fprintf(out, "\n");
  }
  if (!o.output.empty()) {
    la::write_matrix_market_vector(
        o.output, result.x,
        fmt::format("molaccel solve: {} {}, {} iterations, residual {:.3e}", system,
                    la::to_string(options.solver), result.iterations, true_residual));
    if (out) std::fprintf(out, "solution:   %s\n", o.output.c_str());
  }
  const double written = now_seconds();
  ctx.report["system"] = {{"name", system}, {"n", a.rows}, {"nnz", a.nnz()}};
  ctx.report["solve"] = describe(result, true_residual);
  // "compute": the solve, its kernels' compile or load from the cache and the uploads included
  // (solve.seconds: the iterations alone); "check": the recomputed residual.
  ctx.report["total_seconds"] = written - started;
  ctx.report["stages"] = {{"read", read - started},
                          {"start", ready - read},
                          {"compute", solved - ready},
                          {"check", checked - solved},
                          {"write", written - checked}};
  // 5, not 2: 2 is every command's usage error (README, exit codes).
  constexpr int kNotConverged = 5;
  return result.status == la::SolverStatus::converged || result.status == la::SolverStatus::zero_rhs
             ? 0
             : kNotConverged;
}

Action setup_solve(CLI::App& app, CommonOptions& common) {
  auto o = std::make_shared<SolveOptions>();
  app.footer(
      "Conventions: x starts at 0; without --rhs, b = A * ones, so the exact solution is all ones. The "
      "iteration stops when ||r|| / ||b|| <= --tol (r from the solver's recurrence; the recomputed "
      "||b - Ax|| / ||b|| is printed too) or after --max-iter iterations. Symmetric Matrix Market files are "
      "expanded, duplicate entries summed. x is written as a Matrix Market array (n x 1). Exit status: 0 "
      "converged, 5 not converged (iteration limit or breakdown: rho = 0, omega = 0, (p, Ap) = 0; x is "
      "still written), 1 bad input, 2 usage, 3 device unavailable, 4 other errors. "
      "Launch modes: auto runs every method on a GPU as its program of the kernel generator, one generated "
      "kernel for the whole solve (bicgstab on a constant stencil, such as --poisson, as one-barrier "
      "BiCGStab where its tiles fit the GPU), and on the CPU as fused loops; generated runs the program on "
      "any device (on the CPU one fused loop per step); graph (cg, bicgstab) replays --batch iterations of "
      "the generator's kernels as one CUDA graph per host check. The first solve of a new kernel form "
      "compiles it (a fraction of a second; later runs load it from the kernel cache). pipelined-cg (Ghysels "
      "& Vanroose, one grid-wide barrier per iteration) and pipelined-bicgstab (two) "
      "are programs of the kernel generator: on a GPU one generated kernel runs the whole solve, on the CPU "
      "one fused loop per step; their recurrences drift more than the plain methods' in floating point, so "
      "they may take more iterations to reach a tight --tol (docs/linalg.md).");
  app.add_option("MATRIX", o->matrix, "Matrix Market file (coordinate or array; real, integer or pattern)")
      ->check(CLI::ExistingFile);
  app.add_option("--poisson", o->poisson, "Solve the 2-D Poisson system on an N x N grid instead (n = N^2)")
      ->check(CLI::Range(std::size_t(1), std::size_t(20000)));
  app.add_option("--rhs", o->rhs, "Right-hand side b (Matrix Market n x 1); default b = A * ones")
      ->check(CLI::ExistingFile);
  app.add_option("--solver", o->solver,
                 "cg (symmetric positive definite), bicgstab, or their pipelined forms pipelined-cg and "
                 "pipelined-bicgstab (generated programs: fewer grid-wide barriers, unpreconditioned)")
      ->check(CLI::IsMember({"cg", "bicgstab", "pipelined-cg", "pipelined-bicgstab"}))
      ->default_val("bicgstab");
  app.add_option("--precond", o->precond, "none or jacobi")
      ->check(CLI::IsMember({"none", "jacobi"}))
      ->default_val("none");
  app.add_option("--precision", o->precision, "fp32 or fp64")
      ->check(CLI::IsMember({"fp32", "fp64"}))
      ->default_val("fp64");
  app.add_option("--tol", o->tol, "Relative residual to stop at")
      ->check(CLI::Range(0.0, 1.0))
      ->default_val(1e-8);
  app.add_option("--max-iter", o->max_iter, "Iteration cap")
      ->check(CLI::Range(0, 100000000))
      ->default_val(1000);
  app.add_option("--launch", o->launch,
                 "auto (a GPU: one generated kernel per solve; the CPU: fused loops), generated (the "
                 "method's program on any device) or graph (cg, bicgstab: the generator's kernels of a "
                 "batch of iterations as one CUDA graph)")
      ->check(CLI::IsMember({"auto", "graph", "generated"}))
      ->default_val("auto");
  app.add_option("--batch", o->batch, "--launch graph: iterations per host check (0 = automatic)")
      ->check(CLI::Range(0, 4096));
  app.add_option("-o,--output", o->output,
                 "Write x here (Matrix Market array; gzip or Zstandard when the name ends in .gz or .zst)");
  common.add_device_options(app);
  allow_opencl_device(app);
  return [o](RunContext& ctx) { return run_solve(ctx, *o); };
}

const bool solve_registered = register_command({
    .group = "linalg",
    .name = "solve",
    .purpose = "Solve A x = b with CG or BiCGStab (Matrix Market file or 2-D Poisson)",
    .example = "molaccel linalg solve data/linalg/1138_bus.mtx --solver cg --precond jacobi -o x.mtx",
    .setup = setup_solve,
    .order = 40,
});

// `molaccel solve`: the same command at the top level (its name before the engine groups).
const bool solve_alias_registered = register_command({
    .group = "",
    .name = "solve",
    .purpose = "Alias of `molaccel linalg solve`",
    .example = "molaccel solve --poisson 316",
    .setup = setup_solve,
    .order = 40,
});

// Demo: the generated kernel of the paper's BLAS-1 example, then a Poisson solve with both solvers.
void run_linalg_demo(DemoContext& dc) {
  MOLACCEL_EW_MODIFIER(F, "1/(1+X)");
  MOLACCEL_EW_MODIFIER(G, "X*X");
  la::SymbolicVector<double, 0> x;
  la::GpuSymbolicScalar<double, 1> alpha;
  la::GpuSymbolicScalar<double, 2> beta;
  la::SymbolicVector<double, 3> y;
  la::SymbolicVector<double, 4> z;
  la::CustomOperation blas1(x += (alpha + beta) * x - (y - F(G(z))));
  const std::string source = blas1.cuda_source();
  const auto kernel_file = dc.output_dir / "linalg_blas1_kernel.cu";
  write_file_atomically(kernel_file, [&](std::FILE* f) { std::fwrite(source.data(), 1, source.size(), f); });
  const auto body = source.find("extern \"C\"");
  std::printf(
      "Generated kernel for x += (alpha + beta) * x - (y - F(G(z))), F(X) = 1/(1+X), G(X) = X*X:\n\n%s\n",
      source.substr(body == std::string::npos ? 0 : body).c_str());

  // Run it once on the demo's device against the reference formula.
  const std::size_t n = 1000;
  std::vector<double> hx(n), hy(n), hz(n);
  for (std::size_t i = 0; i < n; ++i) hx[i] = 1.0 + i * 1e-3, hy[i] = 0.5, hz[i] = 2.0 - i * 1e-3;
  la::Vector<double> vx(dc.resources, std::span<const double>(hx)),
      vy(dc.resources, std::span<const double>(hy)), vz(dc.resources, std::span<const double>(hz));
  la::Scalar<double> sa(dc.resources, 0.25), sb(dc.resources, 0.5);
  blas1(vx, sa, sb, vy, vz);
  const auto got = vx.to_host();
  double max_err = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double want = hx[i] + 0.75 * hx[i] - (hy[i] - 1.0 / (1.0 + hz[i] * hz[i]));
    max_err = std::max(max_err, std::fabs(got[i] - want));
  }
  std::printf("ran %s on %s (n = %zu): max |error| vs the formula %.2e\n\n", blas1.name().c_str(),
              vx.where().describe().c_str(), n, max_err);
  dc.report["blas1_kernel"] = {
      {"name", blas1.name()}, {"file", kernel_file.string()}, {"max_error", max_err}};

  const std::size_t grid = 128;
  const auto a = la::poisson_2d(grid);
  const auto b = la::multiply(a, std::vector<double>(a.rows, 1.0));
  for (auto kind : {la::Solver::cg, la::Solver::bicgstab}) {
    la::SolverOptions o;
    o.solver = kind;
    o.tolerance = 1e-8;
    o.max_iterations = 2000;
    const auto r = la::solve(dc.resources, a, b, o);
    const double res = true_relative_residual(a, b, r.x);
    std::printf(
        "Poisson %zu x %zu (n = %zu), %-8s: %-9s in %4d iterations, ||b - Ax||/||b|| = %.2e, %.1f "
        "us/iteration [%s]\n",
        grid, grid, a.rows, std::string(la::to_string(kind)).c_str(),
        std::string(la::to_string(r.status)).c_str(), r.iterations, res, r.seconds_per_iteration * 1e6,
        r.backend.c_str());
    const auto out = dc.output_dir / fmt::format("linalg_poisson{}_{}.mtx", grid, la::to_string(kind));
    la::write_matrix_market_vector(out, r.x,
                                   fmt::format("molaccel demo: Poisson {} {}", grid, la::to_string(kind)));
    dc.report[std::string(la::to_string(kind))] = describe(r, res);
    dc.report[std::string(la::to_string(kind))].erase("residual_history");
  }
}

const bool demo_registered = register_demo({.name = "linalg", .order = 40, .run = run_linalg_demo});

}  // namespace
}  // namespace molaccel::cli

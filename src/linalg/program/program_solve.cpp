// solve() through the methods' programs (program_solve.hpp).
#include "linalg/program/program_solve.hpp"

#include "linalg/backend.hpp"
#include "linalg/diagonal.hpp"
#include "linalg/program/program_cuda.hpp"

namespace molaccel::linalg {

bool is_program_solver(Solver solver) {
  return solver == Solver::pipelined_cg || solver == Solver::pipelined_bicgstab;
}

Program program_of(const SolverOptions& options) {
  const ValueType type = options.precision == Precision::fp32 ? ValueType::f32 : ValueType::f64;
  switch (options.solver) {
    case Solver::cg:
      return cg_program(type, options.preconditioner);
    case Solver::bicgstab:
      return bicgstab_program(type, options.preconditioner);
    case Solver::pipelined_cg:
      return pipelined_cg_program(type);
    case Solver::pipelined_bicgstab:
      return pipelined_bicgstab_program(type);
  }
  throw Error("solve: unknown solver", __FILE__, __LINE__);
}

void check_program_solver_options(const SolverOptions& options) {
  if (!is_program_solver(options.solver)) return;  // cg, bicgstab (Launch::generated): Jacobi too
  if (options.preconditioner != Preconditioner::none)
    throw InputError(
        "--precond", 0,
        fmt::format("{} is unpreconditioned (Jacobi: cg or bicgstab)", to_string(options.solver)));
  if (options.launch != Launch::automatic && options.launch != Launch::generated)
    throw InputError("--launch", 0,
                     fmt::format("{} runs as one generated kernel per solve (auto or generated); the other "
                                 "launch modes are cg's and bicgstab's",
                                 to_string(options.solver)));
}

std::optional<ProgramInputs> program_inputs(const HostCsr<double>& a, std::span<const double> b,
                                            const SolverOptions& options) {
  double bb = 0;
  for (double v : b) bb += v * v;
  if (bb == 0) return std::nullopt;
  ProgramInputs inputs;
  inputs.matrix = &a;
  inputs.vectors["b"].assign(b.begin(), b.end());
  inputs.scalars["bound"] = options.tolerance * options.tolerance * bb;
  inputs.max_iterations = options.max_iterations;
  return inputs;
}

SolverResult solver_result(ProgramResult run) {
  SolverResult result;
  result.x = std::move(run.vectors.at("x"));
  const std::string& s = run.status;
  result.status = s == "converged"                 ? SolverStatus::converged
                  : s == "breakdown (rho = 0)"     ? SolverStatus::breakdown_rho
                  : s == "breakdown (omega = 0)"   ? SolverStatus::breakdown_omega
                  : s == "breakdown ((p, Ap) = 0)" ? SolverStatus::breakdown_alpha
                                                   : SolverStatus::max_iterations;
  result.iterations = run.iterations;
  result.residual_history = std::move(run.monitor_history.at(0));
  result.relative_residual = result.residual_history.back();
  result.seconds = run.seconds;
  result.seconds_per_iteration = run.iterations > 0 ? run.seconds / run.iterations : 0;
  return result;
}

namespace {

// One-barrier BiCGStab's tile form on a GPU: a constant stencil on a 2-D grid above one block's
// 2,048 rows (in one block the 3-barrier program's barriers are __syncthreads, cheaper than
// recomputing two hops: 2.42 against 4.63 us per iteration at 1,024 rows on an H200).
bool wants_tiles(const WorkerInfo& worker, const HostCsr<double>& a, const SolverOptions& options) {
  constexpr std::size_t kBlockRows = 2048;
  if (options.solver != Solver::bicgstab || worker.kind != WorkerInfo::Kind::gpu || a.rows <= kBlockRows)
    return false;
  // A multiprocessor holds at most 2,048 threads, i.e. 4 blocks of 512, each a tile of at most
  // 1,024 cells where there is more than one tile per multiprocessor: above 4,096 rows per
  // multiprocessor the tiles never fit, and the matrix is not scanned for its stencil (one pass
  // over the matrix that the kernel's own set-up repeats).
  const auto gpus = gpu_list();
  for (const GpuInfo& g : gpus)
    if (g.index == worker.device && a.rows > std::size_t(g.sm_count) * 4096) return false;
  const auto layout = diagonal_storage(a);
  if (!layout) return false;
  const auto grid = diagonal_grid_of(*layout, a.rows);
  return grid && diagonal_constant_of(*layout, *grid, a.rows);
}

}  // namespace

SolverResult solve_program_on(const WorkerInfo& worker, const HostCsr<double>& a, std::span<const double> b,
                              const SolverOptions& options, const std::function<void(int)>& progress) {
  const auto inputs = program_inputs(a, b, options);
  if (!inputs) return zero_rhs_result(b.size());
  std::optional<Program> program;
  ProgramResult run;
  if (wants_tiles(worker, a, options)) {
    // The tile form only (automatic tiles): where they do not all fit the GPU at once the form
    // refuses, and the 3-barrier program runs instead (one-barrier BiCGStab with its rows
    // streamed: 101.5 against 53.8 us per iteration at 1e6 on an H200).
    program::KernelShape tiles{false, 0};
    tiles.diagonals = 1;
    tiles.grid_width = 1;
    tiles.tile_h = 1;
    tiles.tile_w = 0;
    const Program one_barrier = one_barrier_bicgstab_program(
        options.precision == Precision::fp32 ? ValueType::f32 : ValueType::f64, options.preconditioner);
    try {
      run = run_program_on_worker(worker, one_barrier, *inputs, &tiles, progress);
      program = one_barrier;
    } catch (const program::FormRefused&) {  // the tiles do not fit: the 3-barrier program
    }
  }
  if (!program) {
    program = program_of(options);
    run = run_program_on_worker(worker, *program, *inputs, nullptr, progress);
  }
  const bool gpu = worker.kind == WorkerInfo::Kind::gpu;
  SolverResult result = solver_result(run);
  result.kernels_per_iteration = gpu ? 1 : 0;  // at most: one launch per solve
  result.host_checks = gpu ? 1 : result.iterations + 1;
  result.backend = gpu ? fmt::format("{} generated {} ({}; {} grid barriers per iteration)", worker.name(),
                                     program->name(), run.kernel, run.barriers_per_iteration)
                       : fmt::format("{} of {}", run.kernel, program->name());
  return result;
}

}  // namespace molaccel::linalg

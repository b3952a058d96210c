// solve() through the methods' programs (program_solve.hpp).
#include "linalg/program/program_solve.hpp"

#include "linalg/backend.hpp"

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

SolverResult solve_with_program(const Resources& resources, const HostCsr<double>& a,
                                std::span<const double> b, const SolverOptions& options) {
  check_program_solver_options(options);
  const auto inputs = program_inputs(a, b, options);
  if (!inputs) return zero_rhs_result(b.size());
  const Program program = program_of(options);
  const ProgramResult run = run_program(resources, program, *inputs);
  const bool gpu = run.blocks > 0;
  const std::string kernel = run.kernel,
                    backend_note = fmt::format("{} grid barriers per iteration", run.barriers_per_iteration);
  SolverResult result = solver_result(run);
  result.kernels_per_iteration = gpu ? 1 : 0;  // at most (as the resident path): one launch per solve
  result.host_checks = gpu ? 1 : result.iterations + 1;
  result.backend = gpu ? fmt::format("gpu: generated {} ({}; {})", program.name(), kernel, backend_note)
                       : fmt::format("{} of {}", kernel, program.name());
  return result;
}

}  // namespace molaccel::linalg

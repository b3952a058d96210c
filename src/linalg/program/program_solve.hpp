// solve() through the methods' programs: what the OpenCL persistent solver and the pipelined
// methods (every device) share (program_solve.cpp).
#pragma once

#include <optional>

#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"

namespace molaccel::linalg {

// The methods that exist only as programs: pipelined CG and pipelined BiCGStab.
bool is_program_solver(Solver solver);
// The methods that exist only as programs are unpreconditioned and run as one kernel per solve:
// InputError for --precond or --launch; cg and bicgstab (through Launch::generated) pass.
void check_program_solver_options(const SolverOptions& options);
// The program of any method (cg_program, bicgstab_program, ...), in the options' precision, CG
// and BiCGStab with the options' preconditioner.
Program program_of(const SolverOptions& options);
// Its inputs: b, bound = (tolerance ||b||)^2, the iteration cap; nullopt for b = 0, which the
// caller answers with zero_rhs_result (x = 0 without an iteration).
std::optional<ProgramInputs> program_inputs(const HostCsr<double>& a, std::span<const double> b,
                                            const SolverOptions& options);
// x, status, iterations, residual history and times of a run; backend, kernels per iteration
// and host checks are the caller's.
SolverResult solver_result(ProgramResult run);

// solve() for a program solver, or CG and BiCGStab with Launch::generated: run_program on the
// resources.
SolverResult solve_with_program(const Resources& resources, const HostCsr<double>& a,
                                std::span<const double> b, const SolverOptions& options);

}  // namespace molaccel::linalg

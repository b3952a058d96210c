// solve() through the methods' programs (program_solve.cpp): CG and BiCGStab on a GPU, the
// pipelined methods everywhere, and what the OpenCL persistent solver shares with them.
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

// The program solve() runs on `worker`: program_of's, except BiCGStab on a GPU where the matrix
// is a constant stencil on a 2-D grid too large for one block whose tiles (about 1,024 cells) all
// fit the GPU at once: one-barrier BiCGStab, which runs there in the tile form (docs/linalg.md).
Program program_for(const WorkerInfo& worker, const HostCsr<double>& a, const SolverOptions& options);

// solve() as one tile on `worker` through program_for's program (b nonzero, options checked):
// the generated kernel of the whole solve on a GPU, the program's fused steps on a CPU.
SolverResult solve_program_on(const WorkerInfo& worker, const HostCsr<double>& a, std::span<const double> b,
                              const SolverOptions& options);

// A program on one worker (run_program's tile: program_run.cpp): checks the inputs, derives the
// program's own (the inverse diagonal), then runs the generated kernel or the CPU steps.
ProgramResult run_program_on_worker(const WorkerInfo& worker, const Program& program,
                                    const ProgramInputs& inputs);

}  // namespace molaccel::linalg

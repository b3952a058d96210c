// solve() through the methods' programs (program_solve.cpp): CG and BiCGStab on a GPU, the
// pipelined methods everywhere, and what the OpenCL persistent solver shares with them.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"

namespace molaccel::linalg {

namespace program {
struct KernelShape;  // linalg/program/program_cuda.hpp
}  // namespace program

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

// solve() as one tile on `worker` through the method's program (options checked; b = 0 gives
// zero_rhs_result): the generated kernel of the whole solve on a GPU, the program's fused steps
// on a CPU. BiCGStab on a GPU runs as one-barrier BiCGStab in the tile form where the matrix is a
// constant stencil on a 2-D grid larger than one block's 2,048 rows and the tiles all fit the GPU
// at once, else as the three-barrier program (docs/linalg.md).
// `progress` (where given) hears the iterations done while the solve runs.
SolverResult solve_program_on(const WorkerInfo& worker, const HostCsr<double>& a, std::span<const double> b,
                              const SolverOptions& options, const std::function<void(int)>& progress = {});

// A program on one worker (run_program's tile: program_run.cpp): checks the inputs, derives the
// program's own (the inverse diagonal), then runs the generated kernel (in `shape` where given:
// program::run_shaped_on_gpu) or the CPU steps. `progress` (where given) hears the iterations
// done: after each one on a CPU, about every 0.1 s from a running kernel.
ProgramResult run_program_on_worker(const WorkerInfo& worker, const Program& program,
                                    const ProgramInputs& inputs, const program::KernelShape* shape = nullptr,
                                    const std::function<void(int)>& progress = {});

// A progress bar of a run's iterations, out of its cap, where the resources show progress (the
// bar itself draws only on a terminal), and the callback that moves it (empty where none).
class IterationProgress {
 public:
  IterationProgress(const Resources& resources, const std::string& title, int max_iterations) {
    if (resources.show_progress())
      bar_ = std::make_unique<ProgressBar>(title, std::size_t(std::max(0, max_iterations)), "iterations");
  }
  std::function<void(int)> callback() const {
    if (!bar_) return {};
    return [bar = bar_.get()](int done) { bar->set(std::size_t(std::max(0, done))); };
  }

 private:
  std::unique_ptr<ProgressBar> bar_;
};

}  // namespace molaccel::linalg

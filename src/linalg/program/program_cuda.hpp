// Source of a planned program (program_cuda.cpp: the emitter of both dialects) and its kernel's
// parameters:
//   row_ptr, col_idx, values (CSR), n, vectors (two buffers of n T per vector symbol, in
//   declaration order), scalars (one double per symbol, in and out), partials (2 x slots x
//   blocks doubles), counter (CUDA: zeroed 64-bit; OpenCL: two zeroed 32-bit words), monitors
//   ((max_iterations + 1) x monitors), outcome (2 + vectors: iterations, status = stop test + 1
//   or -1 at the cap, each vector's current buffer), max_iterations. Every block must be
//   resident at once (CUDA: a cooperative launch; OpenCL: program_opencl.cpp).
#pragma once

#include <string>

#include "linalg/codegen/codegen.hpp"
#include "linalg/program/program_plan.hpp"

namespace molaccel::linalg::program {

std::string kernel_name(const Program& program);
// The kernel in `dialect`, after `helpers` (the dialect's mp_block_sum, mp_grid_total, grid
// barrier, mp_safe_div and, in OpenCL, mp_load).
std::string generate_program(const Program& program, const ProgramPlan& plan, const Dialect& dialect,
                             std::string helpers);
std::string generate_program_cuda(const Program& program, const ProgramPlan& plan);
std::string generate_program_opencl(const Program& program, const ProgramPlan& plan);  // program_opencl.cpp

}  // namespace molaccel::linalg::program

// CUDA source of a planned program (program_cuda.cpp) and its kernel's parameters:
//   row_ptr, col_idx, values (CSR), n, vectors (two buffers of n T per vector symbol, in
//   declaration order), scalars (one double per symbol, in and out), partials (2 x slots x
//   blocks doubles), counter (zeroed 64-bit), monitors ((max_iterations + 1) x monitors),
//   outcome (2 + vectors: iterations, status = stop test + 1 or -1 at the cap, each vector's
//   current buffer), max_iterations. Launched cooperatively (every block resident).
#pragma once

#include <string>

#include "linalg/program/program_plan.hpp"

namespace molaccel::linalg::program {

std::string kernel_name(const Program& program);
std::string generate_program_cuda(const Program& program, const ProgramPlan& plan);

}  // namespace molaccel::linalg::program

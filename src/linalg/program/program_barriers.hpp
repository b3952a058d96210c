// The end of a segment in a generated program kernel (program_cuda.cpp): its reductions' sums
// staged together, the barrier of the kernel's form and the totals every thread then reads as
// tot<slot>_<id> (docs/linalg.md, "Sums").
#pragma once

#include <cstddef>
#include <string>

#include "linalg/program/program_cuda.hpp"
#include "linalg/program/program_plan.hpp"

namespace molaccel::linalg::program {

// CUDA (program_blocks.cuh, cluster_blocks.cuh): `id` names the segment, `kmax` is the most
// reductions of any segment (the size of each half of the staging arrays), `half` the partials'
// half of this barrier (a grid).
std::string cuda_barrier(const Segment& seg, int id, std::size_t kmax, const KernelShape& shape,
                         const std::string& half);
// OpenCL (program_opencl.cpp's blocks): the streamed grid form.
std::string opencl_barrier(const Segment& seg, int id, std::size_t kmax, const std::string& half);

}  // namespace molaccel::linalg::program

// The persistent OpenCL solver (internal): a solver program (include/molaccel/linalg_program.hpp)
// emitted as one OpenCL C kernel (program/program_opencl.cpp) that runs the setup and every
// iteration on the device, with a software grid barrier between segments and the stop tests on
// the device. Compiled only with OpenCL (MOLACCEL_OPENCL).
#pragma once

#include "molaccel/linalg_program.hpp"
#include "runtime/opencl/opencl.hpp"

namespace molaccel::linalg::cl {

// Work-groups of the automatic persistent launch for n rows on `info`, or 0 where the automatic
// choice is the host loop. The grid barrier needs every work-group resident at once, which only a
// GPU promises for one work-group (of 256) per compute unit; a CPU device (PoCL) runs work-groups
// as tasks with no such promise. Rule: a GPU with fp64 (the kernel's scalars and sums are
// double) and n <= 4 x 256 x compute units (at most 4 rows per work-item: beyond it the 256
// work-items per compute unit hide too little memory latency, and the host loop's ~8 us per
// launch no longer dominates; 135,168 rows on an H100's 132 compute units).
int persistent_groups(const OpenClDeviceInfo& info, std::size_t n);
// Work-groups of a persistent launch requested explicitly (--launch generated): on a GPU one per
// compute unit, at most one per 256 rows; on any other device 1 (the barrier then never waits).
int forced_persistent_groups(const OpenClDeviceInfo& info, std::size_t n);

// Runs `program` on `device` as one persistent kernel of `groups` work-groups of 256 (the caller
// guarantees they are resident together). ProgramResult::seconds: the launch, setup included.
ProgramResult run_program(::molaccel::opencl::Device& device, const Program& program,
                          const ProgramInputs& inputs, int groups);

// CG or BiCGStab (no preconditioner) as cg_program / bicgstab_program through run_program; the
// result as opencl::solve's host loop reports it.
SolverResult solve_persistent(::molaccel::opencl::Device& device, const HostCsr<double>& a,
                              std::span<const double> b, const SolverOptions& options, int groups);

}  // namespace molaccel::linalg::cl

// CUDA backends of the orbital engine, behind a CUDA-free interface (the front file includes it).
// Layering: evaluate_planes (public entry per scheduler tile) -> dispatch (kernel kind, launch
// shape per device) -> kernels (generic: basis in shared memory; JIT: basis folded into code;
// basis-values + contraction for many orbitals and densities).
#pragma once

#include <cstddef>
#include <string>

#include "molaccel/runtime.hpp"
#include "orbital/packed_basis.hpp"

namespace molaccel::orbital::cuda_backend {

struct GpuJob {
  const detail::PackedBasis* basis = nullptr;
  const float* coefficients = nullptr;  // orbitals x components
  std::size_t orbitals = 0;
  const float* weights = nullptr;       // density weights; nullptr = orbital values
  const GridSpec* grid = nullptr;
  float* out = nullptr;                 // host output, same layout as the CPU path
  bool jit = true;                      // JIT kernel for orbital values (generic otherwise)
};

// Evaluates grid planes [plane_begin, plane_end) on the worker's GPU; per-worker device state
// (basis, coefficients, compiled JIT program) lives in ctx.local<>(). Returns the kernel name used.
std::string evaluate_planes(WorkerContext& ctx, const GpuJob& job, std::size_t plane_begin, std::size_t plane_end);

// Compiles the job's JIT program for `device`'s architecture into the JIT cache (when the job
// takes the JIT path), so that the GPU workers only load it.
void precompile(const GpuJob& job, int device);

// Timing helpers for the benchmarks: runs the chosen kernel over the whole grid on `device`,
// keeping results on the device, `repeats` times; returns milliseconds per run (median of CUDA
// event timings). kind: "jit", "generic", "density".
double time_kernel(int device, const GpuJob& job, const std::string& kind, int repeats);

}  // namespace molaccel::orbital::cuda_backend

// Per-worker device state of the orbital CUDA backend (basis, coefficients, JIT program, the
// pipeline's buffers and streams) and the dispatch functions that launch kernels on it.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "orbital/cuda/kernels.cuh"
#include "orbital/cuda/orbital_cuda.hpp"
#include "orbital/jit_source.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::orbital::cuda_backend {

// Densities and (by the tuning: more than 4) many orbitals take the sparse basis-matrix path.
inline bool use_matrix_path(const GpuJob& job) {
  return job.weights != nullptr || job.tuning.basis_matrix;
}

// The JIT request for a basis set and brick on `device` (the source is the cache key).
JitRequest jit_request(const detail::JitSource& source, int device);

// The compiled program of `request`, from the JIT cache or compiled now; with `when_ready`, a
// program that is neither on disk nor compiled in this process is started on a background thread
// instead (once per program) and nullopt is returned until it has finished.
std::optional<JitProgram> jit_program(const JitRequest& request, bool when_ready);

// What a device state holds after init: the request cache's ids of the basis and the
// coefficients, the path and JIT brick, and the density weights. Empty (never reused) when the
// job does not come from the cache.
std::string state_key(const GpuJob& job, bool want_jit);

// ---------------------------------------------------------------------------------------------
// Per-worker device state: the basis, coefficients and (for JIT) the loaded program, uploaded
// once per job and worker.
// ---------------------------------------------------------------------------------------------
struct DeviceState {
  bool ready = false;
  int device = -1;
  std::string key;  // what init uploaded (state_key), empty = not reusable by another request
  cuda::DeviceBuffer<double> atom_xyz;
  cuda::DeviceBuffer<int> atom_first_shell;
  cuda::DeviceBuffer<int4> shells;
  cuda::DeviceBuffer<float> shell_cut;
  cuda::DeviceBuffer<float4> primitives;
  cuda::DeviceBuffer<float> coefficients;    // orbitals x components (row per orbital)
  cuda::DeviceBuffer<float> coefficients_t;  // components_padded x orbitals_padded
  cuda::DeviceBuffer<float> weights;         // orbitals_padded
  cuda::DeviceBuffer<int> shell_atom;        // atom of each shell (sparse matrix path)
  // Tile pipeline (evaluate_planes): two device result buffers and two pinned host buffers, the
  // kernels on `stream`, the device-to-host copies on `copy_stream`.
  cuda::DeviceBuffer<float> results[2];
  PinnedPool* pinned = nullptr;  // the Resources' pool the staging buffers come from
  cuda::PinnedBuffer<float> staging[2];
  std::unique_ptr<cuda::Event> computed[2], copied[2];
  std::unique_ptr<cuda::Stream> copy_stream;
  std::size_t chunk_planes = 0;  // planes per launch (0 = chosen per tile; halves on OOM)
  std::unique_ptr<cuda::Stream> stream;
  std::unique_ptr<cuda::LoadedProgram> program;
  cudaKernel_t jit_kernel = nullptr;
  detail::CullLayout jit_cull;
  // JIT path while the program compiles in the background: its request (jit_kernel is null and
  // the generic kernel computes until take_jit_program finds the program ready).
  std::optional<JitRequest> jit_pending;
  std::string jit_kernel_symbol;
  bool generic_ran = false;           // this job launched the generic kernel (for its kernel name)
  cuda::DeviceBuffer<int> atom_base;  // JIT: sorted by type
  cuda::DeviceBuffer<float> atom_cut2;
  cuda::DeviceBuffer<int> type_first;
  cuda::DeviceBuffer<double> atom_xyz_sorted;
  BasisView view{};
  int components_padded = 0, orbitals_padded = 0;

  DeviceState() = default;
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;
  // Page-locked staging buffer b of at least n floats (from the Resources' pool).
  void ensure_staging(int b, std::size_t n);

  // Uploads one job's basis and coefficients. The state is kept per worker from job to job
  // (WorkerContext::kept) with its streams, events and buffers (buffers grow, never shrink), so a
  // job pays no allocation: allocating and freeing the basis matrix, the result buffers and the
  // streams costs milliseconds per GPU and request, serialised across GPUs by the driver.
  void init(const GpuJob& job, int dev, bool want_jit);
  // Loads the pending JIT program when it is ready (`wait`: waits for it); true when jit_kernel is
  // set. Called before each launch on the orbital path.
  bool take_jit_program(bool wait);
};

// Dispatch (dispatch.cu). Computes planes [p, p + planes) of the grid into dst (outputs x points
// of those planes): the sparse basis-matrix kernel, or one single-orbital launch per orbital.
void launch_planes(DeviceState& st, const GpuJob& job, std::size_t p, std::size_t planes, float* dst);
// The kernel name reported in EvaluationInfo::backend.
std::string kernel_name(const DeviceState& st, const GpuJob& job);

}  // namespace molaccel::orbital::cuda_backend

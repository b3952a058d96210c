// CUDA backend of the orbital engine, behind a CUDA-free interface (the front file includes it).
// Layers: pipeline.cu (these entry points: chunk pool, fixed tiles, compute/copy pipeline) ->
// dispatch.cu (kernel per chunk: JIT or generic per orbital, or the sparse basis matrix; launch
// shapes) -> kernels.cu (generic and sparse kernels; the JIT kernel's source: jit_source.cpp);
// device_state.cu holds a worker's uploads and JIT program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "molaccel/runtime.hpp"
#include "orbital/chunk_queue.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/tuning.hpp"

namespace molaccel::orbital::cuda_backend {

struct GpuJob {
  const detail::PackedBasis* basis = nullptr;
  const float* coefficients = nullptr;  // orbitals x components
  std::size_t orbitals = 0;
  const float* weights = nullptr;  // density weights; nullptr = orbital values
  const GridSpec* grid = nullptr;
  float* out = nullptr;  // host output, same layout as the CPU path
  bool jit = true;       // JIT kernel for orbital values (generic otherwise)
  // JIT path, when the program is neither in the JIT cache nor compiled in this process: compute
  // with the generic kernel while it compiles on a background thread (detail::BackgroundCompiles),
  // and with the JIT kernel from the first launch after it is ready (`--backend auto`). False:
  // every launch waits for the JIT kernel (`cuda-jit`: bit for bit reproducible runs).
  bool jit_when_ready = false;
  // Ids of the front's request cache entries for the basis and the coefficients (0 = not
  // cached): a device state that already holds them (same ids, path, JIT brick and weights)
  // skips its uploads, so a repeated request pays no host-to-device copy and no synchronisation.
  std::uint64_t basis_id = 0, coefficients_id = 0;
  detail::Tuning tuning;  // detail::tuning_for(device, problem) unless a test or benchmark passes another
};

// The chunk pool (chunk_queue.hpp): the request's chunks of planes, from the grid, the number of
// outputs and the kernel path only (never the number of GPUs): chunks of at most ~8M values
// (32 MiB), about 1/tuning.chunks_per_grid of the grid, whole bricks of the kernel where possible (4
// planes for the sparse basis matrix, the JIT brick's depth).
std::vector<std::pair<std::size_t, std::size_t>> plan_chunks(const GpuJob& job);

// One worker's share of the chunk pool: claims chunks until none is left, pipelined (the kernels
// of a chunk run while the previous chunk is copied out; the host waits only on copy events, and
// claims a chunk only when one of its two result buffers is free, so the GPUs balance the work
// dynamically). On failure its unfinished chunks go back to the queue before it throws. Returns
// the kernel name used.
std::string evaluate_chunks(WorkerContext& ctx, const GpuJob& job, detail::ChunkQueue& queue);

// Evaluates grid planes [plane_begin, plane_end) on the worker's GPU; per-worker device state
// (basis, coefficients, compiled JIT program) lives in ctx.local<>(). Returns the kernel name used.
std::string evaluate_planes(WorkerContext& ctx, const GpuJob& job, std::size_t plane_begin,
                            std::size_t plane_end);

// Compiles the job's JIT program for `device`'s architecture into the JIT cache (when the job
// takes the JIT path), so that the GPU workers only load it; with job.jit_when_ready, a program
// that is not cached yet is only started on a background thread.
void precompile(const GpuJob& job, int device);

// The whole grid evaluated on the worker's GPU into device memory, for callers that use it there
// (isosurfaces, the kernel benchmark): `out` is device memory of outputs x point_count() floats,
// GpuJob::out's layout (job.out is not used). The worker's kept device state serves as for
// evaluate_planes. The kernels are enqueued on the returned stream (a cudaStream_t) and not waited
// for: the caller orders its own work after them on that stream, or synchronises it.
void* evaluate_on_device(WorkerContext& ctx, const GpuJob& job, float* out);

}  // namespace molaccel::orbital::cuda_backend

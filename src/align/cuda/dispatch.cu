// CUDA backend, top layer: the entry for one tile (score_tile) and the choice of its settings
// (tuning_for, chunk_residues_for). Subjects up to `long_threshold` go to the inter-task kernel
// (packed 16-bit, DPX), longer ones to the intra-task kernel (one warp per subject, 32-bit), on a
// second stream so both overlap (pipeline.cu). Out of device memory: the tile is retried with
// chunks half as large.
#include <algorithm>

#include "align/cuda/pipeline.hpp"

namespace molaccel::align::gpu_entry {

Tuning tuning_for(int /*device*/) {
  return Tuning{};
}

std::uint64_t chunk_residues_for(const Tuning& t, std::uint64_t short_residues, std::size_t query_pairs,
                                 bool multi_strip) {
  // Automatic size: as large as the buffers allow (16 M residues), but at least 3 chunks so that
  // laying out and uploading the later ones overlaps the first ones' compute. Each chunk costs a
  // few ms of pipeline overhead and its own critical path (its longest item), so a device's
  // smaller share on several GPUs must not be cut into more, smaller chunks: a quarter of the
  // 486k database on one GPU took 400 ms in 12 chunks, 360 ms in 6 and 344 ms in 3 (1/4 of the
  // whole database's 1,359 ms is 340 ms); the whole database 1,359 ms in 11 or 12 chunks alike.
  std::uint64_t chunk = t.chunk_residues > 0
                            ? t.chunk_residues
                            : std::clamp<std::uint64_t>(short_residues / 3 + 1, std::uint64_t{1} << 20,
                                                        std::uint64_t{16} << 20);
  if (multi_strip) {
    // Boundary rows take ~9 bytes per residue and query pair per set in flight: keep each set
    // within min(2 GB, free memory / (2 x sets)).
    std::size_t free_bytes = 0, total_bytes = 0;
    MOLACCEL_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::uint64_t budget =
        std::min<std::uint64_t>(std::uint64_t{2} << 30, free_bytes / (2 * kChunkSets));
    chunk = std::min<std::uint64_t>(
        chunk, std::max<std::uint64_t>(std::uint64_t{1} << 14, budget / (9 * query_pairs)));
  }
  return chunk;
}

void prepare(WorkerContext& ctx) {
  molaccel::cuda::DeviceGuard guard(ctx.worker().device);
  load_kernels();
  ensure_streams(ctx.kept<PipelineScratch>());
}

void score_tile(WorkerContext& ctx, const TileRequest& request, TileResult& result) {
  const int device = ctx.worker().device;
  molaccel::cuda::DeviceGuard guard(device);
  cudaDeviceProp prop{};
  MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  const bool dpx = prop.major >= 9;  // DPX intrinsics are emulated before sm_90
  result.kernel = dpx ? "cuda/inter16x2q-dpx-qp+intra32" : "cuda/inter16x2q-qp+intra32";
  Tuning tuning = request.tuning ? *request.tuning : tuning_for(device);
  if (request.count == 0 || request.query_count == 0) return;
  const Scoring scoring{request.matrix, request.gap_open, request.gap_extend, request.saturation_threshold};
  PipelineScratch& scratch = ctx.kept<PipelineScratch>();
  const TileSubjects tile{request.residues, request.offsets, request.subjects, request.count};
  for (;;) {
    try {
      scratch.pinned = &ctx.pinned_pool();
      score_tile_pipelined(tuning, scratch, request.queries, request.query_count, tile, scoring,
                           request.scores, request.layout_threads, result);
      return;
    } catch (const CudaError& e) {
      // Out of memory: free what we hold, clear the error and retry with chunks half as large
      // (scores are simply written again).
      if (!e.is_out_of_memory()) throw;
      cudaGetLastError();
      scratch.release();
      std::uint64_t residues = 0;
      for (std::size_t i = 0; i < tile.count; ++i) residues += tile.length(i);
      const std::uint64_t current = tuning.chunk_residues
                                        ? tuning.chunk_residues
                                        : std::min<std::uint64_t>(residues, std::uint64_t{16} << 20);
      if (current < (std::uint64_t{1} << 14)) throw;
      tuning.chunk_residues = current / 2;
      log_warn("align: GPU out of memory; retrying the tile with chunks of {} residues",
               tuning.chunk_residues);
    }
  }
}

}  // namespace molaccel::align::gpu_entry

// The kernel launches: grid sizes and the instances of sw_kernels.cuh that the backend uses.
#include "align/cuda/launch.hpp"
#include "align/cuda/sw_kernels.cuh"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::align::gpu_entry {

static_assert(kWarpSize == gpu::kWarp && kMatrixDim == gpu::kMatrixDim, "one warp and alphabet size");

void launch_inter(const InterLaunch& a, GapCosts gaps, cudaStream_t stream) {
  gpu::inter_task_kernel_qpm<kStripRows, kInterMinBlocks><<<a.item_count, kInterThreads, 0, stream>>>(
      a.layout, a.warp_base, a.warp_quads, a.boundary, a.boundary_stride, a.warps, a.items, a.profiles,
      a.pair_profile, a.pair_m_pad, gaps.open, gaps.extend, a.best, a.best_stride);
  MOLACCEL_CUDA_CHECK_LAUNCH("align inter_task_kernel_qpm");
}

void launch_intra(const unsigned char* residues, const unsigned long long* offset, const unsigned* length,
                  const unsigned long long* scratch_offset, int2* rows, int jobs, const unsigned char* query,
                  int m, const int* matrix, GapCosts gaps, int* best, cudaStream_t stream) {
  const int warps_per_block = kIntraThreads / gpu::kWarp;
  const int blocks = (jobs + warps_per_block - 1) / warps_per_block;
  gpu::intra_task_kernel<kIntraRowsPerLane><<<blocks, kIntraThreads, 0, stream>>>(
      residues, offset, length, scratch_offset, rows, jobs, query, m, matrix, gaps.open, gaps.extend, best);
  MOLACCEL_CUDA_CHECK_LAUNCH("align intra_task_kernel");
}

void launch_intra_jobs(const IntraJobsLaunch& a, GapCosts gaps, cudaStream_t stream) {
  const int warps_per_block = kIntraThreads / gpu::kWarp;
  const int blocks = (a.job_count + warps_per_block - 1) / warps_per_block;
  gpu::intra_task_kernel_jobs<kIntraRowsPerLane><<<blocks, kIntraThreads, 0, stream>>>(
      a.residues, a.subject_offset, a.subject_length, a.jobs, a.job_scratch, a.scratch, a.job_count,
      a.queries, a.query_offset, a.query_length, a.matrix, gaps.open, gaps.extend, a.best, a.best_stride);
  MOLACCEL_CUDA_CHECK_LAUNCH("align intra_task_kernel_jobs");
}

void load_kernels() {
  cudaFuncAttributes attributes{};
  MOLACCEL_CUDA_TRY(
      cudaFuncGetAttributes(&attributes, gpu::inter_task_kernel_qpm<kStripRows, kInterMinBlocks>));
  MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&attributes, gpu::intra_task_kernel<kIntraRowsPerLane>));
  MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&attributes, gpu::intra_task_kernel_jobs<kIntraRowsPerLane>));
}

}  // namespace molaccel::align::gpu_entry

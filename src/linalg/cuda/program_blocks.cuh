// The sums of the generated program kernels (program_cuda.cpp embeds this code as text, after
// grid_blocks.cuh; the same MOLACCEL_GRID_BLOCKS convention: the includer defines the macro as
// __VA_ARGS__ or #__VA_ARGS__, so the code takes no preprocessor directives). A segment's
// reductions are summed together: every thread stages its values (one warp sum per slot into
// `part`, 32 doubles per slot in shared memory), one __syncthreads, then
//   block scope: mp_block_total gives every thread the block's sum of a slot;
//   grid scope: mp_publish_block_sums writes the block sums to `partials` (slot-major, one per
//     block), the grid barrier, mp_gather_totals sums every slot's partials over the blocks
//     into shared `totals` (one warp per slot), a __syncthreads, and every thread reads them.
// Every sum is in a fixed order (warp butterflies, warps in order, blocks strided over lanes),
// so every thread of every block holds the same bits. blockDim.x is a multiple of 32.
MOLACCEL_GRID_BLOCKS(
    __device__ __forceinline__ void mp_stage(double v, double* part, int slot) {
      v = molaccel_warp_sum(v);
      if ((threadIdx.x & 31) == 0) part[slot * 32 + (threadIdx.x >> 5)] = v;
    }

    __device__ __forceinline__ double mp_block_total(const double* part, int slot) {
      const int lane = threadIdx.x & 31;
      return molaccel_warp_sum(lane < (int)(blockDim.x >> 5) ? part[slot * 32 + lane] : 0.0);
    }

    __device__ __forceinline__ void mp_publish_block_sums(const double* part, int slots, double* partials) {
      for (int s = (int)(threadIdx.x >> 5); s < slots; s += (int)(blockDim.x >> 5)) {
        const double t = mp_block_total(part, s);
        if ((threadIdx.x & 31) == 0) partials[(long long)s * gridDim.x + blockIdx.x] = t;
      }
    }

    __device__ __forceinline__ void mp_gather_totals(const double* partials, int slots, double* totals) {
      const int lane = threadIdx.x & 31;
      for (int s = (int)(threadIdx.x >> 5); s < slots; s += (int)(blockDim.x >> 5)) {
        double v = 0.0;
        for (int b = lane; b < (int)gridDim.x; b += 32) v += __ldcg(partials + (long long)s * gridDim.x + b);
        v = molaccel_warp_sum(v);
        if (lane == 0) totals[s] = v;
      }
    }

    __device__ __forceinline__ double mp_safe_div(double a, double b) { return b == 0.0 ? 0.0 : a / b; })

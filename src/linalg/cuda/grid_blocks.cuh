// Building blocks written once for two compilers: the generated program kernels (NVRTC:
// program_cuda.cpp embeds this code as text) and their tests on their own (nvcc:
// tests/linalg/test_program_blocks_gpu.cu). The includer defines MOLACCEL_GRID_BLOCKS(...) as
// __VA_ARGS__ (the code) or #__VA_ARGS__ (a string literal), so the code below takes no
// preprocessor directives.
//
//   molaccel_wait_for_count: polls a word with acquire loads until it reaches a target.
//   molaccel_grid_barrier: the barrier over a cooperative grid, a monotonic 64-bit arrival
//     counter; every barrier adds exactly gridDim.x, so the counter is a multiple of it between
//     barriers and each block derives its target from its own arrival (no reset between launches).
//   molaccel_warp_sum: butterfly sum; every lane ends with the same bits.
MOLACCEL_GRID_BLOCKS(
    __device__ __forceinline__ void molaccel_wait_for_count(const unsigned long long* word,
                                                            unsigned long long target) {
      unsigned long long seen;
      do {
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(word) : "memory");
      } while (seen < target);
    }

    __device__ __forceinline__ void molaccel_grid_barrier(unsigned long long* counter) {
      __syncthreads();
      if (threadIdx.x == 0) {
        const unsigned long long blocks = gridDim.x;
        unsigned long long old;
        asm volatile("atom.release.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(counter) : "memory");
        molaccel_wait_for_count(counter, (old / blocks + 1) * blocks);
      }
      __syncthreads();
    }

    __device__ __forceinline__ double molaccel_warp_sum(double v) {
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      return v;
    })

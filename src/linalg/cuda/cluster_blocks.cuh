// The building blocks of the generated program kernels' cluster form (program_cuda.cpp embeds
// this code as text after program_blocks.cuh, only in that form: thread-block clusters need
// sm_90; the MOLACCEL_GRID_BLOCKS convention of grid_blocks.cuh). The launch is one cluster of
// gridDim.x <= 16 blocks, so blockIdx.x is the block's rank in it.
//   mp_map: the address of the same shared-memory location in another block of the cluster
//     (generic `mapa`: the result is dereferenced like any pointer, distributed shared memory).
//   mp_cluster_barrier: every thread of the cluster arrives (release) and waits (acquire), so
//     what a block wrote to its own or another block's shared memory, or to global memory,
//     before it is visible to every block after it.
//   mp_push_block_sums: after the segment's stage (mp_stage, one __syncthreads), one warp per
//     slot adds the block's warp sums and its lanes write that block sum into every block's
//     `pushed` ([slot * 16 + block], the barrier's half), so after the barrier each block reads
//     every block's sums from its own shared memory;
//   mp_cluster_total: the blocks' sums of a slot added in block order (the same bits everywhere).
MOLACCEL_GRID_BLOCKS(
    template <class V> __device__ __forceinline__ V* mp_map(V* p, unsigned rank) {
      unsigned long long out;
      asm("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
      return (V*)out;
    }

    __device__ __forceinline__ void mp_cluster_barrier() {
      asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
      asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    }

    __device__ __forceinline__ void mp_push_block_sums(const double* part, int slots, double* pushed) {
      const int lane = threadIdx.x & 31;
      for (int s = (int)(threadIdx.x >> 5); s < slots; s += (int)(blockDim.x >> 5)) {
        const double t = mp_block_total(part, s);
        if (lane < (int)gridDim.x) mp_map(pushed, (unsigned)lane)[s * 16 + (int)blockIdx.x] = t;
      }
    }

    __device__ __forceinline__ double mp_cluster_total(const double* pushed, int slot) {
      double v = 0.0;
      for (int b = 0; b < (int)gridDim.x; ++b) v += pushed[slot * 16 + b];
      return v;
    })

// Block and warp pieces of the resident and fused kernels: warp sums, the grid barrier, the
// cluster primitives and `context`, which sums partial values over a block, a cluster or the
// grid (deterministically: every thread gets the same bits) and exchanges vector entries.
#pragma once

#include <cooperative_groups.h>

#include "linalg/cuda/resident_kernels.hpp"

#define MOLACCEL_GRID_BLOCKS(...) __VA_ARGS__
#include "linalg/cuda/grid_blocks.cuh"
#undef MOLACCEL_GRID_BLOCKS

namespace cg = cooperative_groups;

namespace molaccel::linalg::gpu::resident {

// Thread-block clusters exist from sm_90 on; older targets compile the cluster variant as a trap
// (the host never chooses it there: see configure()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define MOLACCEL_RESIDENT_CLUSTERS 1
__device__ __forceinline__ void cluster_sync() {
  cg::this_cluster().sync();
}
// cluster_sync() in two halves (every thread of the cluster arrives once, then waits), so work
// that needs no other block can run between them.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
template <class V>
__device__ __forceinline__ V* cluster_map(V* p, unsigned rank) {
  return cg::this_cluster().map_shared_rank(p, rank);
}
#else
__device__ __forceinline__ void cluster_sync() {
  __trap();
}
__device__ __forceinline__ void cluster_arrive() {
  __trap();
}
__device__ __forceinline__ void cluster_wait() {
  __trap();
}
template <class V>
__device__ __forceinline__ V* cluster_map(V* p, unsigned) {
  __trap();
  return p;
}
#endif

// Cluster: every block's sums pushed into every block's shared memory before the
// barrier ([slot][rank], kMaxCluster ranks), so after it they are read locally.
constexpr int kMaxCluster = 16;
__shared__ double g_pushed[kSlots * kMaxCluster];

__device__ __forceinline__ double safe_div(double a, double b) {
  return b == 0.0 ? 0.0 : a / b;
}
__device__ __forceinline__ double inv_or_zero(double b) {
  return b == 0.0 ? 0.0 : 1.0 / b;
}

// One iteration's record in the history the host reads (kRecordWords per iteration): the
// solver's scalars, the squared residual norm and whether the solve goes on.
__device__ __forceinline__ void record_iteration(double* rec, double rho, double alpha, double omega,
                                                 double residual, double next) {
  rec[0] = rho;
  rec[1] = alpha;
  rec[2] = omega;
  rec[3] = residual;
  rec[4] = next;
}

// Butterfly sum: every lane ends with the same bits (each step adds the same two numbers).
__device__ __forceinline__ double warp_all_sum(double v) {
  return molaccel_warp_sum(v);
}
// The same for NV values at once: the butterflies interleaved (NV independent shuffle chains in
// flight instead of one after the other); each value gets exactly warp_all_sum's additions.
template <int NV>
__device__ __forceinline__ void warp_all_sum_n(double (&v)[NV]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int k = 0; k < NV; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
}

// Reduce-scatter over a warp: NV <= 16 values in every lane in, in lane l the warp's total of
// value `index` out (-1 where the lane holds none; `lead`: the lowest lane holding it). At the
// step of offset O the lanes with bit O clear keep the first half of the values still held
// (ceil(m / 2) of m; the others the rest, padded with zeros) and add their partner's copy, so a
// step sends half the values instead of all of them: 12 shuffles for 9 values instead of
// warp_all_sum_n's 45 (the shuffle unit takes one warp instruction per clock per SM, so 16 warps
// reducing 9 doubles the classic way spend most of a microsecond in it). Deterministic (the
// same operands in the same order on every run); the totals are rounded differently from
// warp_all_sum_n's.
template <int M, int O>
__device__ __forceinline__ void scatter_step(double* v, int lane, int& base, int& count, bool& lead) {
  if constexpr (O > 0) {
    if constexpr (M == 1) {  // one value left: a plain butterfly step, every lane keeps the total
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
      if (lane & O) lead = false;
      scatter_step<1, O / 2>(v, lane, base, count, lead);
    } else {
      constexpr int H = (M + 1) / 2;
      const bool upper = (lane & O) != 0;
      double kept[H];
#pragma unroll
      for (int i = 0; i < H; ++i) {
        const double hi = H + i < M ? v[H + i] : 0.0;
        const double got = __shfl_xor_sync(0xffffffffu, upper ? v[i] : hi, O);
        kept[i] = (upper ? hi : v[i]) + got;
      }
#pragma unroll
      for (int i = 0; i < H; ++i) v[i] = kept[i];
      if (upper) {
        base += H;
        count -= H;
      } else if (count > H) {
        count = H;
      }
      scatter_step<H, O / 2>(v, lane, base, count, lead);
    }
  }
}
template <int NV>
__device__ __forceinline__ double warp_scatter_sum(double (&v)[NV], int lane, int& index, bool& lead) {
  static_assert(NV >= 1 && NV <= 16, "warp_scatter_sum: 1 to 16 values");
  int base = 0, count = NV;
  lead = true;
  scatter_step<NV, 16>(v, lane, base, count, lead);
  index = count >= 1 ? base : -1;
  return v[0];
}

// The counter barrier (linalg/cuda/grid_blocks.cuh, shared with the generated program kernels).
__device__ __forceinline__ void grid_barrier_counter(unsigned long long* counter) {
  molaccel_grid_barrier(counter);
}

template <class T, int SYNC>
struct context {
  const kernel_params<T>& kp;
  T* smem;  // block / cluster: exchanged vectors, 2 x RB
  double (*warp_part)[kMaxWarps];
  double* block_part;  // cluster: kSlots block sums
  int lane, warp, nwarps;
  unsigned long long epoch = 0;  // grid / cluster barriers passed in this launch
  const T* mval = nullptr;       // matrix rows in shared memory ([e * RB + local row]), or null
  const int* mcol = nullptr;

  // Trace stamp `point` of the barrier this sum waits in (0 block work done, 1 barrier entry: epoch
  // not yet advanced; 2 barrier exit, 3 sum done: advanced), indexed by the barrier's number in the
  // launch, so the trace costs no register of its own.
  __device__ __forceinline__ void stamp(int point) const {
    if (kp.trace != nullptr && threadIdx.x == 0) {
      const long long i = 4 * ((long long)epoch - (point < 2 ? 0 : 1)) + point - kp.trace_skip;
      if (i >= 0 && i < kp.trace_cap) {
        unsigned long long gt;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        const unsigned long long ck = clock64();
        unsigned long long* w =
            kp.trace + 2 * (std::size_t(blockIdx.x) * std::size_t(kp.trace_cap) + std::size_t(i));
        w[0] = gt;
        w[1] = ck;
      }
    }
  }

  // The state words a launch leaves for the host and the next launch (kStateWords; word 2, (b, b)
  // or (r, r) of the first launch, is written where it is summed): rho (CG: gamma), active,
  // iterations done, barriers passed.
  __device__ void store_state(double rho, double active, int done) const {
    kp.out[0] = rho;
    kp.out[1] = active;
    kp.out[3] = done;
    kp.out[4] = double(epoch);
  }

  // Block sum `s` of block `blk` on a grid (written before the last barrier).
  __device__ __forceinline__ double partial(int s, int blk, int blocks) const {
    return __ldcg(kp.partials + s * blocks + blk);
  }

  // The grid barrier (the arrival counter). One block: __syncthreads; one cluster: the arrival
  // in plain_arrive() / sum_arrive() and the wait in plain_wait() / sum_wait().
  __device__ void grid_barrier() {
    ++epoch;
    grid_barrier_counter(kp.counter);
  }

  // A barrier without a sum (a vector published), stamped like a sum's barrier when tracing (the
  // block's work ends when all its warps arrive; no reduction, no gather), so the trace covers
  // every barrier of an iteration.
  __device__ void plain_barrier() {
    plain_arrive();
    plain_wait();
  }

  // plain_barrier() in two halves (split): in a cluster every thread arrives (releasing its own
  // writes) and waits later, so work that needs no other block can run between them (a caller
  // that reads other threads' writes there synchronises the block first); in a block or on a
  // grid plain_arrive() is the whole barrier and plain_wait() nothing.
  __device__ void plain_arrive() {
    if constexpr (SYNC == sync_block) {
      __syncthreads();
    } else {
      if (kp.trace != nullptr) __syncthreads();  // uniform: a kernel parameter
      stamp(0);
      stamp(1);
      if constexpr (SYNC == sync_cluster) {
        ++epoch;
        cluster_arrive();
      } else {
        grid_barrier();
        stamp(2);
        stamp(3);
      }
    }
  }
  __device__ void plain_wait() {
    if constexpr (SYNC == sync_cluster) {
      cluster_wait();
      stamp(2);
      stamp(3);
    }
  }

  // Exchange vector `which` (0: p side, 1: s side): element `col` (any row of the system).
  __device__ __forceinline__ T load(int which, int col) const {
    if constexpr (SYNC == sync_block) {
      return smem[(which << kp.rb_shift) + col];
    } else if constexpr (SYNC == sync_cluster) {
      const unsigned rank = unsigned(col) >> kp.rb_shift;
      const int local = col - int(rank << kp.rb_shift);
      const T* remote = cluster_map(smem, rank);
      return remote[(which << kp.rb_shift) + local];
    } else {
      return __ldcg(kp.xp + std::size_t(which) * std::size_t(kp.n) + std::size_t(col));
    }
  }
  // Publishes this thread's element (local index `li` of the block, global row `row`).
  __device__ __forceinline__ void store(int which, int li, int row, T value) const {
    if constexpr (SYNC == sync_grid) {
      if (row < kp.n) kp.xp[std::size_t(which) * std::size_t(kp.n) + std::size_t(row)] = value;
    } else {
      smem[(which << kp.rb_shift) + li] = value;
    }
  }

  // Two-barrier form on a grid: published vector `which` (pub_vec) of the whole system, in global
  // memory (7 x n, read through L2). In one block nothing is published.
  __device__ __forceinline__ T pload(int which, int col) const {
    return __ldcg(kp.xp + std::size_t(which) * std::size_t(kp.n) + std::size_t(col));
  }
  __device__ __forceinline__ void pstore(int which, int /*li*/, int row, T value) const {
    if constexpr (SYNC == sync_grid) {
      if (row < kp.n) kp.xp[std::size_t(which) * std::size_t(kp.n) + std::size_t(row)] = value;
    }
  }

  // Sums v[0..NV) over the grid (into every thread) and is a barrier (writes before it are
  // visible after it). Slots [slot, slot + NV) must not be reused before another barrier.
  // PAIR: the grid gather takes two tasks per warp at a time (see sum_arrive).
  template <int NV, bool PAIR = false>
  __device__ void sum(double (&v)[NV], int slot) {
    sum_arrive<NV, PAIR>(v, slot);
    sum_wait<NV>(v, slot);
  }

  // sum() in two halves (split), as plain_arrive() / plain_wait(): in a cluster sum_arrive() reduces
  // the block's values, pushes the block sums and arrives, sum_wait() waits and adds them up (v
  // holds the totals after it); in a block or on a grid sum_arrive() is the whole sum.
  template <int NV, bool PAIR = false>
  __device__ void sum_arrive(double (&v)[NV], int slot) {
    // kp.scatter (grid): warp_scatter_sum, then warp w adds up sums 2w (lanes 0-15) and 2w + 1
    // (16-31) over the block's warps (<= 16), all warps at once, instead of warp 0 all NV sums.
    const bool scatter = SYNC == sync_grid && kp.scatter != 0;
    if (scatter) {
      int index;
      bool lead;
      const double total = warp_scatter_sum(v, lane, index, lead);
      if (index >= 0 && lead) warp_part[slot + index][warp] = total;
    } else {
      warp_all_sum_n(v);
      if (lane == 0)
#pragma unroll
        for (int k = 0; k < NV; ++k) warp_part[slot + k][warp] = v[k];
    }
    __syncthreads();
    if constexpr (SYNC != sync_block) stamp(0);
    if constexpr (SYNC == sync_block) {
#pragma unroll
      for (int k = 0; k < NV; ++k) v[k] = lane < nwarps ? warp_part[slot + k][lane] : 0.0;
      warp_all_sum_n(v);
    } else if (scatter) {
      static_assert(kMaxWarps <= 16, "sum_arrive: the block's warps in 16 lanes");
      for (int k2 = warp; 2 * k2 < NV; k2 += nwarps) {
        const int k = 2 * k2 + (lane >> 4), src = lane & 15;
        double total = k < NV && src < nwarps ? warp_part[slot + k][src] : 0.0;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
        if (src == 0 && k < NV) kp.partials[(slot + k) * gridDim.x + blockIdx.x] = total;
      }
    }
    if constexpr (SYNC != sync_block) {
      if (!scatter && warp == 0) {
        double tot[NV];
#pragma unroll
        for (int k = 0; k < NV; ++k) tot[k] = lane < nwarps ? warp_part[slot + k][lane] : 0.0;
        warp_all_sum_n(tot);
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          const double total = tot[k];
          if constexpr (SYNC == sync_cluster) {
            // Lane l pushes the total into rank l's shared memory.
            if (lane < int(gridDim.x))
              cluster_map(g_pushed, unsigned(lane))[(slot + k) * kMaxCluster + int(blockIdx.x)] = total;
          } else if (lane == 0) {
            kp.partials[(slot + k) * gridDim.x + blockIdx.x] = total;
          }
        }
      }
      stamp(1);
      if constexpr (SYNC == sync_cluster) {
        ++epoch;
        cluster_arrive();
        return;  // sum_wait() gathers
      }
      grid_barrier();
      stamp(2);
      const int blocks = int(gridDim.x);
      constexpr int U = kGatherChunk / 32,
                    kMaxChunks = 8;  // warp-wide loads in flight per lane; chunks of 32 x U blocks
      const int chunks = (blocks + 32 * U - 1) / (32 * U);
      if (chunks <= kMaxChunks) {
        // One warp per (sum k, chunk of 128 blocks) reads that chunk's block sums (all loads in
        // flight) and leaves the chunk's total in shared memory; every thread then adds the chunk
        // totals in chunk order. The partials are read once per block instead of once per warp
        // (16 x fewer requests to the same few L2 lines); deterministic and identical in every
        // thread, as the all-warps form (whose order of additions differs above 128 blocks).
        __shared__ double chunk_sum[kSlots][kMaxChunks];
        const int tasks = NV * chunks;
        // With PAIR a warp takes two tasks at a time (tasks t and t + nwarps), all their loads in
        // flight together: with fewer warps than tasks (8 warps of a 256-thread block, 9 sums) one
        // L2 round trip instead of two. Only where asked for: the extra registers slowed the
        // kernels that do not need it (docs/linalg.md).
        constexpr int P = PAIR ? 2 : 1;
        for (int t0 = warp; t0 < tasks; t0 += P * nwarps) {
          double got[P][U];
#pragma unroll
          for (int h = 0; h < P; ++h) {
            const int task = t0 + h * nwarps, k = task / chunks, ch = task - k * chunks;
            const int b0 = ch * 32 * U + lane;
#pragma unroll
            for (int i = 0; i < U; ++i)
              got[h][i] = (h == 0 || task < tasks) && b0 + 32 * i < blocks
                              ? partial(slot + k, b0 + 32 * i, blocks)
                              : 0.0;
          }
#pragma unroll
          for (int h = 0; h < P; ++h) {
            const int task = t0 + h * nwarps, k = task / chunks, ch = task - k * chunks;
            if (h == 0 || task < tasks) {  // uniform over the warp
              const int b0 = ch * 32 * U + lane;
              double acc = 0;
#pragma unroll
              for (int i = 0; i < U; ++i)
                if (b0 + 32 * i < blocks) acc += got[h][i];
              const double total = warp_all_sum(acc);
              if (lane == 0) chunk_sum[slot + k][ch] = total;
            }
          }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          double total = 0;
          for (int ch = 0; ch < chunks; ++ch) total += chunk_sum[slot + k][ch];
          v[k] = total;
        }
      } else {  // grids of more than kMaxChunks x 128 blocks
        gather_every_warp(v, slot);
      }
      stamp(3);
    }
  }
  template <int NV>
  __device__ void sum_wait(double (&v)[NV], int slot) {
    if constexpr (SYNC == sync_cluster) {
      cluster_wait();
      stamp(2);
      // The totals are here already (pushed before the barrier, which orders the remote stores):
      // every warp adds them (lane l: block l).
      const int blocks = int(gridDim.x);
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        double acc = 0;
        if (lane < blocks) acc += g_pushed[(slot + k) * kMaxCluster + lane];
        v[k] = acc;
      }
      warp_all_sum_n(v);
      stamp(3);
    }
  }
  // Grids of more than kMaxChunks x 128 blocks: every warp reads every block sum (lane l: blocks
  // l, l + 32, ...).
  template <int NV>
  __device__ void gather_every_warp(double (&v)[NV], int slot) const {
    const int blocks = int(gridDim.x);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      double acc = 0;
      for (int blk = lane; blk < blocks; blk += 32) acc += partial(slot + k, blk, blocks);
      v[k] = warp_all_sum(acc);
    }
  }
};

}  // namespace molaccel::linalg::gpu::resident

// Resident small-system solver (`launch_mode::resident`): one hand-written cooperative kernel runs
// a whole batch of CG or BiCGStab iterations (no preconditioner or Jacobi, float or double).
//
// Each thread owns RPT rows (block b owns rows [b * RB, (b + 1) * RB), RB = RPT * blockDim, row
// b * RB + k * blockDim + tid for k < RPT) and keeps them in registers across iterations: x, r,
// r0, p, the Jacobi diagonal and the row's values and column indices for rows of at most 8
// nonzeros at one row per thread (5 at two; at four rows per thread a short row's entries are
// loaded from global memory, all in flight at once, or, with matrix_smem, copied once per launch
// into shared memory). Only the vectors the products read (M p and M s for BiCGStab, p for CG)
// are exchanged: through shared memory in one block, distributed shared memory in one
// thread-block cluster, or global memory (L2, read with ld.global.cg) for a cooperative grid.
//
// Reductions are fused so that an iteration needs as few barriers as the algorithm allows:
//   BiCGStab (4): p published + (r, r) | (r0, v) | s published | (t, s), (t, t), (r0, t), (r0, s)
//     with rho' = (r0, s) - omega (r0, t), so no separate barrier for rho.
//   BiCGStab, three-barrier form (resident_kernel with THREE, form 3, block or cluster): p published
//     + (r, r), (M A^T r0, p) | s published | (t, s), (t, t), (r0, t), (r0, s): (r0, A M p) is
//     summed as (M A^T r0, p) before the product, so it needs no barrier of its own.
//   BiCGStab, two-barrier form (resident_kernel_2, form 2): (t, s), (t, t), (r0, t), (r0, s) |
//     (r0, v), (r, r); the entries of other blocks a product needs are recomputed from vectors
//     published in the previous phase (see resident_kernel_2).
//   BiCGStab, one-barrier form (resident_kernel_1, form 4, grid, matrix by diagonals): (t, s),
//     (t, t), (r0, t), (r0, s), (M A^T r0, s / t / p / v), (r, r); sigma' = (M A^T r0, p') is
//     expanded, so the barrier gives the next alpha too, and each block recomputes its neighbours'
//     entries two hops deep (see resident_kernel_1).
//   CG (3): (p, q) | (r, z), (r, r) | p published.
// Every thread computes the scalars itself from the same partial sums in the same order (warp
// butterflies give bit-identical sums in every lane), so all threads take the same branches:
// the loop stops for every block at the same iteration when the step sizes are masked off.
//
// Per iteration the kernel writes one record {rho, alpha, omega, rr, active} (the solvers' slot
// fields) which the host reads once per launch, like the history array of the other modes.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstring>

#include "linalg/resident.hpp"
#include "linalg/cuda/stream.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace cg = cooperative_groups;

namespace molaccel::linalg::gpu {
namespace {

constexpr int kMaxThreads = 512;  // launch bound: 128 registers per thread
constexpr int kMaxWarps = kMaxThreads / 32;
constexpr int kCached = 8;  // nonzeros per row kept in registers (one row per thread; 6 for two)
constexpr int kSlots = 18;  // reduction slots (each kind of partial sum has its own; form 4: 2 x 9)
constexpr int kStateWords = 5;  // {rho, active, rr0, iterations done, grid barriers passed}
constexpr int kRecordWords = 5;
// Automatic BiCGStab form (solver_tuning::form 0), measured side by side (docs/linalg.md): two
// barriers in one block (faster than four or three there), three in a cluster ((r0, A M p)
// summed as (M A^T r0, p) with (r, r): faster than two and four there), one on a grid where the
// matrix is stored by diagonals and the halo windows fit shared memory, else two (the fallback
// for general sparse matrices and for bands too wide for the windows). On grids of 4 rows per
// thread the two-barrier form keeps the short matrix rows in shared memory (faster than L2).
constexpr int kAutomaticFormBlock = 2;
constexpr int kAutomaticFormCluster = 3;
constexpr int kSmemNnz = 5;  // grid, 4 rows per thread: nonzeros per row kept in shared memory
// Automatic grid geometry of the two-barrier form: 2 rows per thread up to this many rows (80
// blocks of 512), 4 above (the matrix in shared memory): the crossing point measured on Poisson
// between 67,600 and 100,489 rows (docs/linalg.md).
constexpr long long kGridFourRowsAbove = 80LL * 2 * 512;
// Form 4 on a grid, choosing the tiles: the cost of one block more, in rows handled per
// iteration (an arrival at the grid barrier and its block sums in every gather). Tiles at least
// as wide as they are tall are preferred (longer memory segments of the published vectors and
// the halo loads; measured faster than taller tiles of the same count, docs/linalg.md).
constexpr double kTileBlockCost = 4.0;
// The grid gather reads the block sums in chunks of 32 x 4 blocks, one warp per sum and chunk: up
// to 128 blocks one L2 round trip, above it two. Automatic tiles stay within one chunk.
constexpr int kGatherChunk = 128;
// The matrix by diagonals (resident_setup::dia_*, linalg/diagonal.hpp): at most this many
// diagonals, values diagonal-major (dia_count x n), NaN where the CSR has no entry.
constexpr int kDiaMax = 8;

enum sync_kind { sync_block = 0, sync_cluster = 1, sync_grid = 2 };

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

template <class T>
struct kernel_params {
  int n = 0;
  int rb_shift = 0;  // log2(rows per block)
  const int* row_ptr = nullptr;
  const int* col_idx = nullptr;
  const T* values = nullptr;
  const T* b = nullptr;
  const T* d = nullptr;  // Jacobi diagonal inverse, or null
  T* x = nullptr;        // state between launches
  T* r = nullptr;
  T* p = nullptr;
  T* xp = nullptr;  // grid: exchanged vectors (2 x n; two-barrier form: 7 x n, see pub_vec)
  double* partials = nullptr;                // grid: kSlots x gridDim.x block sums
  unsigned long long* counter = nullptr;     // grid barrier: arrivals (monotonic)
  double* out = nullptr;                     // state words, then records
  int iterations = 0;
  int init = 0;
  double threshold = 0;
  int matrix_smem = 0;            // grid, 4 rows per thread: rows of <= kSmemNnz in shared memory
  unsigned matrix_offset = 0;     // their byte offset in the dynamic shared memory
  double* aux = nullptr;          // streaming kernel: sigma and the buffer index between launches
  int scatter = 0;  // grid sums: the block's sums reduced by warp_scatter_sum (form 4; 0: warp_all_sum_n)
  // Opt-in trace (MOLACCEL_TRACE=linalg): thread 0 of every block writes {globaltimer,
  // clock64} at 4 points of each grid / cluster sum (block work done, barrier entry, barrier exit,
  // sum done), stamps [trace_skip, trace_skip + trace_cap) of the launch, trace_cap per block.
  unsigned long long* trace = nullptr;
  int trace_skip = 0;
  int trace_cap = 0;
  // Fused BiCGStab kernel and resident BiCGStab kernels (forms 2, 3) with MAT 2: the matrix by
  // diagonals (dia_count x n values, row i of diagonal k at dia[k * n + i] = a(i, i + dia_off[k]),
  // offsets increasing, NaN = no entry).
  const T* dia = nullptr;
  int dia_count = 0;
  int dia_off[kDiaMax] = {};
  // One-barrier form (resident_kernel_1): the grid, its tiles and the stencil (see one_tiles).
  int grid_w = 0, grid_h = 0, tiles_i = 1, tiles_j = 1;
  int halo[4] = {};
  int dia_a[kDiaMax] = {}, dia_b[kDiaMax] = {};
  // A constant stencil on tiles (resident_setup::dia_constant): the products use coef, not the
  // values in shared memory.
  int constant = 0;
  T coef[kDiaMax] = {};
  // BiCGStab, three-barrier form (resident_kernel with THREE): M A^T r0 (n), so that
  // (r0, A M p) = (M A^T r0, p) is summed with (r, r) when p is formed, not after the product.
  const T* r0hat = nullptr;
};

__device__ __forceinline__ double safe_div(double a, double b) {
  return b == 0.0 ? 0.0 : a / b;
}
__device__ __forceinline__ double inv_or_zero(double b) {
  return b == 0.0 ? 0.0 : 1.0 / b;
}

// Butterfly sum: every lane ends with the same bits (each step adds the same two numbers).
__device__ __forceinline__ double warp_all_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
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
// reducing 9 doubles the classic way spend about 0.8 us in it on an H100). Deterministic (the
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

// Polls `word` with acquire loads until it reaches `target` (the counter barrier's wait).
__device__ __forceinline__ void wait_for_count(const unsigned long long* word, unsigned long long target) {
  unsigned long long seen;
  do {
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(word) : "memory");
  } while (seen < target);
}

// Own barrier over the cooperative grid: a monotonic 64-bit arrival counter. Every barrier adds
// exactly gridDim.x, so the counter is a multiple of it between barriers and each block derives
// its target from its own arrival: no reset between launches.
__device__ __forceinline__ void grid_barrier_counter(unsigned long long* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long blocks = gridDim.x;
    unsigned long long old;
    asm volatile("atom.release.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(counter) : "memory");
    const unsigned long long target = (old / blocks + 1) * blocks;
    wait_for_count(counter, target);
  }
  __syncthreads();
}

template <class T, int SYNC>
struct context {
  const kernel_params<T>& kp;
  T* smem;        // block / cluster: exchanged vectors, 2 x RB
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
        unsigned long long* w = kp.trace + 2 * (std::size_t(blockIdx.x) * std::size_t(kp.trace_cap) + std::size_t(i));
        w[0] = gt;
        w[1] = ck;
      }
    }
  }

  // The state words a launch leaves for the host and the next launch (kStateWords; word 2, (b, b)
  // or (r, r) of the first launch, is written where it is summed): rho (CG: gamma), active,
  // iterations done, barriers passed (added to the next launch's kernel_params::epoch_base).
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

  // Two-barrier form: published vector `which` (pub_vec) of the whole system. Grid: global
  // memory (7 x n, read through L2); cluster: each block's shared memory after the local
  // exchange area (7 x RB), read through distributed shared memory.
  __device__ __forceinline__ T pload(int which, int col) const {
    if constexpr (SYNC == sync_cluster) {
      const unsigned rank = unsigned(col) >> kp.rb_shift;
      const int local = col - int(rank << kp.rb_shift);
      const T* remote = cluster_map(smem, rank);
      return remote[((which + 1) << kp.rb_shift) + local];
    } else {
      return __ldcg(kp.xp + std::size_t(which) * std::size_t(kp.n) + std::size_t(col));
    }
  }
  __device__ __forceinline__ void pstore(int which, int li, int row, T value) const {
    if constexpr (SYNC == sync_grid) {
      if (row < kp.n) kp.xp[std::size_t(which) * std::size_t(kp.n) + std::size_t(row)] = value;
    } else if constexpr (SYNC == sync_cluster) {
      smem[((which + 1) << kp.rb_shift) + li] = value;
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
      constexpr int U = kGatherChunk / 32, kMaxChunks = 8;  // warp-wide loads in flight per lane; chunks of 32 x U blocks
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
              got[h][i] = (h == 0 || task < tasks) && b0 + 32 * i < blocks ? partial(slot + k, b0 + 32 * i, blocks)
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

template <class T, int RPT>
struct owned_rows {
  static constexpr int cached = RPT == 1 ? kCached : RPT == 2 ? 5 : 0;
  int row[RPT];
  int start[RPT], len[RPT];
  int col[RPT][cached > 0 ? cached : 1];
  T val[RPT][cached > 0 ? cached : 1];
};

// Row k of A times exchange vector `which`.
template <class T, int RPT, int SYNC>
__device__ __forceinline__ T row_product(const owned_rows<T, RPT>& m, int k, int which,
                                         const context<T, SYNC>& c) {
  constexpr int cached = owned_rows<T, RPT>::cached;
  T acc = T(0);
  if constexpr (cached == 0) {
    if (c.mval != nullptr && m.len[k] <= kSmemNnz) {  // the row from shared memory
      const int rbm = 1 << c.kp.rb_shift, li = m.row[k] & (rbm - 1);
      int col[kSmemNnz];
      T val[kSmemNnz];
#pragma unroll
      for (int e = 0; e < kSmemNnz; ++e)
        if (e < m.len[k]) {
          col[e] = c.mcol[e * rbm + li];
          val[e] = c.mval[e * rbm + li];
        }
#pragma unroll
      for (int e = 0; e < kSmemNnz; ++e)
        if (e < m.len[k]) acc += val[e] * c.load(which, col[e]);
      return acc;
    }
  }
  if (cached > 0 && m.len[k] <= cached) {
#pragma unroll
    for (int e = 0; e < (cached > 0 ? cached : 1); ++e)
      if (e < m.len[k]) acc += m.val[k][e] * c.load(which, m.col[k][e]);
  } else if (m.len[k] <= kCached) {  // short row from global: all loads of the row in flight
    int col[kCached];
    T val[kCached];
#pragma unroll
    for (int e = 0; e < kCached; ++e)
      if (e < m.len[k]) {
        col[e] = __ldg(c.kp.col_idx + m.start[k] + e);
        val[e] = __ldg(c.kp.values + m.start[k] + e);
      }
#pragma unroll
    for (int e = 0; e < kCached; ++e)
      if (e < m.len[k]) acc += val[e] * c.load(which, col[e]);
  } else {
    for (int e = m.start[k]; e < m.start[k] + m.len[k]; ++e)
      acc += __ldg(c.kp.values + e) * c.load(which, __ldg(c.kp.col_idx + e));
  }
  return acc;
}

// Row k of A by diagonals (MAT 2, resident BiCGStab forms 2 and 3): value x entry(row + offset)
// for every value of the row that is not NaN, in increasing offset order: the CSR row's
// operations in the CSR order (as stream_product, below), bit for bit. The entries' addresses
// are the row plus uniform offsets (kernel parameters), so no column index is kept in a register
// or read. Where the values are is fixed at compile time, one path per kernel (a first version
// with all three paths in every kernel was slower in one block and in a cluster: docs/linalg.md):
// at 1 and 2 rows per thread in registers (the host uses diagonals there only when dia_count fits
// the cached slots: resident_solver::impl::dia_fits; NaN in the unused ones); at 4 rows per
// thread on a grid in shared memory when kept there (dia_count <= kSmemNnz), otherwise, and at 4
// rows per thread in a block or cluster, from global memory (coalesced, diagonal-major).
template <class T, int RPT, int SYNC, class Entry>
__device__ __forceinline__ T dia_row_product(const owned_rows<T, RPT>& m, int k, const context<T, SYNC>& c,
                                             Entry entry) {
  constexpr int cached = owned_rows<T, RPT>::cached;
  const int row = m.row[k];
  T acc = T(0);
  if constexpr (cached > 0) {
#pragma unroll
    for (int e = 0; e < cached; ++e)
      if (m.val[k][e] == m.val[k][e]) acc += m.val[k][e] * entry(row + c.kp.dia_off[e]);
  } else {
    if constexpr (SYNC == sync_grid) {
      if (c.mval != nullptr) {  // shared memory: kSmemNnz slots, NaN beyond dia_count
        const int rbm = 1 << c.kp.rb_shift, li = row & (rbm - 1);
        T val[kSmemNnz];
#pragma unroll
        for (int e = 0; e < kSmemNnz; ++e) val[e] = c.mval[e * rbm + li];
#pragma unroll
        for (int e = 0; e < kSmemNnz; ++e)
          if (val[e] == val[e]) acc += val[e] * entry(row + c.kp.dia_off[e]);
        return acc;
      }
    }
    const int dc = c.kp.dia_count;
    const std::size_t nn = std::size_t(c.kp.n);
    const bool valid = row < c.kp.n;
    T val[kDiaMax];
#pragma unroll
    for (int e = 0; e < kDiaMax; ++e)
      val[e] = e < dc && valid ? __ldg(c.kp.dia + std::size_t(e) * nn + std::size_t(row)) : T(NAN);
#pragma unroll
    for (int e = 0; e < kDiaMax; ++e)
      if (val[e] == val[e]) acc += val[e] * entry(row + c.kp.dia_off[e]);
  }
  return acc;
}

// The matrix rows of a thread by diagonals (MAT 2): values into the cached slots (NaN where the
// CSR row has no entry, and in the slots beyond dia_count; invalid rows all NaN), and on a grid
// with the matrix in shared memory the values there ([e * RB + local row], NaN likewise).
template <class T, int RPT>
__device__ __forceinline__ void load_dia_rows(owned_rows<T, RPT>& m, const kernel_params<T>& kp) {
  constexpr int cached = owned_rows<T, RPT>::cached;
  const std::size_t nn = std::size_t(kp.n);
#pragma unroll
  for (int k = 0; k < RPT; ++k) {
    m.start[k] = 0;
    m.len[k] = 0;
    if constexpr (cached > 0) {
#pragma unroll
      for (int e = 0; e < cached; ++e) {
        m.col[k][e] = 0;
        m.val[k][e] = e < kp.dia_count && m.row[k] < kp.n ? kp.dia[std::size_t(e) * nn + std::size_t(m.row[k])]
                                                          : T(NAN);
      }
    }
  }
}

// On a grid at 4 rows per thread with kernel_params::matrix_smem: the block's matrix rows into
// shared memory at kp.matrix_offset ([e * RB + local row], kSmemNnz slots per row; CSR: values
// and columns, zeros past the row's length; MAT 2: the values by diagonals, NaN where there is no
// entry) and the context pointed at them. By diagonals with more than kSmemNnz diagonals the
// values stay in global memory (the context is left as it was).
template <int MAT, int RPT, int SYNC, class T>
__device__ __forceinline__ void load_matrix_smem(const owned_rows<T, RPT>& m, context<T, SYNC>& c,
                                                 const kernel_params<T>& kp, unsigned char* dynamic_smem,
                                                 int nthreads, int tid) {
  if constexpr (RPT == 4 && SYNC == sync_grid) {
    if (kp.matrix_smem) {
      const int rbm = 1 << kp.rb_shift;
      T* mv = reinterpret_cast<T*>(dynamic_smem + kp.matrix_offset);
      int* mc = reinterpret_cast<int*>(mv + kSmemNnz * rbm);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        const int li = k * nthreads + tid;
#pragma unroll
        for (int e = 0; e < kSmemNnz; ++e) {
          if constexpr (MAT == 2) {  // the values by diagonals (NaN: no entry), no column indices
            const bool here = e < kp.dia_count && m.row[k] < kp.n;
            mv[e * rbm + li] = here ? kp.dia[std::size_t(e) * std::size_t(kp.n) + std::size_t(m.row[k])] : T(NAN);
          } else {
            const bool here = e < m.len[k] && m.len[k] <= kSmemNnz;
            mc[e * rbm + li] = here ? kp.col_idx[m.start[k] + e] : 0;
            mv[e * rbm + li] = here ? kp.values[m.start[k] + e] : T(0);
          }
        }
      }
      if (MAT == 1 || kp.dia_count <= kSmemNnz) {  // MAT 2 with more diagonals: from global memory
        c.mval = mv;
        c.mcol = mc;
      }
    }
  }
}

// Reduction slots.
constexpr int kSlotInit = 0;   // 2: init sums
constexpr int kSlotA = 2;      // BiCGStab (r0, v) | CG (p, q)
constexpr int kSlotB = 3;      // BiCGStab 4 sums | CG 2 sums
constexpr int kSlotRR = 7;     // BiCGStab (r, r)

// THREE (BiCGStab, form 3, block or cluster): three barriers per iteration instead of four.
// sigma = (r0, v) = (r0, A M p) is computed as (M A^T r0, p) (kp.r0hat, computed once on the host:
// r0 = b is fixed), summed with (r, r) when p is formed, so alpha is known when v = A M p is:
//   M p published, (r, r), (M A^T r0, p) | M s published | (t, s), (t, t), (r0, t), (r0, s).
// The same iterates in exact arithmetic; sigma rounds differently. A launch that continues a
// solve sums (M A^T r0, p) from the stored p in its first barrier (the same sum, bit for bit).
// The matrix as CSR (row_product).
template <class T, bool CG, int RPT, int SYNC, bool THREE = false>
__global__ void __launch_bounds__(kMaxThreads, 1) resident_kernel(const kernel_params<T> kp) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  __shared__ double warp_part[kSlots][kMaxWarps];
  __shared__ double block_part[kSlots];
  const int tid = int(threadIdx.x), nthreads = int(blockDim.x);
  context<T, SYNC> c{kp, reinterpret_cast<T*>(dynamic_smem), warp_part, block_part, tid & 31, tid >> 5,
                     (nthreads + 31) >> 5};
  const int base = int(blockIdx.x) << kp.rb_shift;

  owned_rows<T, RPT> m;
  T x[RPT], r[RPT], r0[RPT], p[RPT], dd[RPT];
  T rh[THREE ? RPT : 1];  // M A^T r0
#pragma unroll
  for (int k = 0; k < RPT; ++k) {
    const int row = base + k * nthreads + tid;
    m.row[k] = row;
    const bool valid = row < kp.n;
    m.start[k] = valid ? kp.row_ptr[row] : 0;
    m.len[k] = valid ? kp.row_ptr[row + 1] - m.start[k] : 0;
    if constexpr (owned_rows<T, RPT>::cached > 0) {
#pragma unroll
      for (int e = 0; e < owned_rows<T, RPT>::cached; ++e) {
        const bool here = e < m.len[k];
        m.col[k][e] = here ? kp.col_idx[m.start[k] + e] : 0;
        m.val[k][e] = here ? kp.values[m.start[k] + e] : T(0);
      }
    }
    const T bk = valid ? kp.b[row] : T(0);
    dd[k] = !valid ? T(0) : kp.d ? kp.d[row] : T(1);
    r0[k] = bk;
    if constexpr (THREE) rh[k] = valid ? kp.r0hat[row] : T(0);
    if (kp.init) {
      x[k] = T(0);
      r[k] = bk;
      p[k] = CG ? dd[k] * bk : bk;
    } else {
      x[k] = valid ? kp.x[row] : T(0);
      r[k] = valid ? kp.r[row] : T(0);
      p[k] = valid ? kp.p[row] : T(0);
    }
    // CG multiplies p, BiCGStab M p.
    c.store(0, k * nthreads + tid, row, CG ? p[k] : dd[k] * p[k]);
  }
  load_matrix_smem<1, RPT, SYNC>(m, c, kp, dynamic_smem, nthreads, tid);

  T v[RPT];  // BiCGStab: A M p

  double rho, active, sigma3 = 0;  // sigma3: THREE's (M A^T r0, p)
  if (kp.init) {  // BiCGStab: rho = rr = (b, b); CG: rz = (b, M b), rr = (b, b); THREE: (M A^T r0, b)
    double s[THREE ? 3 : 2] = {};
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      s[0] += double(r[k]) * double(CG ? p[k] : r[k]);
      s[1] += double(r[k]) * double(r[k]);
      if constexpr (THREE) s[2] += double(rh[k]) * double(p[k]);
    }
    c.template sum<THREE ? 3 : 2>(s, kSlotInit);
    rho = s[0];
    active = s[1] > kp.threshold ? 1.0 : 0.0;
    if constexpr (THREE) sigma3 = s[2];
    if (blockIdx.x == 0 && tid == 0) {
      kp.out[0] = rho;
      kp.out[1] = active;
      kp.out[2] = s[1];
      kp.out[3] = 0;
    }
  } else {
    rho = kp.out[0];
    active = kp.out[1];
    if constexpr (THREE) {  // the barrier that publishes M p, with (M A^T r0, p)
      double sg[1] = {0};
#pragma unroll
      for (int k = 0; k < RPT; ++k) sg[0] += double(rh[k]) * double(p[k]);
      c.template sum<1>(sg, kSlotA);
      sigma3 = sg[0];
    } else {
      c.plain_barrier();
    }
  }

  int done = 0;
  for (; done < kp.iterations && active != 0.0; ++done) {
    double* rec = kp.out + kStateWords + kRecordWords * done;
    if constexpr (CG) {
      T q[RPT];
      double pq[1] = {0};
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        q[k] = row_product(m, k, 0, c);
        pq[0] += double(p[k]) * double(q[k]);
      }
      c.template sum<1>(pq, kSlotA);
      const double alpha = safe_div(rho, pq[0]);
      double s[2] = {0, 0};
      T z[RPT];
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        x[k] += T(alpha) * p[k];
        r[k] -= T(alpha) * q[k];
        z[k] = dd[k] * r[k];
        s[0] += double(r[k]) * double(z[k]);
        s[1] += double(r[k]) * double(r[k]);
      }
      c.template sum<2>(s, kSlotB);
      const double rz_new = s[0], rr = s[1];
      const double beta = safe_div(rz_new, rho);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        p[k] = z[k] + T(beta) * p[k];
        c.store(0, k * nthreads + tid, m.row[k], p[k]);
      }
      const double next = (rr > kp.threshold && alpha != 0.0 && rz_new != 0.0) ? 1.0 : 0.0;
      if (blockIdx.x == 0 && tid == 0) {
        rec[0] = rz_new;
        rec[1] = alpha;
        rec[2] = 0;
        rec[3] = rr;
        rec[4] = next;
      }
      rho = rz_new;
      active = next;
      if (active != 0.0 && done + 1 < kp.iterations) c.plain_barrier();
    } else {
      T s[RPT];
      double sigma[1] = {0};
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        v[k] = row_product(m, k, 0, c);
        if constexpr (!THREE) sigma[0] += double(r0[k]) * double(v[k]);
      }
      if constexpr (THREE)
        sigma[0] = sigma3;
      else
        c.template sum<1>(sigma, kSlotA);
      const double alpha = safe_div(rho, sigma[0]);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        s[k] = r[k] - T(alpha) * v[k];
        c.store(1, k * nthreads + tid, m.row[k], dd[k] * s[k]);
      }
      T t[RPT];
      c.plain_barrier();
      double q[4] = {0, 0, 0, 0};  // (t, s), (t, t), (r0, t), (r0, s)
#pragma unroll
      for (int k = 0; k < RPT; ++k) t[k] = row_product(m, k, 1, c);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        q[0] += double(t[k]) * double(s[k]);
        q[1] += double(t[k]) * double(t[k]);
        q[2] += double(r0[k]) * double(t[k]);
        q[3] += double(r0[k]) * double(s[k]);
      }
      c.template sum<4>(q, kSlotB);
      const double omega = safe_div(q[0], q[1]);
      const double rho_new = q[3] - omega * q[2];
      const double beta = safe_div(rho_new, rho) * safe_div(alpha, omega);
      double rr[THREE ? 2 : 1] = {};  // (r, r); THREE: and (M A^T r0, p')
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        x[k] += T(alpha) * (dd[k] * p[k]) + T(omega) * (dd[k] * s[k]);
        r[k] = s[k] - T(omega) * t[k];
        p[k] = r[k] + T(beta) * (p[k] - T(omega) * v[k]);
        c.store(0, k * nthreads + tid, m.row[k], dd[k] * p[k]);
        rr[0] += double(r[k]) * double(r[k]);
        if constexpr (THREE) rr[THREE ? 1 : 0] += double(rh[k]) * double(p[k]);
      }
      // Also publishes M p for the next iteration. THREE: slots 0-1 (kSlotInit, free in the loop).
      c.template sum<THREE ? 2 : 1>(rr, THREE ? kSlotInit : kSlotRR);
      if constexpr (THREE) sigma3 = rr[THREE ? 1 : 0];
      const double next =
          (rr[0] > kp.threshold && rho_new != 0.0 && omega != 0.0 && alpha != 0.0) ? 1.0 : 0.0;
      if (blockIdx.x == 0 && tid == 0) {
        rec[0] = rho_new;
        rec[1] = alpha;
        rec[2] = omega;
        rec[3] = rr[0];
        rec[4] = next;
      }
      rho = rho_new;
      active = next;
    }
  }

#pragma unroll
  for (int k = 0; k < RPT; ++k)
    if (m.row[k] < kp.n) {
      kp.x[m.row[k]] = x[k];
      kp.r[m.row[k]] = r[k];
      kp.p[m.row[k]] = p[k];
    }
  if (blockIdx.x == 0 && tid == 0) c.store_state(rho, active, done);
  // No block of a cluster may leave while another can still read its shared memory.
  if constexpr (SYNC == sync_cluster) cluster_sync();
}

// ---- BiCGStab with two barriers per iteration (resident_setup::form == 2) ----
//
// Every vector a product needs from other blocks is also published (pub_vec: global memory for a
// grid, each block's shared memory for a cluster), p and v double-buffered, and a block computes
// the entries of other blocks it needs from the published vectors of the previous phase instead
// of waiting for them to be published:
//   phase B (after barrier 1: alpha = rho / (r0, v)): s = r - alpha v, t = A M s, where another
//     block's s_j = r_j - alpha v_j comes from the published r and v; partial sums (t, s), (t, t),
//     (r0, t), (r0, s) -> barrier 2 (omega, rho' = (r0, s) - omega (r0, t), beta);
//   phase A: x += alpha M p + omega M s, r = s - omega t, p' = r + beta (p - omega v),
//     v' = A M p', where another block's p'_j = (s_j - omega t_j) + beta (p_j - omega v_j) comes
//     from the old s, t, p, v (p' and v' go to the other buffers, so nothing read in this phase
//     is overwritten); partial sums (r0, v') and (r, r) -> barrier 1.
// The block's own entries go through shared memory (one __syncthreads). Recomputed and owned
// entries use the same inline functions, so they are bit-identical (a launch that starts from
// the stored state computes the same v as the loop would have).
enum pub_vec { pub_r = 0, pub_s = 1, pub_t = 2, pub_p = 3, pub_v = 5 };  // p and v: 2 buffers each

template <class T>
__device__ __forceinline__ T step_s(T r, T v, T alpha) {
  return r - alpha * v;
}
template <class T>
__device__ __forceinline__ T step_r(T s, T t, T omega) {
  return s - omega * t;
}
template <class T>
__device__ __forceinline__ T step_p(T r, T p, T v, T omega, T beta) {
  return r + beta * (p - omega * v);
}

// Row k of A times a vector given element by element: `local` (shared memory) for the block's
// own columns, `remote(col)` for the others.
template <class T, int RPT, int SYNC, class Remote>
__device__ __forceinline__ T row_product_2(const owned_rows<T, RPT>& m, int k, const context<T, SYNC>& c,
                                           int base, const T* local, Remote remote) {
  constexpr int cached = owned_rows<T, RPT>::cached;
  const unsigned rb = 1u << c.kp.rb_shift;
  auto value = [&](int col) -> T {
    if constexpr (SYNC == sync_block) {
      return local[col];
    } else {
      const unsigned li = unsigned(col - base);
      return li < rb ? local[li] : remote(col);
    }
  };
  T acc = T(0);
  if constexpr (cached == 0) {
    if (c.mval != nullptr && m.len[k] <= kSmemNnz) {  // the row from shared memory
      const int rbm = 1 << c.kp.rb_shift, li = m.row[k] & (rbm - 1);
      int col[kSmemNnz];
      T val[kSmemNnz];
#pragma unroll
      for (int e = 0; e < kSmemNnz; ++e)
        if (e < m.len[k]) {
          col[e] = c.mcol[e * rbm + li];
          val[e] = c.mval[e * rbm + li];
        }
#pragma unroll
      for (int e = 0; e < kSmemNnz; ++e)
        if (e < m.len[k]) acc += val[e] * value(col[e]);
      return acc;
    }
  }
  if (cached > 0 && m.len[k] <= cached) {
#pragma unroll
    for (int e = 0; e < (cached > 0 ? cached : 1); ++e)
      if (e < m.len[k]) acc += m.val[k][e] * value(m.col[k][e]);
  } else if (m.len[k] <= kCached) {
    int col[kCached];
    T val[kCached];
#pragma unroll
    for (int e = 0; e < kCached; ++e)
      if (e < m.len[k]) {
        col[e] = __ldg(c.kp.col_idx + m.start[k] + e);
        val[e] = __ldg(c.kp.values + m.start[k] + e);
      }
#pragma unroll
    for (int e = 0; e < kCached; ++e)
      if (e < m.len[k]) acc += val[e] * value(col[e]);
  } else {
    for (int e = m.start[k]; e < m.start[k] + m.len[k]; ++e)
      acc += __ldg(c.kp.values + e) * value(__ldg(c.kp.col_idx + e));
  }
  return acc;
}

constexpr int kSlot2A = 0;  // (r0, v), (r, r)   [init: (b, b) twice]
constexpr int kSlot2B = 2;  // (t, s), (t, t), (r0, t), (r0, s)

// MAT 1: the matrix as CSR (row_product_2); 2: by diagonals (dia_row_product).
template <class T, int RPT, int SYNC, int MAT = 1>
__global__ void __launch_bounds__(kMaxThreads, 1) resident_kernel_2(const kernel_params<T> kp) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  __shared__ double warp_part[kSlots][kMaxWarps];
  __shared__ double block_part[kSlots];
  const int tid = int(threadIdx.x), nthreads = int(blockDim.x);
  context<T, SYNC> c{kp, reinterpret_cast<T*>(dynamic_smem), warp_part, block_part, tid & 31, tid >> 5,
                     (nthreads + 31) >> 5};
  T* const local = c.smem;  // the block's own entries of the vector being multiplied (RB)
  const int base = int(blockIdx.x) << kp.rb_shift;
  const T* const dg = kp.d;
  auto diag = [&](int col) -> T { return dg ? __ldg(dg + col) : T(1); };

  owned_rows<T, RPT> m;
  T x[RPT], r[RPT], r0[RPT], p[RPT], v[RPT], dd[RPT];
#pragma unroll
  for (int k = 0; k < RPT; ++k) {
    const int row = base + k * nthreads + tid;
    m.row[k] = row;
    const bool valid = row < kp.n;
    m.start[k] = MAT == 1 && valid ? kp.row_ptr[row] : 0;
    m.len[k] = MAT == 1 && valid ? kp.row_ptr[row + 1] - m.start[k] : 0;
    if constexpr (MAT == 1 && owned_rows<T, RPT>::cached > 0) {
#pragma unroll
      for (int e = 0; e < owned_rows<T, RPT>::cached; ++e) {
        const bool here = e < m.len[k];
        m.col[k][e] = here ? kp.col_idx[m.start[k] + e] : 0;
        m.val[k][e] = here ? kp.values[m.start[k] + e] : T(0);
      }
    }
    const T bk = valid ? kp.b[row] : T(0);
    dd[k] = !valid ? T(0) : kp.d ? kp.d[row] : T(1);
    r0[k] = bk;
    if (kp.init) {
      x[k] = T(0);
      r[k] = bk;
      p[k] = bk;
    } else {
      x[k] = valid ? kp.x[row] : T(0);
      r[k] = valid ? kp.r[row] : T(0);
      p[k] = valid ? kp.p[row] : T(0);
    }
    const int li = k * nthreads + tid;
    local[li] = dd[k] * p[k];
    c.pstore(pub_r, li, row, r[k]);
    c.pstore(pub_p, li, row, p[k]);
  }
  if constexpr (MAT == 2) load_dia_rows(m, kp);
  // The product of row k with a vector given element by element (own block: `local`, shared
  // memory; other blocks: remote(col)), CSR or by diagonals.
  auto product = [&](int k, auto remote) -> T {
    if constexpr (MAT == 2) {
      return dia_row_product(m, k, c, [&](int col) -> T {
        if constexpr (SYNC == sync_block) {
          return local[col];
        } else {
          const unsigned li = unsigned(col - base);
          return li < (1u << kp.rb_shift) ? local[li] : remote(col);
        }
      });
    } else {
      return row_product_2(m, k, c, base, local, remote);
    }
  };

  load_matrix_smem<MAT, RPT, SYNC>(m, c, kp, dynamic_smem, nthreads, tid);

  double rho, active;
  if (kp.init) {
    double s[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < RPT; ++k) s[0] += double(r[k]) * double(r[k]);
    s[1] = s[0];
    c.template sum<2>(s, kSlot2A);
    rho = s[0];
    active = s[1] > kp.threshold ? 1.0 : 0.0;
    if (blockIdx.x == 0 && tid == 0) {
      kp.out[0] = rho;
      kp.out[1] = active;
      kp.out[2] = s[1];
      kp.out[3] = 0;
    }
  } else {
    rho = kp.out[0];
    active = kp.out[1];
    c.plain_barrier();
  }

  int done = 0;
  int cur = 0;  // buffer of p and v
  double sigma = 0;
  if (kp.iterations > 0 && active != 0.0) {  // v = A M p from the published p
    double part[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      v[k] = product(k, [&](int col) { return diag(col) * c.pload(pub_p, col); });
      c.pstore(pub_v, k * nthreads + tid, m.row[k], v[k]);
      part[0] += double(r0[k]) * double(v[k]);
    }
    c.template sum<2>(part, kSlot2A);
    sigma = part[0];
  }

  for (; done < kp.iterations && active != 0.0; ++done) {
    double* rec = kp.out + kStateWords + kRecordWords * done;
    const double alpha = safe_div(rho, sigma);
    const T ta = T(alpha);
    // Phase B.
    T s[RPT];
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      s[k] = step_s(r[k], v[k], ta);
      const int li = k * nthreads + tid;
      local[li] = dd[k] * s[k];
      c.pstore(pub_s, li, m.row[k], s[k]);
    }
    __syncthreads();
    double q[4] = {0, 0, 0, 0};  // (t, s), (t, t), (r0, t), (r0, s)
    T t[RPT];
    const int vcur = pub_v + cur;
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      t[k] = product(k, [&](int col) {
        return diag(col) * step_s(c.pload(pub_r, col), c.pload(vcur, col), ta);
      });
      c.pstore(pub_t, k * nthreads + tid, m.row[k], t[k]);
      q[0] += double(t[k]) * double(s[k]);
      q[1] += double(t[k]) * double(t[k]);
      q[2] += double(r0[k]) * double(t[k]);
      q[3] += double(r0[k]) * double(s[k]);
    }
    c.template sum<4>(q, kSlot2B);
    const double omega = safe_div(q[0], q[1]);
    const double rho_new = q[3] - omega * q[2];
    const double beta = safe_div(rho_new, rho) * safe_div(alpha, omega);
    const bool go_on = rho_new != 0.0 && omega != 0.0 && alpha != 0.0;
    const T to = T(omega), tb = T(beta);
    // Phase A.
    const int nxt = cur ^ 1;
    double part[2] = {0, 0};  // (r0, v'), (r, r)
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      x[k] += ta * (dd[k] * p[k]) + to * (dd[k] * s[k]);
      r[k] = step_r(s[k], t[k], to);
      p[k] = step_p(r[k], p[k], v[k], to, tb);
      const int li = k * nthreads + tid;
      local[li] = dd[k] * p[k];
      c.pstore(pub_r, li, m.row[k], r[k]);
      c.pstore(pub_p + nxt, li, m.row[k], p[k]);
      part[1] += double(r[k]) * double(r[k]);
    }
    if (go_on && done + 1 < kp.iterations) {  // uniform over the grid
      __syncthreads();
      const int pc = pub_p + cur, vc = pub_v + cur;
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        v[k] = product(k, [&](int col) {
          const T rj = step_r(c.pload(pub_s, col), c.pload(pub_t, col), to);
          return diag(col) * step_p(rj, c.pload(pc, col), c.pload(vc, col), to, tb);
        });
        c.pstore(pub_v + nxt, k * nthreads + tid, m.row[k], v[k]);
        part[0] += double(r0[k]) * double(v[k]);
      }
    }
    c.template sum<2>(part, kSlot2A);
    sigma = part[0];
    const double next = (part[1] > kp.threshold && go_on) ? 1.0 : 0.0;
    if (blockIdx.x == 0 && tid == 0) {
      rec[0] = rho_new;
      rec[1] = alpha;
      rec[2] = omega;
      rec[3] = part[1];
      rec[4] = next;
    }
    rho = rho_new;
    active = next;
    cur = nxt;
  }

#pragma unroll
  for (int k = 0; k < RPT; ++k)
    if (m.row[k] < kp.n) {
      kp.x[m.row[k]] = x[k];
      kp.r[m.row[k]] = r[k];
      kp.p[m.row[k]] = p[k];
    }
  if (blockIdx.x == 0 && tid == 0) c.store_state(rho, active, done);
  if constexpr (SYNC == sync_cluster) cluster_sync();
}

// ---- One-barrier BiCGStab on a grid (form 4, resident_kernel_1; banded matrices) ----
//
// One grid barrier per iteration. Its sums give omega, rho' and beta of this iteration and,
// through sigma' = (r0, A M p') = (M A^T r0, p') with p' = s - omega t + beta (p - omega v)
// expanded, alpha' of the next one:
//   (t, s), (t, t), (r0, t), (r0, s), (h, s), (h, t), (h, p), (h, v), (r, r)   [h = M A^T r0]
//   omega = (t, s) / (t, t), rho' = (r0, s) - omega (r0, t), beta = rho' / rho * alpha / omega,
//   sigma' = (h, s) - omega (h, t) + beta ((h, p) - omega (h, v)), alpha' = rho' / sigma'.
// After the barrier a block needs v' = A M p' and s' = r' - alpha' v' on its rows and their
// neighbours (t' = A M s' on its rows), so it recomputes p' two hops and r' one hop beyond its
// rows from the s, t, p, v the other blocks published before the barrier. The block's rows are a
// tile of the matrix's grid (a stencil on a 2-D grid) or a band of rows (see one_tiles), and the
// hops are windows around them:
//   W2 (the tile and two hops of the stencil around it): M p' (shared memory, `ph`);
//   W1 (one hop): M s' (`sh`), r' on its halo cells (`rh`), the matrix values by diagonals
//   (`mat`, loaded once per launch; NaN where there is no entry or no row, zero in the kernel
//   for up to 5 diagonals).
// A pass: step 1 fills ph and rh (own rows from registers, halo rows recomputed: one L2 round
// trip), step 2 computes v' and s' on W1, step 3 t' on the own rows, the nine sums and the
// published s', t', p', v' of the tile's ring (the own cells another block's W2 reaches; two
// buffer sets, alternating per pass, so nothing read in a pass is overwritten before the next
// barrier; the sums' slots alternate likewise). Own and recomputed entries come from the same
// inline functions (bit-identical). A constant stencil (kernel_params::constant) is applied from
// its coefficients; `mat` is then left unfilled.
// (r, r) of an iteration's r is summed in the next pass, so the record of iteration k is
// completed at the barrier after it; a launch that ran its iterations ends with one sum of
// (r, r) (the next launch sums the same value again in its first pass, bit for bit) and stores x,
// r, p, rho and alpha (aux[0]), from which the next launch starts without any other state.
// More work per row than the two-barrier form (the halo recomputed two hops deep), for one grid
// barrier and one gather less per iteration.
constexpr int kSlot1Set = 9;  // the nine sums of a pass: slots [0, 9) and [9, 18) alternately
enum one_vec { ov_s = 0, ov_t = 1, ov_p = 2, ov_v = 3, ov_count = 4 };  // published: 2 sets of 4 x n

// The rows of a block (form 4): the matrix as a stencil on a grid_h x grid_w grid (row = i x
// grid_w + j; offset k = dia_a[k] x grid_w + dia_b[k]; a band is the grid of one row, grid_w =
// n, dia_a = 0) cut into tiles_i x tiles_j tiles, balanced: block (bi, bj) owns the cells
// [grid_h bi / tiles_i, grid_h (bi + 1) / tiles_i) x [grid_w bj / tiles_j, ...). halo = {above,
// below, left, right}: how far the stencil reaches (max -a, max a, max -b, max b).
// Shared memory of resident_kernel_1 in elements for tiles of at most ti x tj cells: ph (W2), sh
// and rh (W1), the values (dc x W1), the Jacobi diagonal (W2, with a preconditioner).
struct one_tiles {
  int ti, tj;  // the largest tile
  int halo[4];
  long long w1() const { return (long long)(ti + halo[0] + halo[1]) * (tj + halo[2] + halo[3]); }
  long long w2() const { return (long long)(ti + 2 * (halo[0] + halo[1])) * (tj + 2 * (halo[2] + halo[3])); }
  long long elements(int dc, bool jacobi) const { return w2() * (jacobi ? 2 : 1) + w1() * (2 + dc); }
  // With the halo tables (one int4 per halo cell of W2 and of W1) after the values, 16-byte aligned.
  long long bytes(int dc, bool jacobi, int element) const {
    return (elements(dc, jacobi) * element + 15) / 16 * 16 + 16 * (w2() + w1() - 2LL * ti * tj);
  }
};

template <class T, int RPT, int DMAX>
__global__ void __launch_bounds__(kMaxThreads, 1) resident_kernel_1(const kernel_params<T> kp) {
  // DMAX: the diagonals the products are unrolled for (dia_count <= DMAX). With 5 (the 2-D
  // 5-point stencil, tridiagonal and banded matrices up to 5 diagonals) a missing entry is a zero
  // in `mat` and every term is added (no NaN test): the same value up to the sign of a zero sum
  // (and where an entry of the vector is not finite), own and recomputed rows alike. Measured on
  // an H100 (docs/linalg.md): 5 instead of 8 saved 0.3 us per iteration at 1e4 and 0.6 us at
  // 1e5, the zeros another 0.1-0.2 us at 1 row per thread (none at 2).
  constexpr bool ZERO = DMAX == 5;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  __shared__ double warp_part[kSlots][kMaxWarps];
  __shared__ double block_part[kSlots];
  const int tid = int(threadIdx.x), nthreads = int(blockDim.x);
  context<T, sync_grid> c{kp, nullptr, warp_part, block_part, tid & 31, tid >> 5, (nthreads + 31) >> 5};
  const int dc = kp.dia_count, gw = kp.grid_w, gh = kp.grid_h;
  // The block's tile: rows [i0, i0 + ti) x columns [j0, j0 + tj) of the grid.
  const int bi = int(blockIdx.x) / kp.tiles_j, bj = int(blockIdx.x) - bi * kp.tiles_j;
  const int i0 = int((long long)gh * bi / kp.tiles_i), ti = int((long long)gh * (bi + 1) / kp.tiles_i) - i0;
  const int j0 = int((long long)gw * bj / kp.tiles_j), tj = int((long long)gw * (bj + 1) / kp.tiles_j) - j0;
  const int ha = kp.halo[0], hb = kp.halo[2];  // above and left (below and right: halo[1], halo[3])
  // W1: the tile and one hop around it ((ti + ha + halo[1]) x v1 cells, origin (i0 - ha, j0 - hb));
  // W2: two hops (origin (i0 - 2 ha, j0 - 2 hb)). Cell (y, x) of W1 is (y + ha, x + hb) of W2.
  const int v1 = tj + hb + kp.halo[3], v2 = tj + 2 * (hb + kp.halo[3]);
  const int h1 = ti + ha + kp.halo[1], n1 = h1 * v1, n2 = (ti + 2 * (ha + kp.halo[1])) * v2;
  const int own = ti * tj, halo1 = n1 - own, halo2 = n2 - own;
  const T* const dg = kp.d;
  T* const ph = reinterpret_cast<T*>(dynamic_smem);  // M p' over W2
  T* const sh = ph + n2;                              // M s' over W1
  T* const rh = sh + n1;                              // r' over W1 (its halo cells)
  T* const mat = rh + n1;                             // [e * n1 + cell of W1]
  T* const dw = mat + std::size_t(dc) * std::size_t(n1);  // Jacobi diagonal over W2 (dg only)
  // The halo cells, found once per launch (no index arithmetic per iteration): W2's {cell of W2,
  // cell of W1 or -1, row or -1}, W1's {cell of W1, cell of W2, row or -1}.
  const std::size_t values_end = std::size_t(n2) * (dg ? 2 : 1) + std::size_t(n1) * std::size_t(2 + dc);
  int4* const tab2 = reinterpret_cast<int4*>(dynamic_smem + (values_end * sizeof(T) + 15) / 16 * 16);
  int4* const tab1 = tab2 + halo2;
  const std::size_t nn = std::size_t(kp.n);
  // The row of grid cell (gi, gj), or -1 outside the grid.
  auto grid_row = [gw, gh](int gi, int gj) { return gi >= 0 && gi < gh && gj >= 0 && gj < gw ? gi * gw + gj : -1; };
  // Cell q of a window's halo (the window of width vw around the tile, ma rows above and mb
  // columns left of it, without the tile's cells): top rows, then the sides of the tile's rows,
  // then the bottom rows.
  auto halo_cell = [ti, tj](int q, int ma, int mb, int vw, int& y, int& x) {
    const int top = ma * vw, side = vw - tj;
    if (q < top) {
      y = q / vw;
      x = q - y * vw;
    } else if (q - top < ti * side) {
      const int u = (q - top) / side;
      y = ma + u;
      x = q - top - u * side;
      if (x >= mb) x += tj;
    } else {
      const int m = q - top - ti * side, u = m / vw;
      y = ma + ti + u;
      x = m - u * vw;
    }
  };

  for (int i = tid; i < (kp.constant ? 0 : dc * n1); i += nthreads) {
    const int e = i / n1, m = i - e * n1, y = m / v1, row = grid_row(i0 - ha + y, j0 - hb + (m - y * v1));
    if constexpr (ZERO) {
      const T a = row >= 0 ? kp.dia[std::size_t(e) * nn + std::size_t(row)] : T(0);
      mat[i] = a == a ? a : T(0);
    } else {
      mat[i] = row >= 0 ? kp.dia[std::size_t(e) * nn + std::size_t(row)] : T(NAN);
    }
  }
  if (dg != nullptr)
    for (int i = tid; i < n2; i += nthreads) {
      const int y = i / v2, row = grid_row(i0 - 2 * ha + y, j0 - 2 * hb + (i - y * v2));
      dw[i] = row >= 0 ? dg[row] : T(0);
    }
  for (int q = tid; q < halo2; q += nthreads) {
    int y, xx;
    halo_cell(q, 2 * ha, 2 * hb, v2, y, xx);
    const int y1 = y - ha, x1 = xx - hb;
    tab2[q] = make_int4(y * v2 + xx, y1 >= 0 && y1 < h1 && x1 >= 0 && x1 < v1 ? y1 * v1 + x1 : -1,
                        grid_row(i0 - 2 * ha + y, j0 - 2 * hb + xx), 0);
  }
  for (int q = tid; q < halo1; q += nthreads) {
    int y, xx;
    halo_cell(q, ha, hb, v1, y, xx);
    tab1[q] = make_int4(y * v1 + xx, (y + ha) * v2 + xx + hb, grid_row(i0 - ha + y, j0 - hb + xx), 0);
  }
  // The row at cell `mi` of W1 times `vec` (pointing at the row's cell in a window of width vw),
  // by diagonals: the non-NaN values (ZERO: every value) in increasing offset order (the CSR
  // order, as dia_row_product). A neighbour outside the grid is a zero of the window.
  // With a constant stencil (kp.constant) the coefficients instead: the same terms, plus +-0 for
  // the neighbours outside the grid (window zeros), which leaves a sum that starts at +0 unchanged
  // (bit for bit, tested). Half the shared-memory loads of a product; measured on an H100
  // (docs/linalg.md): 100,489 rows 6.59-6.61 -> 6.22-6.34 us per iteration.
  auto product = [&](int mi, const T* vec, int vw) -> T {
    T acc = T(0);
    if (kp.constant) {
#pragma unroll
      for (int e = 0; e < DMAX; ++e)
        if (e < dc) acc += kp.coef[e] * vec[kp.dia_a[e] * vw + kp.dia_b[e]];
      return acc;
    }
#pragma unroll
    for (int e = 0; e < DMAX; ++e)
      if (e < dc) {  // both loads unconditional (the window covers every offset), so all are in flight
        const T a = mat[e * n1 + mi], xe = vec[kp.dia_a[e] * vw + kp.dia_b[e]];
        if constexpr (ZERO)
          acc += a * xe;
        else if (a == a)
          acc += a * xe;
      }
    return acc;
  };

  // Own cells: o = k * nthreads + tid < ti x tj, row-major in the tile; their rows, and their cells
  // of W1 (low 16 bits) and W2 (high 16 bits; windows hold fewer than 65,536 cells: the host
  // checks) in one register.
  // `ring` bit k: own cell k lies within two hops of the tile's edges (2 halo[1] rows from the
  // top, 2 halo[0] from the bottom, 2 halo[3] columns from the left, 2 halo[2] from the right),
  // where another block's W2 can reach it: only those cells' s', t', p', v' are published (at
  // 1e5, 224 of a 20 x 40 tile's 800 cells). Measured on an H100 (docs/linalg.md): 100,489 rows
  // 6.89-6.94 -> 6.22-6.34 us per iteration (fewer stores for the barrier's release to wait for).
  int orow[RPT], o12[RPT];
  unsigned ring = 0;
  // r0 = b and h = M A^T r0 are read again from global memory (L1) where the sums need them:
  // 4 x RPT registers fewer across the loop (the 2-rows kernel spilled in its block sums).
  T x[RPT], r[RPT], p[RPT], dd[RPT];
#pragma unroll
  for (int k = 0; k < RPT; ++k) {
    const int o = k * nthreads + tid, u = o / tj, w = o - u * tj;
    const bool valid = o < own;
    orow[k] = valid ? (i0 + u) * gw + j0 + w : -1;
    o12[k] = valid ? int(unsigned((u + ha) * v1 + w + hb) | (unsigned((u + 2 * ha) * v2 + w + 2 * hb) << 16)) : 0;
    if (valid && (u < 2 * kp.halo[1] || u >= ti - 2 * ha || w < 2 * kp.halo[3] || w >= tj - 2 * hb))
      ring |= 1u << k;
    const int row = orow[k];
    const T bk = valid ? kp.b[row] : T(0);

    dd[k] = !valid ? T(0) : dg ? dg[row] : T(1);
    x[k] = kp.init || !valid ? T(0) : kp.x[row];
    r[k] = kp.init ? bk : valid ? kp.r[row] : T(0);
    p[k] = kp.init ? bk : valid ? kp.p[row] : T(0);
  }
  // Defined after o12 is filled: a by-reference capture of a not-yet-assigned array reads to
  // the CUDA front end as a use before the value is set (a false warning, but a confusing one).
  auto o1 = [&](int k) { return o12[k] & 0xffff; };
  auto o2 = [&](int k) { return int(unsigned(o12[k]) >> 16); };

  double rho, alpha, active;
  if (kp.init) {  // rho = (r0, r) = (b, b), (r, r), sigma = (h, p) with r = p = b
    double q[3] = {0, 0, 0};
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      q[0] += double(r[k]) * double(r[k]);
      q[2] += double(orow[k] >= 0 ? kp.r0hat[orow[k]] : T(0)) * double(p[k]);
    }
    q[1] = q[0];
    c.template sum<3>(q, 0);
    rho = q[0];
    alpha = safe_div(rho, q[2]);
    active = q[1] > kp.threshold ? 1.0 : 0.0;
    if (blockIdx.x == 0 && tid == 0) kp.out[2] = q[1];
  } else {
    rho = kp.out[0];
    active = kp.out[1];
    alpha = kp.aux[0];
  }

  int done = 0;
  if (kp.iterations > 0 && active != 0.0) {
    T s[RPT], t[RPT], v[RPT];
    T to = T(0), tb = T(0);  // omega and beta of the previous iteration (halo recomputation)
    double alpha_prev = 0, omega_prev = 0;
    bool go_prev = true;
    // Completes the record of the previous iteration with its (r, r); false when the solve stops.
    auto finish = [&](int j, double rr) {
      const double next = rr > kp.threshold && go_prev ? 1.0 : 0.0;
      if (blockIdx.x == 0 && tid == 0) {
        double* rec = kp.out + kStateWords + kRecordWords * (j - 1);
        rec[0] = rho;
        rec[1] = alpha_prev;
        rec[2] = omega_prev;
        rec[3] = rr;
        rec[4] = next;
      }
      active = next;
      return next != 0.0;
    };
    for (int j = 0;; ++j) {
      const int set = j & 1;
      if (j == kp.iterations) {  // the last iteration's (r, r) for its record
        double q[1] = {0};
#pragma unroll
        for (int k = 0; k < RPT; ++k) q[0] += double(r[k]) * double(r[k]);
        c.template sum<1>(q, set * kSlot1Set + 8);
        finish(j, q[0]);
        done = j;
        break;
      }
      // Step 1: M p' over W2, r' over W1's halo.
#pragma unroll
      for (int k = 0; k < RPT; ++k)
        if (orow[k] >= 0) ph[o2(k)] = dd[k] * p[k];
      const T* const pub = kp.xp + std::size_t(ov_count) * nn * std::size_t(set ^ 1);
      for (int q0 = 0; q0 < halo2; q0 += 4 * nthreads) {
        T hr[4], hp[4], hv[4], ht[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int q = q0 + u * nthreads + tid;
          const int row = q < halo2 ? tab2[q].z : -1;
          hr[u] = hp[u] = hv[u] = ht[u] = T(0);
          if (row >= 0) {
            if (j == 0) {
              hr[u] = kp.init ? kp.b[row] : kp.r[row];
              hp[u] = kp.init ? kp.b[row] : kp.p[row];
            } else {
              hr[u] = __ldcg(pub + std::size_t(ov_s) * nn + std::size_t(row));
              ht[u] = __ldcg(pub + std::size_t(ov_t) * nn + std::size_t(row));
              hp[u] = __ldcg(pub + std::size_t(ov_p) * nn + std::size_t(row));
              hv[u] = __ldcg(pub + std::size_t(ov_v) * nn + std::size_t(row));
            }
          }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int q = q0 + u * nthreads + tid;
          if (q < halo2) {
            const int4 cell = tab2[q];  // read again: fewer registers live across the loads
            T rj = hr[u], pj = hp[u];
            if (j > 0) {  // the owner's r' and p' (same functions, same operands)
              rj = step_r(hr[u], ht[u], to);
              pj = step_p(rj, hp[u], hv[u], to, tb);
            }
            ph[cell.x] = (dg ? dw[cell.x] : T(1)) * pj;
            if (cell.y >= 0) rh[cell.y] = rj;
          }
        }
      }
      __syncthreads();
      // Step 2: v' = A M p' and s' = r' - alpha' v' over W1.
      const T ta = T(alpha);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        v[k] = orow[k] >= 0 ? product(o1(k), ph + o2(k), v2) : T(0);
        s[k] = step_s(r[k], v[k], ta);
        if (orow[k] >= 0) sh[o1(k)] = dd[k] * s[k];
      }
      for (int q0 = 0; q0 < halo1; q0 += 2 * nthreads) {  // two cells at once: their loads in flight together
        T value[2];
        int i1[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int q = q0 + u * nthreads + tid;
          value[u] = T(0);
          i1[u] = -1;
          if (q < halo1) {
            const int4 cell = tab1[q];
            i1[u] = cell.x;
            if (cell.z >= 0) value[u] = (dg ? dw[cell.y] : T(1)) * step_s(rh[cell.x], product(cell.x, ph + cell.y, v2), ta);
          }
        }
#pragma unroll
        for (int u = 0; u < 2; ++u)
          if (i1[u] >= 0) sh[i1[u]] = value[u];
      }
      __syncthreads();
      // Step 3: t' = A M s' on the own rows, the sums, s', t', p', v' published.
      double q[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
      T* const out = kp.xp + std::size_t(ov_count) * nn * std::size_t(set);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        const int row = orow[k];
        const T r0k = row >= 0 ? __ldg(kp.b + row) : T(0), hkt = row >= 0 ? __ldg(kp.r0hat + row) : T(0);
        t[k] = row >= 0 ? product(o1(k), sh + o1(k), v1) : T(0);
        const double sk = double(s[k]), tk = double(t[k]), hk = double(hkt);
        q[0] += tk * sk;
        q[1] += tk * tk;
        q[2] += double(r0k) * tk;
        q[3] += double(r0k) * sk;
        q[4] += hk * sk;
        q[5] += hk * tk;
        q[6] += hk * double(p[k]);
        q[7] += hk * double(v[k]);
        q[8] += double(r[k]) * double(r[k]);
        if (ring & (1u << k)) {
          out[std::size_t(ov_s) * nn + std::size_t(row)] = s[k];
          out[std::size_t(ov_t) * nn + std::size_t(row)] = t[k];
          out[std::size_t(ov_p) * nn + std::size_t(row)] = p[k];
          out[std::size_t(ov_v) * nn + std::size_t(row)] = v[k];
        }
      }
      c.template sum<9, RPT == 1>(q, set * kSlot1Set);  // 1 row per thread: blocks of 256 (8 warps)
      if (j > 0 && !finish(j, q[8])) {
        done = j;
        break;
      }
      // Two divisions on the path instead of four: 1 / (t, t), 1 / (t, s) and 1 / rho side by
      // side (alpha / omega = alpha (t, t) / (t, s)), then alpha'. The same guards as safe_div:
      // a zero divisor gives 0 (omega = 0 or rho = 0: beta = 0).
      const double inv_rho = inv_or_zero(rho);
      const double omega = q[0] * inv_or_zero(q[1]);
      const double rho_new = q[3] - omega * q[2];
      const double beta = rho_new * inv_rho * (alpha * q[1] * inv_or_zero(q[0]));
      const double sigma_new = q[4] - omega * q[5] + beta * (q[6] - omega * q[7]);
      go_prev = rho_new != 0.0 && omega != 0.0 && alpha != 0.0;
      to = T(omega);
      tb = T(beta);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        x[k] += ta * (dd[k] * p[k]) + to * (dd[k] * s[k]);
        r[k] = step_r(s[k], t[k], to);
        p[k] = step_p(r[k], p[k], v[k], to, tb);
      }
      alpha_prev = alpha;
      omega_prev = omega;
      rho = rho_new;
      alpha = safe_div(rho_new, sigma_new);
    }
  }

#pragma unroll
  for (int k = 0; k < RPT; ++k) {
    const int row = orow[k];
    if (row >= 0) {
      kp.x[row] = x[k];
      kp.r[row] = r[k];
      kp.p[row] = p[k];
    }
  }
  if (blockIdx.x == 0 && tid == 0) {
    c.store_state(rho, active, done);
    kp.aux[0] = alpha;
  }
}

// ---- Streaming two-barrier BiCGStab for any n (`launch_mode::fused`, resident_setup::streaming) ----
//
// The two-barrier form above with every vector in global memory instead of registers: a
// cooperative grid (co-resident blocks, grid-stride over rows) runs a batch of iterations in one
// launch, with the same barrier (context::barrier), the same deterministic reductions
// (context::sum: per-thread double sums in a fixed row order, warp butterflies, every thread adds
// the block sums in the same order), the same step functions and the same records and state words
// for the host. Vectors in the exchange buffer (stream_vec, n each): r and p and v in two buffers
// (ping-pong per iteration: phase A reads the old ones, writes the new ones), t. s is never
// stored: s_j = r_j - alpha v_j is recomputed wherever it is needed (owned or neighbour row, from
// the same inline function). x is updated in place in setup.x; sigma = (r0, v) and the buffer
// index stay in two words (aux) between launches, so a batch boundary recomputes nothing and
// changes nothing.
//   phase B: s_i = r_i - alpha v_i, t_i = sum_j a_ij d_j (r_j - alpha v_j); t stored;
//     (t, s), (t, t), (r0, t), (r0, s) -> barrier (omega, rho', beta)
//   phase A: x_i += alpha d_i p_i + omega d_i s_i, r'_i = s_i - omega t_i,
//     p'_i = r'_i + beta (p_i - omega v_i), v'_i = sum_j a_ij d_j p'_j with p'_j from the old
//     r, v, t, p (same function as p'_i); r', p', v' stored in the other buffers;
//     (r0, v'), (r', r') -> barrier.
// Bytes per row and iteration (fp64, CSR with 5 nonzeros, no preconditioner, neighbours' entries
// from L2): phase B reads the row (4 + 5 x 4 + 5 x 8 = 64 B), r, v, r0 (24 B), writes t (8 B);
// phase A reads the row (64 B), x, r, v, p, t, r0 (48 B), writes x, r', p', v' (32 B): 240 B
// (Jacobi: + 16 B for d_i twice), against the 320 B of the graph mode's floor.
enum stream_vec { sv_r = 0, sv_p = 2, sv_v = 4, sv_t = 6, sv_count = 7 };  // r, p, v: 2 buffers each
constexpr int kStreamThreads = 512;
// Registers bounded for 2 blocks of 512 per SM (64 registers; 1 block, 128 registers, measured
// slower). The automatic grid is then 2 blocks per SM.
constexpr int kStreamBlocksPerSm = 2;
constexpr int kStreamNnz = 5;       // rows of at most this many nonzeros: all loads in flight (8 spills)
constexpr int kSlotStreamInit = 6;  // (r0, v) of the initial launch (kSlot2A and kSlot2B as above)

template <class T, class F>
__device__ __forceinline__ T stream_row_product(const kernel_params<T>& kp, int row, F entry) {
  const int start = __ldg(kp.row_ptr + row), len = __ldg(kp.row_ptr + row + 1) - start;
  T acc = T(0);
  if (len <= kStreamNnz) {
    int col[kStreamNnz];
    T val[kStreamNnz];
#pragma unroll
    for (int e = 0; e < kStreamNnz; ++e)
      if (e < len) {
        col[e] = __ldg(kp.col_idx + start + e);
        val[e] = __ldg(kp.values + start + e);
      }
#pragma unroll
    for (int e = 0; e < kStreamNnz; ++e)
      if (e < len) acc += val[e] * entry(col[e]);
  } else {
    for (int e = start; e < start + len; ++e) acc += __ldg(kp.values + e) * entry(__ldg(kp.col_idx + e));
  }
  return acc;
}

// The row product of the fused BiCGStab kernel: MAT 1 CSR (stream_row_product), MAT 2 diagonal
// storage: the row's dia_count values (coalesced: diagonal-major), then value x entry(i + offset)
// for every value that is not NaN, in increasing offset order. The CSR row holds exactly the
// non-NaN entries, sorted by column (linalg/diagonal.hpp checks it on the host), so this is the
// CSR loop's sequence of operations, bit for bit; the NaN padding never enters a sum (a padding
// 0 x entry would turn -0 into +0 and an infinite entry into NaN), and entry() is never called
// outside the matrix (the padding there is NaN too). 40 B per row (fp64, 5 diagonals) instead of
// 64 B: no row pointer, no column indices.
template <int MAT, class T, class F>
__device__ __forceinline__ T stream_product(const kernel_params<T>& kp, int row, F entry) {
  if constexpr (MAT == 2) {
    T val[kDiaMax];
    const std::size_t nn = std::size_t(kp.n);
#pragma unroll
    for (int k = 0; k < kDiaMax; ++k)
      if (k < kp.dia_count) val[k] = __ldg(kp.dia + std::size_t(k) * nn + std::size_t(row));
    T acc = T(0);
#pragma unroll
    for (int k = 0; k < kDiaMax; ++k)
      if (k < kp.dia_count && val[k] == val[k]) acc += val[k] * entry(row + kp.dia_off[k]);
    return acc;
  } else {
    return stream_row_product(kp, row, entry);
  }
}

// Loads of the vectors other blocks wrote in this launch (r, v, p, t), fused BiCGStab kernel:
// LD 1 through L2 only (ld.global.cg); LD 2 cached in L1 as well (ld.global.ca), so the columns
// i - 1, i, i + 1 of a stencil row and the own row's entries that the neighbour recomputation
// reads again are served by L1 instead of 3-5 separate L2 requests. Coherent: every block passes
// each grid barrier through a gpu-scope acquire (ld.acquire / atom.acq_rel / grid.sync) followed
// by __syncthreads, which orders the other blocks' stores before the loads (PTX memory model: the
// cache operator is a hint), and nothing read in a phase is written in the same phase (r, p, v
// ping-pong; t written in phase B, read in phase A).
template <int LD, class T>
__device__ __forceinline__ T vload(const T* p) {
  if constexpr (LD == 2)
    return __ldca(p);
  else
    return __ldcg(p);
}

// The rows of a thread: grid-stride (row first + k * stride while < n). One copy of the loop
// body (fp64 at 64 registers spills 112 B).
struct row_walk {
  int first, stride, end;
  __device__ __forceinline__ explicit row_walk(int n) {
    first = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
    stride = int(gridDim.x) * int(blockDim.x);
    end = n;
  }
  template <class F>
  __device__ __forceinline__ void operator()(F&& body) const {
    for (int i = first; i < end; i += stride) body(i);
  }
};

// Registers bounded for kStreamBlocksPerSm blocks of kStreamThreads per SM (64 registers). LD:
// vload (1 L2, 2 L1); MAT: stream_product (1 CSR, 2 diagonals).
template <class T, int LD, int MAT>
__global__ void __launch_bounds__(kStreamThreads, kStreamBlocksPerSm) fused_kernel(const kernel_params<T> kp) {
  __shared__ double warp_part[kSlots][kMaxWarps];
  __shared__ double block_part[kSlots];
  const int tid = int(threadIdx.x), nthreads = int(blockDim.x);
  context<T, sync_grid> c{kp, nullptr, warp_part, block_part, tid & 31, tid >> 5, (nthreads + 31) >> 5};
  const int n = kp.n;
  const row_walk rows(n);
  const std::size_t nn = std::size_t(n);
  T* const xv = kp.xp;
  auto vec = [&](int which) { return xv + std::size_t(which) * nn; };
  const T* const dg = kp.d;
  auto diag = [&](int j) -> T { return dg ? __ldg(dg + j) : T(1); };

  double rho, active, sigma = 0;
  int cur = 0;
  if (kp.init) {  // x = 0, r = p = b; rho = (r0, r) = (b, b); then v = A M p, sigma = (r0, v)
    double part[2] = {0, 0};
    rows([&](int i) {
      const T bi = __ldg(kp.b + i);
      kp.x[i] = T(0);
      vec(sv_r)[i] = bi;
      vec(sv_p)[i] = bi;
      part[0] += double(bi) * double(bi);
    });
    part[1] = part[0];
    c.template sum<2>(part, kSlot2A);
    rho = part[0];
    active = part[1] > kp.threshold ? 1.0 : 0.0;
    double sv[1] = {0};
    rows([&](int i) {
      const T vi = stream_product<MAT>(kp, i, [&](int j) { return diag(j) * __ldg(kp.b + j); });
      vec(sv_v)[i] = vi;
      sv[0] += double(__ldg(kp.b + i)) * double(vi);
    });
    c.template sum<1>(sv, kSlotStreamInit);
    sigma = sv[0];
    if (blockIdx.x == 0 && tid == 0) {
      kp.out[0] = rho;
      kp.out[1] = active;
      kp.out[2] = part[1];
      kp.out[3] = 0;
    }
  } else {
    rho = kp.out[0];
    active = kp.out[1];
    sigma = kp.aux[0];
    cur = int(kp.aux[1]);
  }

  int done = 0;
  for (; done < kp.iterations && active != 0.0; ++done) {
    double* rec = kp.out + kStateWords + kRecordWords * done;
    const double alpha = safe_div(rho, sigma);
    const T ta = T(alpha);
    const T* const rc = vec(sv_r + cur);
    const T* const vc = vec(sv_v + cur);
    const T* const pc = vec(sv_p + cur);
    T* const tv = vec(sv_t);
    auto s_of = [&](int j) { return step_s(vload<LD>(rc + j), vload<LD>(vc + j), ta); };
    // Phase B.
    double q[4] = {0, 0, 0, 0};  // (t, s), (t, t), (r0, t), (r0, s)
    rows([&](int i) {
      const T si = s_of(i);
      const T ti = stream_product<MAT>(kp, i, [&](int j) { return diag(j) * s_of(j); });
      tv[i] = ti;
      const T bi = __ldg(kp.b + i);
      q[0] += double(ti) * double(si);
      q[1] += double(ti) * double(ti);
      q[2] += double(bi) * double(ti);
      q[3] += double(bi) * double(si);
    });
    c.template sum<4>(q, kSlot2B);
    const double omega = safe_div(q[0], q[1]);
    const double rho_new = q[3] - omega * q[2];
    const double beta = safe_div(rho_new, rho) * safe_div(alpha, omega);
    const bool go_on = rho_new != 0.0 && omega != 0.0 && alpha != 0.0;
    const T to = T(omega), tb = T(beta);
    // Phase A.
    const int nxt = cur ^ 1;
    T* const rn = vec(sv_r + nxt);
    T* const pn = vec(sv_p + nxt);
    T* const vn = vec(sv_v + nxt);
    auto p_of = [&](int j) {
      const T vj = vload<LD>(vc + j);
      const T rj = step_r(step_s(vload<LD>(rc + j), vj, ta), vload<LD>(tv + j), to);
      return step_p(rj, vload<LD>(pc + j), vj, to, tb);
    };
    double part[2] = {0, 0};  // (r0, v'), (r', r')
    rows([&](int i) {
      const T vi = vload<LD>(vc + i), pi = vload<LD>(pc + i);
      const T si = step_s(vload<LD>(rc + i), vi, ta);
      const T ri = step_r(si, vload<LD>(tv + i), to);
      const T di = diag(i);
      kp.x[i] += ta * (di * pi) + to * (di * si);
      rn[i] = ri;
      pn[i] = step_p(ri, pi, vi, to, tb);
      part[1] += double(ri) * double(ri);
      if (go_on) {  // uniform over the grid
        const T vni = stream_product<MAT>(kp, i, [&](int j) { return diag(j) * p_of(j); });
        vn[i] = vni;
        part[0] += double(__ldg(kp.b + i)) * double(vni);
      }
    });
    c.template sum<2>(part, kSlot2A);
    sigma = part[0];
    const double next = (part[1] > kp.threshold && go_on) ? 1.0 : 0.0;
    if (blockIdx.x == 0 && tid == 0) {
      rec[0] = rho_new;
      rec[1] = alpha;
      rec[2] = omega;
      rec[3] = part[1];
      rec[4] = next;
    }
    rho = rho_new;
    active = next;
    cur = nxt;
  }
  if (blockIdx.x == 0 && tid == 0) {
    c.store_state(rho, active, done);
    kp.aux[0] = sigma;
    kp.aux[1] = cur;
  }
}

// ---- Streaming CG, Chronopoulos-Gear form (one reduction, one grid barrier per iteration) ----
//
// With u = M r and w = A u: gamma = (r, u), delta = (w, u); beta = gamma / gamma_old,
// alpha = gamma / (delta - beta gamma / alpha_old) (= gamma / (p, A p) in exact arithmetic);
// p = u + beta p, s = w + beta s (= A p), x += alpha p, r -= alpha s. One phase per iteration
// (alpha, beta known): p'_i = d_i r_i + beta p_i, s'_i = w_i + beta s_i, x_i += alpha p'_i,
// r'_i = r_i - alpha s'_i, w'_i = sum_j a_ij d_j r'_j with the neighbours' r'_j recomputed from
// the old r, w, s (the same inline functions as the own r'_i); r', s', w' go to the other
// buffers (cg_vec), p and x are updated in place; sums (r', u'), (w', u'), (r', r') | barrier.
// Bytes per row and iteration (fp64, 5 nonzeros): the row 64 B, r, w, s, p, x read 40 B,
// r', s', w', p, x written 40 B: 144 B (Jacobi: + 8 B), one barrier. The record and status
// rules are the resident CG's: an iteration whose alpha is 0 ((p, A p) = 0) changes nothing
// and stops with alpha = 0 in its record (breakdown_alpha).
enum cg_vec { cv_r = 0, cv_s = 2, cv_w = 4, cv_p = 6 };  // r, s, w: 2 buffers each; p one

template <class T>
__device__ __forceinline__ T cg_s(T w, T s, T beta) {
  return w + beta * s;
}
template <class T>
__device__ __forceinline__ T cg_r(T r, T s_new, T alpha) {
  return r - alpha * s_new;
}

constexpr int kSlotCg = 0;      // (r, u), (w, u), (r, r): slots 0-2 and 3-5 in alternate iterations
constexpr int kSlotCgInit = 0;  // init launch (no iterations): (r, u), (r, r), (w, u)

template <class T>
__global__ void __launch_bounds__(kStreamThreads, kStreamBlocksPerSm) fused_cg_kernel(const kernel_params<T> kp) {
  __shared__ double warp_part[kSlots][kMaxWarps];
  __shared__ double block_part[kSlots];
  const int tid = int(threadIdx.x), nthreads = int(blockDim.x);
  context<T, sync_grid> c{kp, nullptr, warp_part, block_part, tid & 31, tid >> 5, (nthreads + 31) >> 5};
  const int n = kp.n;
  const int first = int(blockIdx.x) * nthreads + tid, stride = int(gridDim.x) * nthreads;
  const std::size_t nn = std::size_t(n);
  T* const xv = kp.xp;
  auto vec = [&](int which) { return xv + std::size_t(which) * nn; };
  const T* const dg = kp.d;
  auto diag = [&](int j) -> T { return dg ? __ldg(dg + j) : T(1); };

  double gamma, active, alpha = 0, beta = 0;
  int cur = 0;
  if (kp.init) {  // x = 0, r = b, p = s = 0; w = A M b; gamma = (b, M b), alpha = gamma / (w, M b)
    double all[3] = {0, 0, 0};  // (r, u), (r, r), (w, u)
    for (int i = first; i < n; i += stride) {
      const T bi = __ldg(kp.b + i);
      kp.x[i] = T(0);
      vec(cv_r)[i] = bi;
      vec(cv_s)[i] = T(0);
      vec(cv_p)[i] = T(0);
      const T wi = stream_row_product(kp, i, [&](int j) { return diag(j) * __ldg(kp.b + j); });
      vec(cv_w)[i] = wi;
      const T ui = diag(i) * bi;
      all[0] += double(bi) * double(ui);
      all[1] += double(bi) * double(bi);
      all[2] += double(wi) * double(ui);
    }
    c.template sum<3>(all, kSlotCgInit);
    gamma = all[0];
    active = all[1] > kp.threshold ? 1.0 : 0.0;
    alpha = safe_div(all[0], all[2]);
    beta = 0;
    if (blockIdx.x == 0 && tid == 0) {
      kp.out[0] = gamma;
      kp.out[1] = active;
      kp.out[2] = all[1];
      kp.out[3] = 0;
    }
  } else {
    gamma = kp.out[0];
    active = kp.out[1];
    alpha = kp.aux[0];
    cur = int(kp.aux[1]);
    beta = kp.aux[2];
  }

  int done = 0;
  for (; done < kp.iterations && active != 0.0; ++done) {
    double* rec = kp.out + kStateWords + kRecordWords * done;
    const T ta = T(alpha), tb = T(beta);
    const T* const rc = vec(cv_r + cur);
    const T* const wc = vec(cv_w + cur);
    const T* const sc = vec(cv_s + cur);
    const int nxt = cur ^ 1;
    T* const rn = vec(cv_r + nxt);
    T* const wn = vec(cv_w + nxt);
    T* const sn = vec(cv_s + nxt);
    T* const pv = vec(cv_p);
    auto r_of = [&](int j) { return cg_r(__ldcg(rc + j), cg_s(__ldcg(wc + j), __ldcg(sc + j), tb), ta); };
    double part[3] = {0, 0, 0};  // (r', u'), (w', u'), (r', r')
    for (int i = first; i < n; i += stride) {
      const T di = diag(i);
      const T ri = __ldcg(rc + i);
      const T si = cg_s(__ldcg(wc + i), __ldcg(sc + i), tb);
      const T pi = di * ri + tb * pv[i];
      const T rni = cg_r(ri, si, ta);
      const T ui = di * rni;
      kp.x[i] += ta * pi;
      pv[i] = pi;
      sn[i] = si;
      rn[i] = rni;
      const T wi = stream_row_product(kp, i, [&](int j) { return diag(j) * r_of(j); });
      wn[i] = wi;
      part[0] += double(rni) * double(ui);
      part[1] += double(wi) * double(ui);
      part[2] += double(rni) * double(rni);
    }
    c.template sum<3>(part, kSlotCg + 3 * cur);  // one barrier per iteration: alternate the slots
    const double gamma_new = part[0];
    const double beta_new = safe_div(gamma_new, gamma);
    const double alpha_new = safe_div(gamma_new, part[1] - beta_new * safe_div(gamma_new, alpha));
    const double next = (part[2] > kp.threshold && alpha != 0.0 && gamma_new != 0.0) ? 1.0 : 0.0;
    if (blockIdx.x == 0 && tid == 0) {
      rec[0] = gamma_new;
      rec[1] = alpha;
      rec[2] = 0;
      rec[3] = part[2];
      rec[4] = next;
    }
    gamma = gamma_new;
    alpha = alpha_new;
    beta = beta_new;
    active = next;
    cur = nxt;
  }
  if (blockIdx.x == 0 && tid == 0) {
    c.store_state(gamma, active, done);
    kp.aux[0] = alpha;
    kp.aux[1] = cur;
    kp.aux[2] = beta;
  }
}

template <class T>
using kernel_ptr = void (*)(kernel_params<T>);

// The resident kernels: CG (CSR) in a block, a cluster or on a grid; BiCGStab with two barriers
// in a block or on a grid (CSR, or by diagonals: `dia`), with three in a cluster (CSR), with one
// on a grid (by diagonals; `five`: at most 5 of them, the kernel unrolled for 5).
template <class T>
kernel_ptr<T> pick_kernel(bool cg_solver, int rpt, int sync, int form, bool dia, bool five) {
  if (cg_solver) {
    if (sync == sync_block)
      return rpt == 1 ? &resident_kernel<T, true, 1, sync_block> : rpt == 2 ? &resident_kernel<T, true, 2, sync_block>
                                                                          : &resident_kernel<T, true, 4, sync_block>;
    if (sync == sync_cluster)
      return rpt == 1   ? &resident_kernel<T, true, 1, sync_cluster>
             : rpt == 2 ? &resident_kernel<T, true, 2, sync_cluster>
                        : &resident_kernel<T, true, 4, sync_cluster>;
    return rpt == 1 ? &resident_kernel<T, true, 1, sync_grid> : rpt == 2 ? &resident_kernel<T, true, 2, sync_grid>
                                                                      : &resident_kernel<T, true, 4, sync_grid>;
  }
  if (form == 4)
    return rpt == 1 ? (five ? &resident_kernel_1<T, 1, 5> : &resident_kernel_1<T, 1, kDiaMax>)
                    : (five ? &resident_kernel_1<T, 2, 5> : &resident_kernel_1<T, 2, kDiaMax>);
  if (form == 3)
    return rpt == 1   ? &resident_kernel<T, false, 1, sync_cluster, true>
           : rpt == 2 ? &resident_kernel<T, false, 2, sync_cluster, true>
                      : &resident_kernel<T, false, 4, sync_cluster, true>;
  if (sync == sync_block) {
    if (dia)
      return rpt == 1 ? &resident_kernel_2<T, 1, sync_block, 2> : rpt == 2 ? &resident_kernel_2<T, 2, sync_block, 2>
                                                                          : &resident_kernel_2<T, 4, sync_block, 2>;
    return rpt == 1 ? &resident_kernel_2<T, 1, sync_block, 1> : rpt == 2 ? &resident_kernel_2<T, 2, sync_block, 1>
                                                                        : &resident_kernel_2<T, 4, sync_block, 1>;
  }
  if (dia)
    return rpt == 1 ? &resident_kernel_2<T, 1, sync_grid, 2> : rpt == 2 ? &resident_kernel_2<T, 2, sync_grid, 2>
                                                                       : &resident_kernel_2<T, 4, sync_grid, 2>;
  return rpt == 1 ? &resident_kernel_2<T, 1, sync_grid, 1> : rpt == 2 ? &resident_kernel_2<T, 2, sync_grid, 1>
                                                                     : &resident_kernel_2<T, 4, sync_grid, 1>;
}

// Lets `kernel` take `bytes` of dynamic shared memory: above 48 KB with its static shared memory
// (the default limit of the two together) the kernel must opt in.
template <class K>
void allow_shared(K kernel, std::size_t bytes) {
  cudaFuncAttributes fa{};
  MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(kernel)));
  if (bytes + fa.sharedSizeBytes > 48 * 1024)
    MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

void copy_and_wait(int device, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  const cudaStream_t s = linalg_stream(device);
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, s));
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s));
}
void download(int device, void* dst, const void* src, std::size_t bytes) {
  copy_and_wait(device, dst, src, bytes, cudaMemcpyDeviceToHost);
}
void upload(int device, void* dst, const void* src, std::size_t bytes) {
  copy_and_wait(device, dst, src, bytes, cudaMemcpyHostToDevice);
}

// Opt-in trace summary (MOLACCEL_TRACE=linalg): for each barrier of an iteration that
// ends a sum (position q of `period` barriers per iteration), medians over the traced iterations
// of: the time between block 0's previous and this sum's end (the phase), block 0's work (from
// the previous sum's end to its block sum; clock64, converted with block 0's clock rate measured
// against globaltimer), the slowest block's work, block 0's own reduction up to the barrier
// entry, block 0's wait in the barrier and the last arriver's (the barrier's own latency), the
// spread of the arrivals (globaltimer), and the gather of the block sums after the barrier.
void print_trace(const std::vector<unsigned long long>& t, int blocks, int cap, int period, const std::string& what) {
  auto gt = [&](int b, int i) { return double(t[2 * (std::size_t(b) * std::size_t(cap) + std::size_t(i))]); };
  auto ck = [&](int b, int i) { return double(t[2 * (std::size_t(b) * std::size_t(cap) + std::size_t(i)) + 1]); };
  const int slots = cap / 4;
  int first = -1, last = -1;  // first and last barrier slot with block 0's sum-done stamp
  for (int j = 0; j < slots; ++j)
    if (gt(0, 4 * j + 3) != 0) {
      if (first < 0) first = j;
      last = j;
    }
  if (first < 0 || last - first < period) {
    trace_message("linalg", fmt::format(fmt::runtime("{}: too few barriers recorded"), what));
    return;
  }
  const int whole = (last - first) / period;
  const int end = first + whole * period;
  const double ns_per_clock = (gt(0, 4 * end + 3) - gt(0, 4 * first + 3)) / std::max(1.0, ck(0, 4 * end + 3) - ck(0, 4 * first + 3));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::string line = fmt::format(fmt::runtime("{}: clock {:.3f} GHz, iteration {:.2f} us"), what,
                                 1.0 / ns_per_clock, 1e-3 * (gt(0, 4 * end + 3) - gt(0, 4 * first + 3)) / double(whole));
  for (int q = 0; q < period; ++q) {
    std::vector<double> phase, work0, workmax, reduce0, spread, wait0, waitlast, gather0;
    for (int j = 1; j < slots; ++j) {
      if (j % period != q) continue;
      const int W = 4 * j, A = W + 1, X = W + 2, E = W + 3, Ep = W - 1;
      bool full = true;
      for (int b = 0; b < blocks && full; ++b)
        full = gt(b, W) != 0 && gt(b, A) != 0 && gt(b, X) != 0 && gt(b, E) != 0 && gt(b, Ep) != 0;
      if (!full) continue;
      phase.push_back(gt(0, E) - gt(0, Ep));
      work0.push_back((ck(0, W) - ck(0, Ep)) * ns_per_clock);
      double wmax = 0, amin = 1e300, amax = -1e300;
      int lastb = 0;
      for (int b = 0; b < blocks; ++b) {
        wmax = std::max(wmax, (ck(b, W) - ck(b, Ep)) * ns_per_clock);
        amin = std::min(amin, gt(b, A));
        if (gt(b, A) > amax) {
          amax = gt(b, A);
          lastb = b;
        }
      }
      workmax.push_back(wmax);
      reduce0.push_back((ck(0, A) - ck(0, W)) * ns_per_clock);
      spread.push_back(amax - amin);
      wait0.push_back((ck(0, X) - ck(0, A)) * ns_per_clock);
      waitlast.push_back((ck(lastb, X) - ck(lastb, A)) * ns_per_clock);
      gather0.push_back((ck(0, E) - ck(0, X)) * ns_per_clock);
    }
    if (phase.empty()) continue;
    line += fmt::format(fmt::runtime(" | barrier {}: {:.2f} us = work {:.2f} (slowest block {:.2f}) + reduce {:.2f} + "
                                     "wait {:.2f} (last arriver {:.2f}, arrivals spread {:.2f}) + gather {:.2f}"),
                        q, 1e-3 * median(phase), 1e-3 * median(work0), 1e-3 * median(workmax), 1e-3 * median(reduce0),
                        1e-3 * median(wait0), 1e-3 * median(waitlast), 1e-3 * median(spread), 1e-3 * median(gather0));
  }
  trace_message("linalg", line);
}

int log2_exact(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

}  // namespace

struct resident_solver::impl {
  int device = -1;
  resident_setup setup;
  int sync = sync_grid;
  int form = 1;  // 1: CG; BiCGStab 2: two barriers per iteration, 3: three (resident_kernel, THREE), 4: one
  // Form 4 (resident_kernel_1): BiCGStab with the matrix by diagonals and M A^T r0.
  bool one_barrier_applies() const {
    return !setup.cg && setup.dia_values != nullptr && setup.dia_count >= 1 && setup.r0hat != nullptr;
  }
  bool matrix_smem = false;
  unsigned matrix_offset = 0;
  int rpt = 1, blocks = 1, threads = kMaxThreads;
  std::size_t smem_bytes = 0;
  cuda::DeviceBuffer<char> exchange;
  cuda::DeviceBuffer<double> partials, out;
  cuda::DeviceBuffer<unsigned long long> counter;
  cuda::DeviceBuffer<double> aux;  // streaming kernel: sigma, buffer index
  bool streaming = false;
  std::vector<double> host_out;
  int loads = 1;  // fused BiCGStab: vload<LD>
  // Form 4 with at most 5 diagonals: the kernel unrolled for 5 (shorter products; docs/linalg.md).
  bool five() const { return setup.dia_count <= 5; }
  // Form 4: the blocks' rows (resident_kernel_1, one_tiles): tiles of the matrix's grid, or bands
  // of rows (a grid of one row) where the matrix is not a stencil on a 2-D grid; tiles_i x tiles_j
  // of solver_tuning when set.
  int forced_i = 0, forced_j = 0;
  int tiles_i = 1, tiles_j = 1;
  one_tiles tiles{};
  bool on_grid() const { return setup.grid_width > 0 && setup.grid_height > 0; }
  // Form 4 on tiles of a constant stencil: the coefficients, not the values (kernel_params::constant).
  // Not on bands: there a neighbour outside the 2-D grid is another row of the band's window, not a zero.
  bool constant_stencil() const { return setup.dia_constant && on_grid() && form == 4 && !streaming; }
  int grid_w() const { return on_grid() ? setup.grid_width : int(setup.n); }
  int grid_h() const { return on_grid() ? setup.grid_height : 1; }
  int dia_a(int k) const { return on_grid() ? setup.dia_a[k] : 0; }
  int dia_b(int k) const { return on_grid() ? setup.dia_b[k] : setup.dia_offsets[k]; }
  // The tiles for blocks of `cells` rows (rows per thread x threads): max_blocks of them when
  // exact (the count given), else bands of `cells` rows or at most max_blocks tiles, minimising the rows a block handles per iteration (its
  // own, W1 and W2) plus kTileBlockCost per block (the barrier's arrivals and the gather), among
  // the tiles at least as wide as tall where there are such.
  // False when none fits.
  bool choose_tiles(long long cells, int max_blocks, bool exact) {
    const int gw = grid_w(), gh = grid_h();
    int h[4] = {0, 0, 0, 0};
    for (int k = 0; k < setup.dia_count; ++k) {
      h[0] = std::max(h[0], -dia_a(k));
      h[1] = std::max(h[1], dia_a(k));
      h[2] = std::max(h[2], -dia_b(k));
      h[3] = std::max(h[3], dia_b(k));
    }
    auto tile = [&](int ni, int nj) {
      one_tiles t{(gh + ni - 1) / ni, (gw + nj - 1) / nj, {h[0], h[1], h[2], h[3]}};
      return t;
    };
    auto take = [&](int ni, int nj) {
      tiles_i = ni;
      tiles_j = nj;
      tiles = tile(ni, nj);
      return true;
    };
    if (!on_grid()) {  // bands: ceil(n / cells) blocks unless given (co-residency checked by the caller)
      const long long nb = exact ? max_blocks : ((long long)setup.n + cells - 1) / cells;
      if (nb < 1 || nb > (1 << 20) || (long long)tile(1, int(nb)).tj > cells || tile(1, int(nb)).w2() >= 65536)
        return false;
      return take(1, int(nb));
    }
    double best = 0;
    bool best_wide = false;
    int bi = 0, bj = 0;
    for (int ni = 1; ni <= std::min(gh, max_blocks); ++ni)
      for (int nj = 1; nj <= std::min(gw, max_blocks / ni); ++nj) {
        if ((exact && ni * nj != max_blocks) || (forced_i > 0 && (ni != forced_i || nj != forced_j))) continue;
        const one_tiles t = tile(ni, nj);
        if ((long long)t.ti * t.tj > cells || t.w2() >= 65536) continue;
        const double cost = double(t.ti) * t.tj + double(t.w1()) + double(t.w2()) + kTileBlockCost * ni * nj;
        const bool wide = t.ti <= t.tj;
        if (bi == 0 || (wide && !best_wide) || (wide == best_wide && cost < best)) {
          best_wide = wide;
          best = cost;
          bi = ni;
          bj = nj;
        }
      }
    return bi > 0 && take(bi, bj);
  }
  int grid_rpt = 0;  // grid: rows per thread (solver_tuning::rows_per_thread; 0 by kGridFourRowsAbove)
  // Opt-in trace (MOLACCEL_TRACE=linalg): stamps per block, the stamps skipped (warm-up) and the
  // sums per iteration (to group the phases).
  cuda::DeviceBuffer<unsigned long long> trace;
  int trace_cap = 0, trace_skip = 0, trace_period = 1;

  template <class T>
  void launch(int iterations, int init) {
    kernel_params<T> kp;
    kp.n = int(setup.n);
    kp.rb_shift = log2_exact(rpt * threads);
    kp.row_ptr = static_cast<const int*>(setup.row_ptr);
    kp.col_idx = static_cast<const int*>(setup.col_idx);
    kp.values = static_cast<const T*>(setup.values);
    kp.b = static_cast<const T*>(setup.b);
    kp.d = static_cast<const T*>(setup.d);
    kp.x = static_cast<T*>(setup.x);
    kp.r = static_cast<T*>(setup.r);
    kp.p = static_cast<T*>(setup.p);
    kp.xp = reinterpret_cast<T*>(exchange.data());
    kp.partials = partials.data();
    kp.counter = counter.data();
    kp.out = out.data();
    kp.iterations = iterations;
    kp.init = init;
    kp.threshold = setup.threshold;
    kp.matrix_smem = matrix_smem ? 1 : 0;
    kp.matrix_offset = matrix_offset;
    kp.aux = aux.data();
    kp.scatter = !streaming && form == 4 ? 1 : 0;
    if (!streaming && !setup.cg && (form == 3 || form == 4)) kp.r0hat = static_cast<const T*>(setup.r0hat);
    if (diagonals()) {
      kp.dia = static_cast<const T*>(setup.dia_values);
      kp.dia_count = setup.dia_count;
      for (int k = 0; k < kDiaMax; ++k) kp.dia_off[k] = setup.dia_offsets[k];
    }
    if (!streaming && form == 4) {
      kp.grid_w = grid_w();
      kp.grid_h = grid_h();
      kp.tiles_i = tiles_i;
      kp.tiles_j = tiles_j;
      for (int k = 0; k < 4; ++k) kp.halo[k] = tiles.halo[k];
      for (int k = 0; k < setup.dia_count; ++k) {
        kp.dia_a[k] = dia_a(k);
        kp.dia_b[k] = dia_b(k);
        kp.coef[k] = T(setup.dia_coef[k]);
      }
      kp.constant = constant_stencil() ? 1 : 0;
    }
    if (trace_cap > 0) {
      trace.fill_zero(linalg_stream(device));
      kp.trace = trace.data();
      kp.trace_cap = trace_cap;
      kp.trace_skip = trace_skip;
    }
    auto kernel = streaming ? fused_pick<T>() : pick_kernel<T>(setup.cg, rpt, sync, form, diagonals(), five());
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(blocks));
    config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = smem_bytes;
    config.stream = linalg_stream(device);
    cudaLaunchAttribute attr{};
    if (sync == sync_cluster) {
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(blocks);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
    } else if (sync == sync_grid) {
      attr.id = cudaLaunchAttributeCooperative;  // every block resident, or the launch fails
      attr.val.cooperative = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
    }
    MOLACCEL_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, kp));
    cuda::check_launch("linalg resident solver", __FILE__, __LINE__);
  }

  // Dynamic shared memory: the exchanged vectors (form 1 in a block or cluster: 2 x RB; form 2:
  // the block's own entries, RB, and in a cluster the 7 published vectors, 7 x RB), then the
  // matrix rows when they are kept there (grid, 4 rows per thread: kSmemNnz x RB values and
  // column indices).
  bool matrix_in_shared(int r, int s) const {
    return s == sync_grid && r == 4 && form != 4;  // form 4: its own windows
  }
  template <class T>
  std::size_t vector_bytes(int r, int s) const {
    const std::size_t rb = std::size_t(r) * std::size_t(threads);
    const std::size_t bytes = form == 2 ? (s == sync_cluster ? 8 : 1) * rb * sizeof(T) : s == sync_grid ? 0 : 2 * rb * sizeof(T);
    return (bytes + 15) / 16 * 16;
  }
  // Form 4: the band's reach (errors and the description).
  int band_left() const { return std::max(0, -setup.dia_offsets[0]); }
  int band_right() const { return std::max(0, setup.dia_offsets[std::max(0, setup.dia_count - 1)]); }
  // Form 4: the windows of the tiles chosen last (choose_tiles).
  template <class T>
  std::size_t shared_bytes(int r, int s) const {
    const std::size_t rb = std::size_t(r) * std::size_t(threads);
    if (form == 4) return std::size_t(tiles.bytes(setup.dia_count, setup.d != nullptr, int(sizeof(T))));
    return vector_bytes<T>(r, s) + (matrix_in_shared(r, s) ? std::size_t(kSmemNnz) * rb * (sizeof(T) + sizeof(int)) : 0);
  }

  // The matrix by diagonals (given by the caller): fused BiCGStab with grid-stride rows; resident
  // BiCGStab in the two- and three-barrier forms (form resolved by configure(); the four-barrier
  // form keeps CSR).
  bool diagonals() const {
    if (setup.cg || setup.dia_values == nullptr) return false;
    if (!streaming && form == 4) return true;
    return streaming || diagonals_at(rpt, sync);
  }
  // Resident: the values of dia_count diagonals fit the cached slots at r rows per thread (1: 8,
  // 2: 5; 4: shared or global memory, any count).
  bool dia_fits(int r) const {
    return r == 4 || setup.dia_count <= (r == 1 ? kCached : 5);
  }
  // Resident kernel at r rows per thread with barrier kind s: by diagonals (form 4; form 2 in a
  // block or on a grid where the values fit).
  bool diagonals_at(int r, int s) const {
    if (setup.cg || setup.dia_values == nullptr || streaming) return false;
    if (form == 4) return true;
    return form == 2 && s != sync_cluster && dia_fits(r);
  }
  template <class T>
  kernel_ptr<T> fused_pick() const {
    if (setup.cg) return &fused_cg_kernel<T>;
    if (diagonals()) return loads == 2 ? &fused_kernel<T, 2, 2> : &fused_kernel<T, 1, 2>;
    return loads == 2 ? &fused_kernel<T, 2, 1> : &fused_kernel<T, 1, 1>;
  }
  // Streaming kernel: a cooperative grid of co-resident blocks (automatic: as many as the
  // occupancy allows, at most one thread per row), grid-stride over rows.
  template <class T>
  void configure_streaming() {
    cudaDeviceProp prop{};
    MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    threads = setup.tuning.threads > 0 ? setup.tuning.threads : kStreamThreads;
    if (threads != 128 && threads != 256 && threads != 512)
      throw Error(fmt::format(fmt::runtime("linalg: fused block size {} (128, 256 or 512)"), threads), __FILE__,
                  __LINE__);
    int resident = 0;
    MOLACCEL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &resident, reinterpret_cast<const void*>(fused_pick<T>()), threads, 0));
    const long long cap = (long long)resident * prop.multiProcessorCount;
    const long long need = ((long long)setup.n + threads - 1) / threads;
    const int given = setup.tuning.blocks;
    if (given > 0 && given > cap)
      throw Error(fmt::format(fmt::runtime("linalg: fused grid of {} blocks of {} (at most {} co-resident)"), given,
                              threads, cap),
                  __FILE__, __LINE__);
    if (cap < 1) throw Error("linalg: the fused kernel cannot run on this GPU", __FILE__, __LINE__);
    blocks = given > 0 ? given : int(std::max<long long>(1, std::min(cap, need)));
    rpt = 0;
    sync = sync_grid;
    form = 2;
    smem_bytes = 0;
    matrix_smem = false;
    exchange.resize(std::size_t(sv_count) * setup.n * sizeof(T));
    partials.resize(std::size_t(kSlots) * std::size_t(blocks));
    counter.resize(1);
    counter.fill_zero(linalg_stream(device));
    aux.resize(3);
    aux.fill_zero(linalg_stream(device));
  }

  template <class T>
  void configure() {
    if (streaming) return configure_streaming<T>();
    cudaDeviceProp prop{};
    MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    const long long n = static_cast<long long>(setup.n);
    const solver_tuning& tune = setup.tuning;
    const int given = tune.blocks;  // 0: from n
    threads = tune.threads > 0 ? tune.threads : kMaxThreads;
    if (threads != 128 && threads != 256 && threads != 512)
      throw Error(fmt::format(fmt::runtime("linalg: resident block size {} (128, 256 or 512)"), threads),
                  __FILE__, __LINE__);
    // The smallest rows-per-thread (1, 2, 4) whose grid fits; blocks from n unless given.
    auto fits = [&](int r, int max_blocks) {
      const long long need = (n + (long long)r * threads - 1) / ((long long)r * threads);
      return given > 0 ? (long long)given * r * threads >= n && given <= max_blocks : need <= max_blocks;
    };
    auto choose = [&](int max_blocks) {
      for (int r : {1, 2, 4})
        if (fits(r, max_blocks)) {
          rpt = r;
          blocks = given > 0 ? given
                             : int(std::max<long long>(1, (n + (long long)r * threads - 1) / ((long long)r * threads)));
          return true;
        }
      return false;
    };
    // Barrier kind: 1 cluster, 2 or 3 grid; 0 chooses: one block when it holds the system,
    // one cluster of up to 16 blocks next, then the cooperative grid. BiCGStab by diagonals
    // (form 4 applies) goes from one block straight to the grid: one grid barrier per iteration
    // was measured faster than the cluster's three (H100, n = 1e4: 5.80 us with 40 blocks of
    // 256 against 5.96-6.10 us; docs/linalg.md), and up to one block of 256 per SM the grid
    // takes blocks of 256 (faster than 512 there: 5.80 vs 6.02 us at 1e4, 6.09 vs 6.19 at 22,500).
    // kind: -1 one block, 1 one cluster, 2 a grid (solver_tuning::scope 1, 2, 3), 0 automatic.
    int kind = tune.scope == 1 ? -1 : tune.scope == 2 ? 1 : tune.scope == 3 ? 2 : 0;
    if (given == 1) kind = -1;
    const bool clusters = prop.major >= 9;  // thread-block clusters: sm_90 and later
    const bool automatic_grid_one = form == 0 && one_barrier_applies();
    if (kind == 0) {
      if (n <= 4LL * threads)
        kind = -1;
      else if (automatic_grid_one)
        kind = 2;
      else if (n <= 16LL * 2 * threads && clusters)
        kind = 1;
      else
        kind = 2;
    }
    // Form 4 chosen automatically (on a grid): form 2 where its windows do not fit.
    const bool automatic_one = automatic_grid_one && kind >= 2;
    if (tune.threads == 0 && automatic_one && n <= 256LL * prop.multiProcessorCount) threads = 256;
    if (form == 0) form = kind == -1 ? kAutomaticFormBlock : kind == 1 ? kAutomaticFormCluster : automatic_one ? 4 : 2;
    if (form == 4 && (kind == -1 || kind == 1))
      throw Error("linalg: the one-barrier BiCGStab form runs on a grid, not in one block or one cluster", __FILE__,
                  __LINE__);
    if (form == 4 && !one_barrier_applies())
      throw Error("linalg: the one-barrier BiCGStab form needs the matrix by diagonals and M A^T r0", __FILE__,
                  __LINE__);
    if (form == 3 && kind != 1)
      throw Error("linalg: the three-barrier BiCGStab form runs in one cluster", __FILE__, __LINE__);
    if (form == 2 && kind == 1)
      throw Error("linalg: the two-barrier BiCGStab form runs in one block or on a grid, not in a cluster",
                  __FILE__, __LINE__);
    if (form == 3 && setup.r0hat == nullptr)
      throw Error("linalg: the three-barrier BiCGStab form needs M A^T r0", __FILE__, __LINE__);
    if (kind == 1 && !clusters)
      throw Error(fmt::format(fmt::runtime("linalg: resident mode in a cluster needs compute capability 9.0 "
                                           "(this GPU has {}.{})"),
                              prop.major, prop.minor),
                  __FILE__, __LINE__);
    if (kind == -1) {
      sync = sync_block;
      if (!choose(1))
        throw Error(fmt::format(fmt::runtime("linalg: resident mode in one block holds at most {} rows ({} given)"),
                                4 * threads, n),
                    __FILE__, __LINE__);
    } else if (kind == 1) {
      sync = sync_cluster;
      if (!choose(16))
        throw Error(fmt::format(fmt::runtime("linalg: resident mode in one cluster holds at most {} rows ({} given)"),
                                16 * 4 * threads, n),
                    __FILE__, __LINE__);
    } else {
      sync = sync_grid;
      // Rows per thread whose grid is co-resident (each variant's own occupancy): with the block
      // count given, the smallest that holds n; otherwise 2 rows per thread (the matrix rows in
      // registers) up to kGridFourRowsAbove rows, then 4 (the matrix in shared memory), each
      // falling back to the other where it does not fit. History (H100, n = 1e5, two-barrier
      // BiCGStab): with CSR, 99 x 512 x 2 rows 12.8 us per iteration vs 50 x 512 x 4 rows 14.9 us;
      // by diagonals (the 4-row kernel lost its index loads and spills) 4 rows are faster from
      // about 1e5 rows on (kGridFourRowsAbove).
      // Form 4 keeps the band's halo windows in shared memory: a shape whose windows do not fit
      // is skipped (automatic form 4: then form 2).
      bool ok = false;
      int cap = 0;
      const int order_given[3] = {1, 2, 4}, order_two[3] = {2, 4, 1}, order_four[3] = {4, 2, 1};
      auto try_shapes = [&] {
        // Form 4: the fewest rows per thread that fit (measured faster: docs/linalg.md).
        const bool four = grid_rpt == 4 || (grid_rpt == 0 && n > kGridFourRowsAbove);
        const int* order = given > 0 || grid_rpt == 1 || (form == 4 && grid_rpt == 0) ? order_given
                           : four                                                       ? order_four
                                                                                        : order_two;
        for (int i = 0; i < 3 && !ok; ++i) {
          const int r = order[i];
          int resident = 0;
          // Form 4 at 4 rows per thread: measured slower than form 2 (docs/linalg.md).
          if (form == 4 && r == 4) continue;
          // Form 4: tiles (or bands) for blocks of r x threads rows, one block per SM and one
          // gather chunk at most unless the count is given (then exactly that many).
          if (form == 4 && !choose_tiles((long long)r * threads,
                                         given > 0 ? given : std::min(prop.multiProcessorCount, kGatherChunk),
                                         given > 0))
            continue;
          const std::size_t bytes = shared_bytes<T>(r, sync_grid);
          auto kernel = pick_kernel<T>(setup.cg, r, sync_grid, form, diagonals_at(r, sync_grid), five());
          if (form == 4) {
            cudaFuncAttributes fa{};
            MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(kernel)));
            if (bytes + fa.sharedSizeBytes > prop.sharedMemPerBlockOptin) continue;
          }
          allow_shared(kernel, bytes);
          MOLACCEL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &resident, reinterpret_cast<const void*>(kernel), threads, bytes));
          cap = resident * prop.multiProcessorCount;
          if (form == 4 && cap >= tiles_i * tiles_j) {
            rpt = r;
            blocks = tiles_i * tiles_j;
            ok = true;
          } else if (form != 4 && cap > 0 && fits(r, cap)) {
            rpt = r;
            blocks = given > 0 ? given
                                      : int((n + (long long)r * threads - 1) / ((long long)r * threads));
            ok = true;
          }
        }
      };
      try_shapes();
      if (!ok && automatic_one) {  // the band's windows do not fit: two barriers
        form = 2;
        try_shapes();
      }
      if (!ok && form == 4)
        throw Error(fmt::format(fmt::runtime("linalg: the one-barrier BiCGStab form does not fit this GPU for {} "
                                             "rows (band -{} .. +{}: the halo windows exceed shared memory)"),
                                n, band_left(), band_right()),
                    __FILE__, __LINE__);
      if (!ok)
        throw Error(fmt::format(fmt::runtime("linalg: the resident mode holds at most {} rows on this GPU "
                                             "(4 rows per thread, {} blocks of {}, form {}, {} bytes of shared "
                                             "memory per block); {} given"),
                                (long long)cap * 4 * threads, cap, threads, form, shared_bytes<T>(4, sync_grid), n),
                    __FILE__, __LINE__);
    }
    smem_bytes = shared_bytes<T>(rpt, sync);
    matrix_smem = matrix_in_shared(rpt, sync);
    matrix_offset = unsigned(vector_bytes<T>(rpt, sync));
    allow_shared(pick_kernel<T>(setup.cg, rpt, sync, form, diagonals(), five()), smem_bytes);
    if (sync == sync_cluster) {
      auto kernel = pick_kernel<T>(setup.cg, rpt, sync_cluster, form, diagonals(), five());
      if (blocks > 8)
        MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(unsigned(blocks));
      config.blockDim = dim3(unsigned(threads));
      config.dynamicSmemBytes = smem_bytes;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(blocks);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
      int clusters = 0;
      const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
      if (e != cudaSuccess || clusters < 1) {
        cudaGetLastError();
        throw Error(fmt::format(fmt::runtime("linalg: a cluster of {} blocks of {} threads cannot run on this GPU"),
                                blocks, threads),
                    __FILE__, __LINE__);
      }
    }
    if (sync == sync_grid) {
      exchange.resize(
          std::max<std::size_t>(1, std::size_t(form == 2 ? 7 : form == 4 ? 2 * ov_count : 2) * setup.n * sizeof(T)));
      if (form == 4) aux.resize(1);
      partials.resize(std::size_t(kSlots) * std::size_t(blocks));
      counter.resize(1);
      counter.fill_zero(linalg_stream(device));
    }
  }
};

resident_solver::resident_solver(int device, const resident_setup& setup) : impl_(std::make_unique<impl>()) {
  cuda::DeviceGuard guard(device);
  impl_->device = device;
  impl_->setup = setup;
  const solver_tuning& tune = setup.tuning;
  // Automatic (0): see kAutomaticForm* (resolved in configure()).
  if (tune.form != 0 && tune.form != 2 && tune.form != 3 && tune.form != 4)
    throw Error(fmt::format(fmt::runtime("linalg: resident form {} (2, 3 or 4)"), tune.form), __FILE__, __LINE__);
  impl_->form = setup.cg ? 1 : tune.form;
  if (tune.scope < 0 || tune.scope > 3)
    throw Error(fmt::format(fmt::runtime("linalg: resident scope {} (0-3)"), tune.scope), __FILE__, __LINE__);
  if (tune.fused_loads < 0 || tune.fused_loads > 2)
    throw Error(fmt::format(fmt::runtime("linalg: fused loads {} (0-2)"), tune.fused_loads), __FILE__, __LINE__);
  impl_->loads = tune.fused_loads != 0 ? tune.fused_loads : setup.n <= fused_l1_max_rows ? 2 : 1;
  if (tune.rows_per_thread != 0 && tune.rows_per_thread != 1 && tune.rows_per_thread != 2 &&
      tune.rows_per_thread != 4)
    throw Error(fmt::format(fmt::runtime("linalg: resident rows per thread {} (1, 2 or 4)"), tune.rows_per_thread),
                __FILE__, __LINE__);
  impl_->grid_rpt = tune.rows_per_thread;
  impl_->forced_i = tune.tiles_i;
  impl_->forced_j = tune.tiles_j;
  if (setup.dia_values != nullptr && (setup.dia_count < 1 || setup.dia_count > kDiaMax))
    throw Error(fmt::format(fmt::runtime("linalg: {} diagonals (1-{})"), setup.dia_count, kDiaMax), __FILE__,
                __LINE__);
  if (setup.n == 0 || setup.n > std::size_t(1) << 30)
    throw Error(fmt::format(fmt::runtime("linalg: resident mode for {} rows"), setup.n), __FILE__, __LINE__);
  impl_->streaming = setup.streaming;
  if (!setup.fp64)
    impl_->configure<float>();
  else
    impl_->configure<double>();
  impl_->out.resize(kStateWords);
  if (trace_enabled("linalg") && impl_->sync != sync_block) {
    // Barriers per iteration, and barriers before the first iteration of a launch that continues a
    // solve (a plain barrier; the two-barrier form's first product and its sum).
    const int period = impl_->streaming ? (setup.cg ? 1 : 2)
                       : setup.cg       ? 3
                       : impl_->form == 2 ? 2
                       : impl_->form == 3 ? 3
                                          : 1;
    const int before = impl_->streaming ? 0 : !setup.cg && impl_->form == 2 ? 2 : impl_->form == 4 ? 0 : 1;
    impl_->trace_period = period;
    impl_->trace_skip = 4 * (before + 4 * period);  // 4 stamps per barrier; 4 iterations of warm-up
    impl_->trace_cap = 4 * 8 * period;              // 8 iterations
    impl_->trace.resize(std::size_t(2) * std::size_t(impl_->blocks) * std::size_t(impl_->trace_cap));
  }
}

resident_solver::~resident_solver() = default;

std::pair<double, bool> resident_solver::initialise() {
  cuda::DeviceGuard guard(impl_->device);
  if (!impl_->setup.fp64)
    impl_->launch<float>(0, 1);
  else
    impl_->launch<double>(0, 1);
  double state[kStateWords];
  download(impl_->device, state, impl_->out.data(), sizeof(state));
  return {state[2], state[1] != 0.0};
}

std::vector<double> resident_solver::run(int iterations) {
  cuda::DeviceGuard guard(impl_->device);
  const std::size_t words = std::size_t(kStateWords) + std::size_t(kRecordWords) * std::size_t(iterations);
  if (impl_->out.size() < words) {
    // Keep the state words across the reallocation.
    double state[kStateWords];
    download(impl_->device, state, impl_->out.data(), sizeof(state));
    impl_->out.resize(words);
    upload(impl_->device, impl_->out.data(), state, sizeof(state));
  }
  if (!impl_->setup.fp64)
    impl_->launch<float>(iterations, 0);
  else
    impl_->launch<double>(iterations, 0);
  impl_->host_out.resize(words);
  download(impl_->device, impl_->host_out.data(), impl_->out.data(), words * sizeof(double));
  const int done = int(impl_->host_out[3]);
  if (impl_->trace_cap > 0) {
    std::vector<unsigned long long> stamps(impl_->trace.size());
    download(impl_->device, stamps.data(), impl_->trace.data(), stamps.size() * sizeof(unsigned long long));
    print_trace(stamps, impl_->blocks, impl_->trace_cap, impl_->trace_period, describe());
  }
  return std::vector<double>(impl_->host_out.begin() + kStateWords,
                             impl_->host_out.begin() + kStateWords + std::size_t(kRecordWords) * std::size_t(done));
}

std::string resident_solver::describe() const {
  if (impl_->streaming)
    return fmt::format(fmt::runtime("streaming, {} blocks of {}, {}, {}, {} barrier{}/iteration"), impl_->blocks,
                       impl_->threads, !impl_->setup.cg && impl_->loads == 2 ? "vectors via L1" : "vectors via L2",
                       impl_->diagonals() ? fmt::format(fmt::runtime("{} diagonals"), impl_->setup.dia_count)
                                          : std::string("CSR"),
                       impl_->setup.cg ? 1 : 2, impl_->setup.cg ? "" : "s");
  const char* kind = impl_->sync == sync_block ? "block" : impl_->sync == sync_cluster ? "cluster" : "grid";
  if (!impl_->setup.cg && impl_->form == 4) {
    const auto& t = impl_->tiles;
    const std::string rows =
        impl_->on_grid()
            ? fmt::format(fmt::runtime("tiles {} x {} of <= {} x {} on the {} x {} grid"), impl_->tiles_i,
                          impl_->tiles_j, t.ti, t.tj, impl_->grid_h(), impl_->grid_w())
            : fmt::format(fmt::runtime("band -{} .. +{}"), impl_->band_left(), impl_->band_right());
    return fmt::format(fmt::runtime("{} blocks of {}, {} rows/thread, {}, 1 barrier/iteration (halo recomputed, "
                                    "{}), {}, {} diagonals"),
                       impl_->blocks, impl_->threads, impl_->rpt, kind, rows,
                       impl_->constant_stencil() ? "constant stencil (no matrix values read)" : "matrix in shared memory",
                       impl_->setup.dia_count);
  }
  return fmt::format(fmt::runtime("{} blocks of {}, {} rows/thread, {}, {} barriers/iteration{}{}"), impl_->blocks,
                     impl_->threads, impl_->rpt, kind, impl_->setup.cg ? 3 : impl_->form == 2 ? 2 : 3,
                     impl_->matrix_smem ? ", matrix in shared memory" : "",
                     impl_->diagonals() ? fmt::format(fmt::runtime(", {} diagonals"), impl_->setup.dia_count)
                                        : std::string(", CSR"));
}

int resident_solver::blocks() const {
  return impl_->blocks;
}

}  // namespace molaccel::linalg::gpu

// GPU Smith-Waterman pieces (CUB-style layering, bottom two layers):
//  - cell updates: packed 16x2 with DPX instructions (inline in the inter-task agent) or exact 32-bit;
//  - the inter-task agent: one thread = one subject against two queries in the two 16-bit halves of
//    each register, a strip of R query rows in registers, the boundary row of each strip in global
//    memory; its kernel takes every query pair of a chunk in one launch;
//  - the intra-task agent: one warp = one subject, each lane R query rows, anti-diagonal wavefront
//    across lanes (values passed by shuffle), exact 32-bit.
// Recurrences as in reference/gotoh.cpp; a gap of length k costs open + (k-1)*extend.
#pragma once

#include <cstdint>

namespace molaccel::align::gpu {

constexpr int kWarp = 32;
constexpr int kMatrixDim = 32;  // padded alphabet (row/column 31 = padding)

__device__ __forceinline__ unsigned pack16x2(int value) {
  return (static_cast<unsigned>(value) & 0xffffu) * 0x10001u;
}

// One exact 32-bit cell. E (gap in the query) runs along the subject, F down the query; T = H - open
// is kept beside H because both gap recurrences need it. DPX: __viaddmax_s32(a, b, c) = max(a + b, c).
__device__ __forceinline__ void cell32(int& h_left_then_h, int& t_left_then_t, int& e, int& f, int& t_up,
                                       int& diagonal, int sub, int open, int extend, int& best) {
  e = __viaddmax_s32(e, -extend, t_left_then_t);
  f = __viaddmax_s32(f, -extend, t_up);
  const int h = __viaddmax_s32_relu(diagonal, sub, max(e, f));
  diagonal = h_left_then_h;
  h_left_then_h = h;
  t_left_then_t = h - open;
  t_up = t_left_then_t;
  best = max(best, h);
}

// Inter-task agent: one subject per thread and two queries in the two 16-bit halves (low = first
// query of the pair, high = second). The query profile holds both queries' scores for a letter in
// one word, so one 16-byte shared-memory load serves 4 rows and no byte permute is needed per cell.
// E for the next column is formed at the end of each cell from T = H - open, which the F chain needs
// anyway (no T per row); the next quad's residues and boundary values are loaded one quad ahead, so
// global-memory latency overlaps 4 columns of compute.
// Subject layout: per warp w, quad c, lane l: one word with the 4 residues of subject 32w+l.
// profile: uint32 [32 letters][m_pad] (row 31 = padding). `warp` < 0: the thread only takes part
// in the block's shared-memory loads (all threads of the block must call this).
template <int R>
__device__ __forceinline__ void inter_qp_agent(const unsigned* __restrict__ subjects, unsigned long long base,
                                               unsigned quads, bool active, uint2* __restrict__ boundary,
                                               const unsigned* __restrict__ profile, int m_pad, int open,
                                               int extend, unsigned* __restrict__ best_out) {
  constexpr int kRowStride = R + 4;  // words per letter row in shared memory: +16 B spreads banks
  __shared__ __align__(16) unsigned strip[kMatrixDim * kRowStride];
  const int lane = threadIdx.x % kWarp;
  const unsigned* my_subjects = subjects + base + lane;
  uint2* my_boundary = boundary + base * 4 + lane;
  const unsigned minus_open = pack16x2(-open), minus_extend = pack16x2(-extend);
  unsigned best = 0;

  for (int row0 = 0; row0 < m_pad; row0 += R) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kMatrixDim * R; idx += blockDim.x) {
      const int letter = idx / R, k = idx % R;
      strip[letter * kRowStride + k] = profile[static_cast<size_t>(letter) * m_pad + row0 + k];
    }
    __syncthreads();
    if (!active || quads == 0) continue;
    const bool first_strip = row0 == 0, last_strip = row0 + R >= m_pad;
    unsigned h[R], e[R];
#pragma unroll
    for (int r = 0; r < R; ++r) h[r] = 0, e[r] = minus_open;
    unsigned diagonal_top = 0;
    unsigned next_residues = my_subjects[0];
    uint2 next_above[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      next_above[k] = first_strip ? make_uint2(0u, minus_open) : my_boundary[static_cast<size_t>(k) * kWarp];
    for (unsigned c = 0; c < quads; ++c) {
      const unsigned residues = next_residues;
      uint2 above_quad[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) above_quad[k] = next_above[k];
      if (c + 1 < quads) {
        next_residues = my_subjects[static_cast<size_t>(c + 1) * kWarp];
        if (!first_strip) {
#pragma unroll
          for (int k = 0; k < 4; ++k)
            next_above[k] = my_boundary[(static_cast<size_t>(c + 1) * 4 + k) * kWarp];
        }
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned a = (residues >> (8 * k)) & 0xffu;
        const uint2 above = above_quad[k];
        unsigned t_up = __vadd2(above.x, minus_open), f = above.y, diagonal = diagonal_top;
        diagonal_top = above.x;
        const uint4* pa = reinterpret_cast<const uint4*>(strip + a * kRowStride);
#pragma unroll
        for (int v = 0; v < R / 4; ++v) {
          const uint4 wa = pa[v];
          const unsigned la[4] = {wa.x, wa.y, wa.z, wa.w};
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            const int r = v * 4 + w;
            f = __viaddmax_s16x2(f, minus_extend, t_up);
            const unsigned hv = __viaddmax_s16x2_relu(diagonal, la[w], __vmaxs2(e[r], f));
            diagonal = h[r];
            h[r] = hv;
            t_up = __vadd2(hv, minus_open);
            e[r] = __viaddmax_s16x2(e[r], minus_extend, t_up);
            best = __vimax_s16x2_relu(best, hv);
          }
        }
        if (!last_strip) my_boundary[(static_cast<size_t>(c) * 4 + k) * kWarp] = make_uint2(h[R - 1], f);
      }
    }
  }
  if (active) best_out[lane] = best;
}

// Every query pair of a chunk in one launch. Block b does work item items[b] =
// (block of 4 warps, query pair); the host orders items by cost (quads x rows), largest first, so
// the length-sorted tail is balanced over all pairs at once. Each pair has its own profile, its own
// boundary rows (boundary_stride uint2 apart) and its own outputs (best_stride words apart).
template <int R, int MinBlocks>
__global__ void __launch_bounds__(128, MinBlocks)
    inter_task_kernel_qpm(const unsigned* __restrict__ subjects,
                          const unsigned long long* __restrict__ warp_base,
                          const unsigned* __restrict__ warp_quads, uint2* __restrict__ boundary,
                          unsigned long long boundary_stride, int warps, const uint2* __restrict__ items,
                          const unsigned* __restrict__ profiles,
                          const unsigned long long* __restrict__ pair_profile,
                          const int* __restrict__ pair_m_pad, int open, int extend,
                          unsigned* __restrict__ best_out, unsigned long long best_stride) {
  const uint2 item = items[blockIdx.x];
  const int warp = static_cast<int>(item.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int pair = static_cast<int>(item.y);
  const bool active = warp < warps;
  inter_qp_agent<R>(subjects, active ? warp_base[warp] : 0, active ? warp_quads[warp] : 0, active,
                    boundary + boundary_stride * pair, profiles + pair_profile[pair], pair_m_pad[pair], open,
                    extend, best_out + best_stride * pair + static_cast<size_t>(warp) * kWarp);
}

// Intra-task agent, exact 32-bit: one warp per job (a query against one subject), for subjects
// too long for the inter-task kernel's one-thread-per-subject critical path. Lane l holds query
// rows [pass*32R + l*R, +R); at step t it works on column t - l, taking the row above (H, F) and
// the column's subject letter from lane l-1 by shuffle (they travel down the lanes with the
// wavefront). Lane 0 takes column t's letter and, after the first pass, the boundary row left by
// the previous pass from a window of 32 columns that the warp loads (coalesced) one window ahead,
// so no global load sits on the per-step critical path. Lane 31 writes the pass's last row to
// `row_below` (n (H, F) pairs; unused when m <= 32R) 31 columns behind lane 0's reads.
// `transposed`: the scoring matrix in shared memory, [subject letter][query letter], row 31 =
// padding (query rows past the end). Called by all 32 lanes of the warp; returns the best score.
template <int R>
__device__ __forceinline__ int intra_job(const int* transposed, const unsigned char* __restrict__ subject,
                                         int n, int2* __restrict__ row_below,
                                         const unsigned char* __restrict__ query, int m, int open, int extend,
                                         int lane) {
  constexpr int kMinusInfinity = -(1 << 28);
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int kPad = kMatrixDim - 1;
  int best = 0;
  const int rows_per_pass = kWarp * R;
  const int steps = n + kWarp - 1;
  for (int row0 = 0; row0 < m; row0 += rows_per_pass) {
    const bool first_pass = row0 == 0, last_pass = row0 + rows_per_pass >= m;
    unsigned char q[R];
    int h[R], t[R], e[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = row0 + lane * R + r;
      q[r] = row < m ? query[row] : static_cast<unsigned char>(kPad);
      h[r] = 0;
      t[r] = -open;
      e[r] = kMinusInfinity;
    }
    // Column c of the window in lane c % 32: its letter and the previous pass's (H, F) above it.
    const auto load = [&](int c, int& letter, int& above_h, int& above_f) {
      letter = c < n ? subject[c] : kPad;
      const int2 above = !first_pass && c < n ? row_below[c] : make_int2(0, kMinusInfinity);
      above_h = above.x;
      above_f = above.y;
    };
    int window_letter, window_h, window_f;
    load(lane, window_letter, window_h, window_f);
    int letter = kPad, in_h = 0, in_f = kMinusInfinity, previous_in_h = 0;
    for (int base = 0; base < steps; base += kWarp) {
      int next_letter, next_h, next_f;
      load(base + kWarp + lane, next_letter, next_h, next_f);  // in flight during this window
      const int window = min(kWarp, steps - base);
      for (int s = 0; s < window; ++s) {
        const int column = base + s - lane;
        const int new_letter = __shfl_sync(kAll, window_letter, s);
        const int above_h = __shfl_sync(kAll, window_h, s);
        const int above_f = __shfl_sync(kAll, window_f, s);
        letter = __shfl_up_sync(kAll, letter, 1);
        if (lane == 0) {
          letter = new_letter;
          in_h = above_h;
          in_f = above_f;
        }
        int out_h = 0, out_f = kMinusInfinity;
        if (column >= 0 && column < n) {
          const int* scores = transposed + letter * kMatrixDim;
          int t_up = in_h - open, f = in_f, diagonal = previous_in_h;
#pragma unroll
          for (int r = 0; r < R; ++r)
            cell32(h[r], t[r], e[r], f, t_up, diagonal, scores[q[r]], open, extend, best);
          out_h = h[R - 1];
          out_f = f;
          previous_in_h = in_h;
          if (lane == kWarp - 1 && !last_pass) row_below[column] = make_int2(out_h, out_f);
        }
        in_h = __shfl_up_sync(kAll, out_h, 1);
        in_f = __shfl_up_sync(kAll, out_f, 1);
      }
      window_letter = next_letter;
      window_h = next_h;
      window_f = next_f;
    }
    __syncwarp();  // this pass's row_below writes are visible to the next pass's loads
  }
  return __reduce_max_sync(kAll, best);
}

// The scoring matrix transposed into shared memory for intra_job (the whole block calls it).
__device__ __forceinline__ void load_transposed_matrix(int* transposed, const int* __restrict__ matrix) {
  for (int i = threadIdx.x; i < kMatrixDim * kMatrixDim; i += blockDim.x)
    transposed[(i % kMatrixDim) * kMatrixDim + i / kMatrixDim] = matrix[i];
  __syncthreads();
}

// One query against `jobs` subjects (job j: residues + job_offset[j], job_length[j] letters,
// boundary scratch at job_scratch[j]); best_out[j].
template <int R>
__global__ void __launch_bounds__(128)
    intra_task_kernel(const unsigned char* __restrict__ residues,
                      const unsigned long long* __restrict__ job_offset,
                      const unsigned* __restrict__ job_length,
                      const unsigned long long* __restrict__ job_scratch, int2* __restrict__ scratch,
                      int jobs, const unsigned char* __restrict__ query, int m,
                      const int* __restrict__ matrix, int open, int extend, int* __restrict__ best_out) {
  __shared__ int transposed[kMatrixDim * kMatrixDim];
  load_transposed_matrix(transposed, matrix);
  const int job = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (job >= jobs) return;
  const int best = intra_job<R>(transposed, residues + job_offset[job], static_cast<int>(job_length[job]),
                                scratch + job_scratch[job], query, m, open, extend, lane);
  if (lane == 0) best_out[job] = best;
}

// Many queries against many subjects in one launch: job j = (subject jobs[j].x, query jobs[j].y),
// most expensive first, so a batch costs its total work (or its longest job), not one launch tail
// per query. Boundary scratch of job j at job_scratch[j]; best_out[query * best_stride + subject].
template <int R>
__global__ void __launch_bounds__(128)
    intra_task_kernel_jobs(const unsigned char* __restrict__ residues,
                           const unsigned long long* __restrict__ subject_offset,
                           const unsigned* __restrict__ subject_length, const uint2* __restrict__ jobs,
                           const unsigned long long* __restrict__ job_scratch, int2* __restrict__ scratch,
                           int job_count, const unsigned char* __restrict__ queries,
                           const unsigned long long* __restrict__ query_offset,
                           const unsigned* __restrict__ query_length, const int* __restrict__ matrix,
                           int open, int extend, int* __restrict__ best_out, unsigned long long best_stride) {
  __shared__ int transposed[kMatrixDim * kMatrixDim];
  load_transposed_matrix(transposed, matrix);
  const int job = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (job >= job_count) return;
  const uint2 pair = jobs[job];
  const int best =
      intra_job<R>(transposed, residues + subject_offset[pair.x], static_cast<int>(subject_length[pair.x]),
                   scratch + job_scratch[job], queries + query_offset[pair.y],
                   static_cast<int>(query_length[pair.y]), open, extend, lane);
  if (lane == 0) best_out[pair.y * best_stride + pair.x] = best;
}

}  // namespace molaccel::align::gpu

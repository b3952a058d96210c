// fused_kernel and fused_cg_kernel: the streaming kernels for any n.
#pragma once

#include "linalg/cuda/resident_rows.cuh"

namespace molaccel::linalg::gpu::resident {

// ---- Streaming two-barrier BiCGStab for any n (GpuPath::fused, ResidentSetup::streaming) ----
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
__global__ void __launch_bounds__(kStreamThreads, kStreamBlocksPerSm)
    fused_kernel(const kernel_params<T> kp) {
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
__global__ void __launch_bounds__(kStreamThreads, kStreamBlocksPerSm)
    fused_cg_kernel(const kernel_params<T> kp) {
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

}  // namespace molaccel::linalg::gpu::resident

// resident_kernel_2: BiCGStab with two barriers per iteration (one block or a grid).
#pragma once

#include "linalg/cuda/resident_rows.cuh"

namespace molaccel::linalg::gpu::resident {

// ---- BiCGStab with two barriers per iteration (SolverTuning::form 2), one block or a grid ----
//
// Every vector a product needs from other blocks is also published (pub_vec, global memory), p
// and v double-buffered, and a block computes
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

// MAT 1: the matrix as CSR (row_product_2); 2: by diagonals (dia_row_product).
template <class T, int RPT, int SYNC, int MAT = 1>
__global__ void __launch_bounds__(kMaxThreads, 1) resident_kernel_2(const kernel_params<T> kp) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  __shared__ double warp_part[kSlots][kMaxWarps];
  __shared__ double block_part[kSlots];
  const int tid = int(threadIdx.x), nthreads = int(blockDim.x);
  context<T, SYNC> c{kp,
                     reinterpret_cast<T*>(dynamic_smem),
                     warp_part,
                     block_part,
                     tid & 31,
                     tid >> 5,
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
      t[k] = product(
          k, [&](int col) { return diag(col) * step_s(c.pload(pub_r, col), c.pload(vcur, col), ta); });
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
}

}  // namespace molaccel::linalg::gpu::resident

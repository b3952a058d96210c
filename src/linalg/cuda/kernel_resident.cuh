// resident_kernel: CG (three barriers per iteration) and BiCGStab in three (one cluster), CSR.
#pragma once

#include "linalg/cuda/resident_rows.cuh"

namespace molaccel::linalg::gpu::resident {

// Reduction slots.
constexpr int kSlotInit = 0;  // 2 (BiCGStab 3): init sums; BiCGStab: (r, r), (M A^T r0, p)
constexpr int kSlotA = 2;     // BiCGStab (M A^T r0, p) of a continued solve | CG (p, q)
constexpr int kSlotB = 3;     // BiCGStab 4 sums | CG 2 sums

// CG: (p, q) | (r, z), (r, r) | p published. BiCGStab (THREE, one cluster): three barriers per
// iteration. sigma = (r0, v) = (r0, A M p) is computed as (M A^T r0, p) (kp.r0hat, computed once
// on the host: r0 = b is fixed), summed with (r, r) when p is formed, so alpha is known when
// v = A M p is:
//   M p published, (r, r), (M A^T r0, p) | M s published | (t, s), (t, t), (r0, t), (r0, s).
// The same iterates in exact arithmetic as the textbook form; sigma rounds differently. A launch
// that continues a solve sums (M A^T r0, p) from the stored p in its first barrier (the same sum,
// bit for bit). The matrix as CSR (row_product).
template <class T, bool CG, int RPT, int SYNC>
__global__ void __launch_bounds__(kMaxThreads, 1) resident_kernel(const kernel_params<T> kp) {
  constexpr bool THREE = !CG;
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
  const int base = int(blockIdx.x) << kp.rb_shift;
  // No block of a cluster may touch another's shared memory before that block has started.
  if constexpr (SYNC == sync_cluster) cluster_sync();

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
        record_iteration(rec, rz_new, alpha, 0, rr, next);
      }
      rho = rz_new;
      active = next;
      if (active != 0.0 && done + 1 < kp.iterations) c.plain_barrier();
    } else {
      T s[RPT];
#pragma unroll
      for (int k = 0; k < RPT; ++k) v[k] = row_product(m, k, 0, c);
      const double alpha = safe_div(rho, sigma3);
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
      double rr[2] = {};  // (r, r), (M A^T r0, p')
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        x[k] += T(alpha) * (dd[k] * p[k]) + T(omega) * (dd[k] * s[k]);
        r[k] = s[k] - T(omega) * t[k];
        p[k] = r[k] + T(beta) * (p[k] - T(omega) * v[k]);
        c.store(0, k * nthreads + tid, m.row[k], dd[k] * p[k]);
        rr[0] += double(r[k]) * double(r[k]);
        rr[1] += double(rh[k]) * double(p[k]);
      }
      // Also publishes M p for the next iteration: slots 0-1 (kSlotInit, free in the loop).
      c.template sum<2>(rr, kSlotInit);
      sigma3 = rr[1];
      const double next =
          (rr[0] > kp.threshold && rho_new != 0.0 && omega != 0.0 && alpha != 0.0) ? 1.0 : 0.0;
      if (blockIdx.x == 0 && tid == 0) {
        record_iteration(rec, rho_new, alpha, omega, rr[0], next);
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

}  // namespace molaccel::linalg::gpu::resident

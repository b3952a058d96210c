// resident_kernel_1: BiCGStab with one barrier per iteration (a grid, the matrix by diagonals).
#pragma once

#include "linalg/cuda/resident_rows.cuh"

namespace molaccel::linalg::gpu::resident {

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

template <class T, int RPT, int DMAX>
__global__ void __launch_bounds__(kMaxThreads, 1) resident_kernel_1(const kernel_params<T> kp) {
  // DMAX: the diagonals the products are unrolled for (dia_count <= DMAX). With 5 (the 2-D
  // 5-point stencil, tridiagonal and banded matrices up to 5 diagonals) a missing entry is a zero
  // in `mat` and every term is added (no NaN test): the same value up to the sign of a zero sum
  // (and where an entry of the vector is not finite), own and recomputed rows alike. Measured
  // faster than the kernel unrolled for 8 (docs/linalg.md).
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
  T* const ph = reinterpret_cast<T*>(dynamic_smem);       // M p' over W2
  T* const sh = ph + n2;                                  // M s' over W1
  T* const rh = sh + n1;                                  // r' over W1 (its halo cells)
  T* const mat = rh + n1;                                 // [e * n1 + cell of W1]
  T* const dw = mat + std::size_t(dc) * std::size_t(n1);  // Jacobi diagonal over W2 (dg only)
  // The halo cells, found once per launch (no index arithmetic per iteration): W2's {cell of W2,
  // cell of W1 or -1, row or -1}, W1's {cell of W1, cell of W2, row or -1}.
  const std::size_t values_end = std::size_t(n2) * (dg ? 2 : 1) + std::size_t(n1) * std::size_t(2 + dc);
  int4* const tab2 = reinterpret_cast<int4*>(dynamic_smem + (values_end * sizeof(T) + 15) / 16 * 16);
  int4* const tab1 = tab2 + halo2;
  const std::size_t nn = std::size_t(kp.n);
  // The row of grid cell (gi, gj), or -1 outside the grid.
  auto grid_row = [gw, gh](int gi, int gj) {
    return gi >= 0 && gi < gh && gj >= 0 && gj < gw ? gi * gw + gj : -1;
  };
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
  // Every thread reads cells of dw and the tables that others filled (the first pass's step 1
  // reads dw at halo cells). A launch that starts from init meets a barrier in its first sum; one
  // that continues a solve does not (racecheck on an H200: read before written, without it).
  __syncthreads();
  // The row at cell `mi` of W1 times `vec` (pointing at the row's cell in a window of width vw),
  // by diagonals: the non-NaN values (ZERO: every value) in increasing offset order (the CSR
  // order, as dia_row_product). A neighbour outside the grid is a zero of the window.
  // With a constant stencil (kp.constant) the coefficients instead: the same terms, plus +-0 for
  // the neighbours outside the grid (window zeros), which leaves a sum that starts at +0 unchanged
  // (bit for bit, tested). Half the shared-memory loads of a product (measured
  // faster, docs/linalg.md).
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
  // 1e5, 224 of a 20 x 40 tile's 800 cells): fewer stores for the barrier's release to wait for
  // (measured faster than publishing every cell, docs/linalg.md).
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
    o12[k] =
        valid ? int(unsigned((u + ha) * v1 + w + hb) | (unsigned((u + 2 * ha) * v2 + w + 2 * hb) << 16)) : 0;
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
        record_iteration(rec, rho, alpha_prev, omega_prev, rr, next);
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
            if (cell.z >= 0)
              value[u] = (dg ? dw[cell.y] : T(1)) * step_s(rh[cell.x], product(cell.x, ph + cell.y, v2), ta);
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

}  // namespace molaccel::linalg::gpu::resident

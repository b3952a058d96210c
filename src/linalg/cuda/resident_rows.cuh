// The rows a thread owns and their products with the exchanged vectors: CSR rows in registers,
// in shared memory or from global memory; rows by diagonals; the BiCGStab step functions that
// owned and recomputed entries share (bit-identical by construction).
#pragma once

#include "linalg/cuda/resident_block.cuh"

namespace molaccel::linalg::gpu::resident {

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
// the cached slots: ResidentSolver::impl::dia_fits; NaN in the unused ones); at 4 rows per
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
        m.val[k][e] = e < kp.dia_count && m.row[k] < kp.n
                          ? kp.dia[std::size_t(e) * nn + std::size_t(m.row[k])]
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
            mv[e * rbm + li] =
                here ? kp.dia[std::size_t(e) * std::size_t(kp.n) + std::size_t(m.row[k])] : T(NAN);
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

// Reduction slots of the two-barrier form (resident_kernel_2 and fused_kernel).
constexpr int kSlot2A = 0;  // (r0, v), (r, r)   [init: (b, b) twice]
constexpr int kSlot2B = 2;  // (t, s), (t, t), (r0, t), (r0, s)

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

}  // namespace molaccel::linalg::gpu::resident

// The resident and fused solver kernels, compiled once per element type: the choice among them
// (pick_kernel, fused_kernel_for). The overview of the kernels:
//
// The resident path: one hand-written cooperative kernel runs a whole batch of CG or BiCGStab
// iterations (no preconditioner or Jacobi, float or double).
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
#include "linalg/cuda/kernel_fused.cuh"
#include "linalg/cuda/kernel_one_barrier.cuh"
#include "linalg/cuda/kernel_resident.cuh"
#include "linalg/cuda/kernel_two_barrier.cuh"

namespace molaccel::linalg::gpu::resident {

// One kernel family at 1, 2 or 4 rows per thread: Kernel<rpt>.
template <class T, template <int> class Kernel>
kernel_ptr<T> by_rows(int rpt) {
  return rpt == 1 ? Kernel<1>::get() : rpt == 2 ? Kernel<2>::get() : Kernel<4>::get();
}
template <class T, bool CG, int SYNC>
struct one_block_form {
  template <int RPT>
  struct at {
    static kernel_ptr<T> get() { return &resident_kernel<T, CG, RPT, SYNC>; }
  };
};
template <class T, int SYNC, int MAT>
struct two_barrier_form {
  template <int RPT>
  struct at {
    static kernel_ptr<T> get() { return &resident_kernel_2<T, RPT, SYNC, MAT>; }
  };
};

// The resident kernels: CG (CSR) in a block, a cluster or on a grid; BiCGStab with two barriers
// in a block or on a grid (CSR, or by diagonals: `dia`), with three in a cluster (CSR), with one
// on a grid (by diagonals; `five`: at most 5 of them, the kernel unrolled for 5).
template <class T>
kernel_ptr<T> pick_kernel(bool cg_solver, int rpt, int sync, int form, bool dia, bool five) {
  if (cg_solver) {
    if (sync == sync_block) return by_rows<T, one_block_form<T, true, sync_block>::template at>(rpt);
    if (sync == sync_cluster) return by_rows<T, one_block_form<T, true, sync_cluster>::template at>(rpt);
    return by_rows<T, one_block_form<T, true, sync_grid>::template at>(rpt);
  }
  if (form == 4)
    return rpt == 1 ? (five ? &resident_kernel_1<T, 1, 5> : &resident_kernel_1<T, 1, kDiaMax>)
                    : (five ? &resident_kernel_1<T, 2, 5> : &resident_kernel_1<T, 2, kDiaMax>);
  if (form == 3) return by_rows<T, one_block_form<T, false, sync_cluster>::template at>(rpt);
  if (sync == sync_block)
    return dia ? by_rows<T, two_barrier_form<T, sync_block, 2>::template at>(rpt)
               : by_rows<T, two_barrier_form<T, sync_block, 1>::template at>(rpt);
  return dia ? by_rows<T, two_barrier_form<T, sync_grid, 2>::template at>(rpt)
             : by_rows<T, two_barrier_form<T, sync_grid, 1>::template at>(rpt);
}

template <class T>
kernel_ptr<T> fused_kernel_for(bool cg_solver, bool dia, int loads) {
  if (cg_solver) return &fused_cg_kernel<T>;
  if (dia) return loads == 2 ? &fused_kernel<T, 2, 2> : &fused_kernel<T, 1, 2>;
  return loads == 2 ? &fused_kernel<T, 2, 1> : &fused_kernel<T, 1, 1>;
}

template kernel_ptr<float> pick_kernel<float>(bool, int, int, int, bool, bool);
template kernel_ptr<double> pick_kernel<double>(bool, int, int, int, bool, bool);
template kernel_ptr<float> fused_kernel_for<float>(bool, bool, int);
template kernel_ptr<double> fused_kernel_for<double>(bool, bool, int);

}  // namespace molaccel::linalg::gpu::resident

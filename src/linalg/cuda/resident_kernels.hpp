// The resident and fused solver kernels' interface (resident_kernels.cu), shared with their
// dispatch (resident.cu): the constants both sides use, the kernel parameters, the layouts of
// the exchange buffers and the kernel choice. docs/linalg.md describes the kernels.
#pragma once

#include <cstddef>

namespace molaccel::linalg::gpu::resident {

constexpr int kMaxThreads = 512;  // launch bound: 128 registers per thread
constexpr int kMaxWarps = kMaxThreads / 32;
constexpr int kCached = 8;      // nonzeros per row kept in registers (one row per thread; 6 for two)
constexpr int kSlots = 18;      // reduction slots (each kind of partial sum has its own; form 4: 2 x 9)
constexpr int kStateWords = 5;  // {rho, active, rr0, iterations done, grid barriers passed}
constexpr int kRecordWords = 5;
constexpr int kSmemNnz = 5;  // grid, 4 rows per thread: nonzeros per row kept in shared memory
// The grid gather reads the block sums in chunks of 32 x 4 blocks, one warp per sum and chunk: up
// to 128 blocks one L2 round trip, above it two. Automatic tiles stay within one chunk.
constexpr int kGatherChunk = 128;
// The matrix by diagonals (ResidentSetup::dia_*, linalg/diagonal.hpp): at most this many
// diagonals, values diagonal-major (dia_count x n), NaN where the CSR has no entry.
constexpr int kDiaMax = 8;

enum sync_kind { sync_block = 0, sync_cluster = 1, sync_grid = 2 };

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
  T* xp = nullptr;             // grid: exchanged vectors (2 x n; two-barrier form: 7 x n, see pub_vec)
  double* partials = nullptr;  // grid: kSlots x gridDim.x block sums
  unsigned long long* counter = nullptr;  // grid barrier: arrivals (monotonic)
  double* out = nullptr;                  // state words, then records
  int iterations = 0;
  int init = 0;
  double threshold = 0;
  int matrix_smem = 0;         // grid, 4 rows per thread: rows of <= kSmemNnz in shared memory
  unsigned matrix_offset = 0;  // their byte offset in the dynamic shared memory
  double* aux = nullptr;       // streaming kernel: sigma and the buffer index between launches
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
  // A constant stencil on tiles (ResidentSetup::dia_constant): the products use coef, not the
  // values in shared memory.
  int constant = 0;
  T coef[kDiaMax] = {};
  // BiCGStab, three-barrier form (resident_kernel with THREE): M A^T r0 (n), so that
  // (r0, A M p) = (M A^T r0, p) is summed with (r, r) when p is formed, not after the product.
  const T* r0hat = nullptr;
};

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

// Exchange buffers (kernel_params::xp), n entries per vector: the one-barrier form publishes s,
// t, p, v in two sets; the fused BiCGStab kernel keeps r, p, v in two buffers each and t.
enum one_vec { ov_s = 0, ov_t = 1, ov_p = 2, ov_v = 3, ov_count = 4 };     // published: 2 sets of 4 x n
enum stream_vec { sv_r = 0, sv_p = 2, sv_v = 4, sv_t = 6, sv_count = 7 };  // r, p, v: 2 buffers each
constexpr int kStreamThreads = 512;
// Registers bounded for 2 blocks of 512 per SM (64 registers; 1 block, 128 registers, measured
// slower). The automatic grid is then 2 blocks per SM.
constexpr int kStreamBlocksPerSm = 2;

template <class T>
using kernel_ptr = void (*)(kernel_params<T>);

// The resident kernel for a solver, rows per thread (1, 2, 4), scope (sync_kind) and BiCGStab
// form (2, 3 or 4), the matrix by diagonals (`dia`; `five`: at most 5 of them).
template <class T>
kernel_ptr<T> pick_kernel(bool cg_solver, int rpt, int sync, int form, bool dia, bool five);
// The fused kernel: CG, or BiCGStab by diagonals or CSR with the vectors loaded through L1
// (loads 2) or L2 (1).
template <class T>
kernel_ptr<T> fused_kernel_for(bool cg_solver, bool dia, int loads);

}  // namespace molaccel::linalg::gpu::resident

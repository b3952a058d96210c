// The resident small-system solver's interface (cuda/resident.cu, CUDA builds only). C++17 and
// free of linalg.hpp, so the CUDA translation unit (compiled as C++17) can include it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace molaccel::linalg::gpu {
// The resident small-system solver (cuda/resident.cu): one cooperative kernel runs a batch of
// CG or BiCGStab iterations with each thread's rows of x, r, r0, p, the Jacobi diagonal and the
// short matrix rows in registers; only the vectors the products read are exchanged (shared
// memory of one block, distributed shared memory of one cluster, or L2 for a grid).
struct resident_setup {
  bool fp64 = true;  // element type of the values and vectors: double, else float
  bool cg = false;
  std::size_t n = 0;
  const void* row_ptr = nullptr;  // device CSR (int32 indices, values double or float)
  const void* col_idx = nullptr;
  const void* values = nullptr;
  const void* b = nullptr;
  const void* d = nullptr;  // Jacobi: inverse diagonal; null: no preconditioner
  void* x = nullptr;        // state between launches (n each)
  void* r = nullptr;
  void* p = nullptr;
  double threshold = 0;  // active while (r, r) > threshold
  int blocks = 0;        // 0: from n
  int threads = 0;       // 0: 512; 128, 256 or 512
  int barrier = 0;  // 0 automatic, 1 cluster, 2 grid (flags), 3 grid (cooperative groups), 4 grid (counter),
                    // 5 grid (counter, non-returning red arrival), 6 grid (counter, the last arrival publishes a
                    // generation word that the others poll), 7 grid (counter, the last arrival does not poll)
  int form = 0;     // BiCGStab: 0 automatic (cuda/resident.cu, kAutomaticForm*), 1 four barriers, 2 two,
                    // 3 three (one block or cluster; needs r0hat), 4 one (grid; needs r0hat and the
                    // matrix by diagonals, whose halo windows must fit shared memory)
  int matrix_smem = 0;  // grid with 4 rows per thread: 2 rows of <= 5 nonzeros in shared memory, 1 from L2;
                        // 0 automatic (kAutomaticMatrixShared)
  // The streaming kernel for any n (launch_mode::fused; BiCGStab two-barrier form, CG
  // Chronopoulos-Gear with one barrier): vectors in global memory, grid-stride over rows; blocks
  // (0: co-resident maximum), threads (0: 512) and barrier as above (grid kinds only).
  bool streaming = false;
  int streaming_per_sm = 0;  // register bound for 1 or 2 blocks of 512 per SM (0: 2)
  // Grid and cluster sums after the barrier: 0 automatic (2), 1 every warp of every block reads the
  // block sums, 2 warp 0 reads them and shares the totals through shared memory (same totals).
  int gather = 0;
  // Fused BiCGStab kernel: loads of the exchanged vectors 0 automatic, 1 L2 only, 2 through L1;
  // rows 0 automatic, 1 grid-stride, 2 balanced over the blocks (cuda/resident.cu, row_walk).
  int fused_loads = 0;
  int fused_rows = 0;
  const void* r0hat = nullptr;  // BiCGStab: M A^T b (n, element type), for forms 3 and 4
  // Fused BiCGStab kernel with grid-stride rows: the matrix by diagonals instead of CSR when
  // dia_values is set (linalg/diagonal.hpp: dia_count <= 8 increasing offsets, dia_count x n
  // values of the element type, diagonal-major, NaN where the CSR row has no entry).
  // The resident BiCGStab kernels (forms 2 and 3) use the same layout: dia_mode 0 where the
  // automatic choice says (cuda/resident.cu, kAutomaticDia), 2 wherever the values fit.
  const void* dia_values = nullptr;
  int dia_count = 0;
  int dia_mode = 0;
  int dia_offsets[8] = {};
  // One-barrier form (4): the diagonals as a stencil on a grid_height x grid_width grid
  // (linalg/diagonal.hpp, diagonal_grid_of; 0: not a grid), offset k = dia_a[k] x grid_width +
  // dia_b[k]. tiles: 0 automatic (2-D tiles of the grid where it is one, else bands of rows),
  // 1 bands of rows, 2 tiles (bands where the matrix is not a grid).
  int grid_width = 0, grid_height = 0;
  int dia_a[8] = {}, dia_b[8] = {};
  int tiles = 0;
  // The grid's stencil has constant coefficients (diagonal_constant_of): dia_coef[k] on diagonal
  // k. Form 4 on tiles then reads no matrix values (MOLACCEL_LINALG_RESIDENT_CONSTANT=0: it does).
  bool dia_constant = false;
  double dia_coef[8] = {};
};
class resident_solver {
 public:
  resident_solver(int device, const resident_setup& setup);  // throws Error when n does not fit
  ~resident_solver();
  resident_solver(const resident_solver&) = delete;
  resident_solver& operator=(const resident_solver&) = delete;
  // x = 0, r = r0 = b, p = b (BiCGStab) or M b (CG); returns ((b, b), active).
  std::pair<double, bool> initialise();
  // Runs at most `iterations` (fewer once inactive) in one launch and waits; returns 5 words per
  // iteration done: rho (CG: (r, z)), alpha, omega (CG: 0), (r, r), active.
  std::vector<double> run(int iterations);
  std::string describe() const;
  int blocks() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};
}  // namespace molaccel::linalg::gpu

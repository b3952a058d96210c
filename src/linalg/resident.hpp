// The resident small-system solver's interface (cuda/resident.cu, CUDA builds only). C++17 and
// free of linalg.hpp, so the CUDA translation unit (compiled as C++17) can include it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linalg/tuning.hpp"

namespace molaccel::linalg::gpu {
// The resident small-system solver (cuda/resident.cu): one cooperative kernel runs a batch of
// CG or BiCGStab iterations with each thread's rows of x, r, r0, p, the Jacobi diagonal and the
// short matrix rows in registers; only the vectors the products read are exchanged (shared
// memory of one block, distributed shared memory of one cluster, or L2 for a grid).
struct ResidentSetup {
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
  // The streaming kernel for any n (GpuPath::fused; BiCGStab two-barrier form, CG
  // Chronopoulos-Gear with one barrier): vectors in global memory, grid-stride over rows.
  bool streaming = false;
  SolverTuning tuning;          // blocks, threads, scope, form, rows_per_thread, tiles, fused_loads
  const void* r0hat = nullptr;  // BiCGStab: M A^T b (n, element type), for forms 3 and 4
  // BiCGStab, the matrix by diagonals where set (linalg/diagonal.hpp: dia_count <= 8 increasing
  // offsets, dia_count x n values of the element type, diagonal-major, NaN where the CSR row has
  // no entry): the fused kernel, the resident two-barrier form where the values fit the
  // registers, and the one-barrier form.
  const void* dia_values = nullptr;
  int dia_count = 0;
  int dia_offsets[8] = {};
  // One-barrier form (4): the diagonals as a stencil on a grid_height x grid_width grid
  // (linalg/diagonal.hpp, diagonal_grid_of; 0: not a grid, then bands of rows), offset k =
  // dia_a[k] x grid_width + dia_b[k].
  int grid_width = 0, grid_height = 0;
  int dia_a[8] = {}, dia_b[8] = {};
  // The grid's stencil has constant coefficients (diagonal_constant_of): dia_coef[k] on diagonal
  // k. Form 4 on tiles then reads no matrix values.
  bool dia_constant = false;
  double dia_coef[8] = {};
};
class ResidentSolver {
 public:
  ResidentSolver(int device, const ResidentSetup& setup);  // throws Error when n does not fit
  ~ResidentSolver();
  ResidentSolver(const ResidentSolver&) = delete;
  ResidentSolver& operator=(const ResidentSolver&) = delete;
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

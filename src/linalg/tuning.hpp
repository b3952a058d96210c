// The GPU solvers' tuning: which path runs the iterations and the geometry of the hand-written
// kernels, chosen in one place (tuning_for). Internal: tests and benchmarks pass another tuning
// through solve_tuned (linalg/solve_tuned.hpp). C++17 and free of linalg.hpp, so the CUDA
// translation units can include it.
#pragma once

#include <cstddef>

namespace molaccel::linalg {

// How a GPU runs the iterations (SolverOptions::launch, linalg.hpp). graph: the generated kernels
// of `batch` iterations replayed as one CUDA graph per host check; resident: one cooperative
// kernel keeps every thread's rows in registers (systems up to a few hundred thousand rows);
// fused: one cooperative kernel streams the vectors through global memory (any n).
enum class GpuPath { automatic, graph, resident, fused };

// The problem as the tuning sees it.
struct SolveProblem {
  std::size_t rows = 0;
  bool cg = false;  // CG, else BiCGStab
  GpuPath requested = GpuPath::automatic;
};

// Every field but `path` and `fall_back_to_graph`: 0 = chosen when the kernel is configured
// (cuda/resident_dispatch.cpp: from the device's occupancy and the matrix).
struct SolverTuning {
  GpuPath path = GpuPath::graph;
  // Automatic path: a resident or fused kernel that cannot take the system hands it to the graph.
  bool fall_back_to_graph = false;
  int batch = 0;  // iterations per host check; 0: 8 in the graph path, the whole solve otherwise
  // Resident and fused kernels.
  int blocks = 0;   // resident: blocks of the grid (1: one block); fused: co-resident maximum
  int threads = 0;  // per block: 128, 256 or 512 (0: 512; resident one-barrier form on few rows: 256)
  // Resident: 1 one block, 2 one thread-block cluster, 3 a cooperative grid (0: one block up to
  // 4 x threads rows, then a grid for BiCGStab by diagonals, a cluster up to 32 x threads rows,
  // a grid).
  int scope = 0;
  // Resident BiCGStab barriers per iteration: 2 (a block or a grid), 3 (a cluster), 4 = one (a
  // grid, the matrix by diagonals). 0: 2 in a block, 3 in a cluster, one on a grid where the
  // matrix is stored by diagonals and its halo windows fit shared memory, else 2.
  int form = 0;
  int rows_per_thread = 0;       // resident grid: 1, 2 or 4 (0: the fewest that fit; two-barrier form by n)
  bool diagonals = true;         // BiCGStab: the matrix by diagonals where it qualifies (false: CSR)
  int tiles_i = 0, tiles_j = 0;  // one-barrier form on a 2-D grid: tiles (0: chosen by cost)
  int fused_loads = 0;           // fused BiCGStab: 1 vectors through L2, 2 through L1 (0: by n)
};

// launch = automatic picks the resident path on a GPU for systems of at most this many rows
// (measured faster than the graph path at every size up to 199,809 rows: docs/linalg.md).
inline constexpr std::size_t resident_automatic_rows = 200000;
// Fused BiCGStab: the vectors other blocks wrote are loaded through L1 up to this many rows,
// through L2 above (docs/linalg.md: faster at 1e6, slower at 1e7).
inline constexpr std::size_t fused_l1_max_rows = 2000000;

// The tuning for `problem` on GPU `device`: the path (automatic: resident up to
// resident_automatic_rows rows, then fused for BiCGStab and graph for CG) and the choices that
// depend on the problem size alone. The choices that depend on the device (its SMs, shared
// memory and each kernel's occupancy) are left at 0 and made by the resident dispatch when it
// configures the kernel; `device` is where a per-architecture table would be looked up.
SolverTuning tuning_for(int device, const SolveProblem& problem);

}  // namespace molaccel::linalg

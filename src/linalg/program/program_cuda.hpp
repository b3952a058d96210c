// Source of a planned program (program_cuda.cpp: the emitter of both dialects) and its kernel's
// parameters:
//   row_ptr, col_idx, values (CSR), n, vectors (two buffers of n T per vector symbol, in
//   declaration order), scalars (one double per symbol, in and out), partials (2 x slots x
//   blocks doubles), counter (CUDA: zeroed 64-bit; OpenCL: two zeroed 32-bit words), monitors
//   ((max_iterations + 1) x monitors), outcome (2 + vectors: iterations, status = stop test + 1
//   or -1 at the cap, each vector's current buffer), max_iterations. Every block must be
//   resident at once (CUDA: a cooperative launch; OpenCL: program_opencl.cpp).
#pragma once

#include <array>
#include <functional>
#include <string>

#include "linalg/codegen/codegen.hpp"
#include "linalg/program/program_plan.hpp"

namespace molaccel::linalg::program {

// The form of the emitted kernel (docs/linalg.md, "CUDA emission").
struct KernelShape {
  // One thread block (up to 512 threads, an ordinary launch): __syncthreads is the barrier and
  // the block's sums are the totals. Else a cooperative grid of 256-thread blocks.
  bool block = false;
  // > 0, the resident kind: thread g owns rows g + j * (threads in the launch), j < rows_per_thread,
  // and keeps every vector's value there in registers for the whole solve; only the vectors some
  // product reads are also stored to memory. 0, the streaming kind: rows grid-strided, every
  // vector in memory.
  int rows_per_thread = 0;
  // > 0: the matrix by diagonals (linalg/diagonal.hpp): the kernel's `values` are `diagonals` x n,
  // diagonal-major, a NaN where a row has no entry at offsets[k] = column - row (increasing); the
  // product adds the non-NaN entries in offset order (the CSR sum bit for bit) and reads no
  // row_ptr or col_idx; the resident kind keeps its rows' values in registers. 0: CSR.
  int diagonals = 0;
  std::array<int, 8> offsets{};
  // With diagonals, grid_width > 0: a constant stencil on a grid_width x grid_height grid
  // (diagonal_grid_of, diagonal_constant_of): entry k of row (i, j) = (row / width, row % width)
  // is coef[k] where the cell (i + grid_a[k], j + grid_b[k]) is inside the grid, else none; the
  // kernel reads no matrix values (the same terms in the same order as the values would give).
  int grid_width = 0, grid_height = 0;
  std::array<int, 8> grid_a{}, grid_b{};
  std::array<double, 8> coef{};
  // One block (resident kind): the vectors some product reads are exchanged through shared
  // memory (`extern __shared__ T mp_exchange[]`, exchange_buffers x n values, sized at launch)
  // instead of global memory.
  bool shared_exchange = false;
  // > 0 (a constant stencil, rows in registers): the tile form. Block b owns the tile_h x tile_w
  // tile (b / tiles_j, b % tiles_j) of the grid (tiles_j = ceil(grid_width / tile_w); one block:
  // the whole grid), its thread t the tile's cells j * threads + t. Before a segment's rows the
  // block evaluates every product's operand over the tile and the cells one hop of the stencil
  // around it into shared memory, and the operand of a product inside that operand over two
  // hops, from the vectors of the last barrier: the products then read shared memory, and a
  // nested product costs one more pass over its window instead of a barrier.
  int tile_h = 0, tile_w = 0;
  int threads = 0;  // the tile form's threads per block (0: program::tile_threads derives them)
  // > 0 (rows in registers, sm_90 and later): the cluster form. The launch is one thread-block
  // cluster of that many blocks (at most 16) of `threads` threads; block b owns the rows b x RB
  // up to (b + 1) x RB (RB = rows_per_thread x threads, a literal in the kernel), its thread t
  // the rows b x RB + j x threads + t. The product operands live in each block's shared memory
  // (`extern __shared__ T mp_exchange[]`, exchange_buffers x RB values, sized at launch) and are
  // read at other rows through distributed shared memory; the block sums are pushed into every
  // block's shared memory before the cluster's hardware barrier (cuda/cluster_blocks.cuh).
  int cluster_blocks = 0;
  int max_threads() const { return block || tile_h > 0 || cluster_blocks > 0 ? 512 : 256; }
  int cluster_rows() const { return rows_per_thread * threads; }  // the cluster form's RB
};

// The tile form's threads per block: KernelShape::threads, else the tile's cells over its
// rows per thread in whole warps.
constexpr int tile_threads(const KernelShape& s) {
  const int cells = s.tile_h * s.tile_w, rows = s.rows_per_thread > 0 ? s.rows_per_thread : 1;
  return s.threads > 0 ? s.threads : ((cells + rows - 1) / rows + 31) / 32 * 32;
}

// The buffers a kernel with KernelShape::shared_exchange (of n values) or cluster_blocks (of
// cluster_rows() values per block) needs in shared memory: one per vector some product reads, two
// for those renamed in some segment.
std::size_t exchange_buffers(const Program& program, const ProgramPlan& plan);

std::string kernel_name(const Program& program);
// The kernel in `dialect`, after `helpers` (CUDA: grid_blocks.cuh and program_blocks.cuh;
// OpenCL: program_opencl.cpp's). OpenCL takes the grid, streaming shape only.
std::string generate_program(const Program& program, const ProgramPlan& plan, const Dialect& dialect,
                             std::string helpers, KernelShape shape = {});
std::string generate_program_cuda(const Program& program, const ProgramPlan& plan, KernelShape shape = {});
// run_program_on_gpu in the given form (tests: every form on the GPU); rows_per_thread is 1, 2
// or 4 on a grid (0: streamed), at least 1 in a block; diagonals > 0 asks for the matrix by
// diagonals (the offsets are the matrix's), and grid_width > 0 besides for a constant stencil
// (the grid and coefficients are the matrix's). Throws where the form cannot hold the rows or
// the matrix does not qualify.
// The tile form where tile_h > 0: tiles of tile_h x tile_w (at most the grid), or with tile_w = 0
// the tiles run_program_on_gpu would pick. A form that cannot hold the rows (on this GPU: its
// blocks not all resident at once) throws FormRefused.
struct FormRefused : Error {
  using Error::Error;
};
ProgramResult run_shaped_on_gpu(const Program& program, const ProgramInputs& inputs, KernelShape shape,
                                int device = 0);
// run_program_on_gpu (shape: nullptr) or run_shaped_on_gpu, telling `progress` (where given) the
// iterations done about every 0.1 s while the kernel runs, read from the monitors it writes.
ProgramResult run_on_gpu(const Program& program, const ProgramInputs& inputs, int device,
                         const KernelShape* shape, const std::function<void(int)>& progress);
// The CUDA building blocks the generated kernels call (grid_blocks.cuh, program_blocks.cuh), as
// source text: tests compile them on their own.
std::string program_cuda_blocks();
std::string generate_program_opencl(const Program& program, const ProgramPlan& plan);  // program_opencl.cpp

}  // namespace molaccel::linalg::program

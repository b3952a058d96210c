// Random programs of statements (fixed seeds) for the program tests.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "linalg/diagonal.hpp"
#include "linalg/program/program_cuda.hpp"
#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"

namespace molaccel::linalg::testing {

// Random programs whose generated kernels test_program_emulated.cpp runs on the CPU: seeds 1-20
// of random_program, then seeds 1-10 with nested products (emulated_random_program).
inline constexpr int kEmulatedRandomPrograms = 30;

// The kernel forms the emulation runs, with its launch (at most 32 threads per block): every
// form of the emitter (streamed rows on a grid, rows in registers on a grid, in one block and in
// one cluster); 5 rows per thread hold 240 and 160 rows, and the cluster's 4 blocks of 16 threads
// with 3 rows 192, above the emulated problems' 144.
struct EmulatedShape {
  program::KernelShape shape;
  unsigned blocks = 1, threads = 32;
  const char* name = "";
};
constexpr program::KernelShape with_shared_exchange(program::KernelShape s) {
  s.shared_exchange = true;
  return s;
}
// The cluster form: `blocks` of `threads` (run_shaped_on_gpu takes any count > 0 as the request
// and launches as many blocks as the rows need).
constexpr program::KernelShape with_cluster(program::KernelShape s, int blocks, int threads = 512) {
  s.cluster_blocks = blocks;
  s.threads = threads;
  return s;
}
inline constexpr std::array<EmulatedShape, 4> kEmulatedShapes{
    {{{false, 0}, 3, 8, "grid, streamed"},
     {{false, 5}, 3, 16, "grid, registers"},
     {with_shared_exchange({true, 5}), 1, 32, "one block, registers, operands in shared memory"},
     {with_cluster({false, 3}, 4, 16), 4, 16,
      "one cluster, registers, operands in distributed shared memory"}}};

// The matrix by diagonals (KernelShape::diagonals): the emulated forms that read it (streamed
// on a grid, registers in one block and in the cluster), with the offsets of the band below and of
// Poisson 12 x 12.
inline constexpr std::array<int, 4> kBandOffsets{-3, -1, 0, 2};
inline constexpr std::array<int, 5> kPoisson12Offsets{-12, -1, 0, 1, 12};
template <std::size_t D>
constexpr EmulatedShape by_diagonals(EmulatedShape s, const std::array<int, D>& offsets) {
  s.shape.diagonals = int(D);
  for (std::size_t k = 0; k < D; ++k) s.shape.offsets[k] = offsets[k];
  return s;
}
inline constexpr std::array<EmulatedShape, 3> kEmulatedDiagonalShapes{kEmulatedShapes[0], kEmulatedShapes[2],
                                                                      kEmulatedShapes[3]};

// `s` reading `a` as a constant stencil (which it must be: linalg/diagonal.hpp).
inline EmulatedShape as_constant_stencil(EmulatedShape s, const HostCsr<double>& a) {
  const auto layout = diagonal_storage(a);
  const auto grid = layout ? diagonal_grid_of(*layout, a.rows) : std::nullopt;
  const auto coef = grid ? diagonal_constant_of(*layout, *grid, a.rows) : std::nullopt;
  if (!coef) throw std::invalid_argument("as_constant_stencil: not a constant stencil");
  s.shape.diagonals = int(layout->offsets.size());
  for (std::size_t k = 0; k < layout->offsets.size(); ++k) {
    s.shape.offsets[k] = layout->offsets[k];
    s.shape.grid_a[k] = grid->a[k];
    s.shape.grid_b[k] = grid->b[k];
    s.shape.coef[k] = (*coef)[k];
  }
  s.shape.grid_width = grid->width;
  s.shape.grid_height = grid->height;
  return s;
}

// The tile form (KernelShape::tile_h) on the constant stencils of the emulation (Poisson 12 x 12,
// and 10 x 10 for random programs): 6 x 6 tiles on a grid of 4 blocks (3 rows per thread of 32,
// program::tile_threads), and one block whose 12 x 12 tile is the whole grid (5 rows per thread
// of 32).
constexpr program::KernelShape with_tiles(program::KernelShape s, int h, int w) {
  s.tile_h = h;
  s.tile_w = w;
  return s;
}
constexpr EmulatedShape tiled(EmulatedShape s, int h, int w) {
  s.shape = with_tiles(s.shape, h, w);
  return s;
}
inline constexpr std::array<EmulatedShape, 2> kEmulatedTileShapes{
    {tiled({{false, 3}, 4, 32, "grid, 6 x 6 tiles"}, 6, 6),
     tiled({{true, 5}, 1, 32, "one block, one tile"}, 12, 12)}};

// The constant stencil the random programs run on: 2-D Poisson 10 x 10 over 8 (|row sum| <= 1).
inline HostCsr<double> stencil_matrix() {
  auto a = poisson_2d(10);
  for (auto& v : a.values) v /= 8;
  return a;
}

struct RandomProgram {
  Program program{"random"};
  std::vector<Expression> vectors, scalars;
  std::vector<NodePtr> vector_targets, scalar_targets;  // leaves (Assignable made when used)
  std::unique_ptr<Expression> matrix;
};

class Generator {
 public:
  const ElementwiseModifier damp{"damp", "X / (1 + X * X)"};

  // `products`: the levels of products an expression may hold (2: a product inside a product's
  // operand, as Program allows).
  Generator(RandomProgram& rp, std::uint64_t seed, int products = 1)
      : rp_(rp), rng_(seed), products_(products) {}

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  double coefficient() { return std::uniform_real_distribution<double>(-0.9, 0.9)(rng_); }

  Expression scalar_expression(int depth) {
    if (depth == 0 || pick(3) == 0)
      return pick(4) == 0 ? Expression(coefficient() + 0.0 * rp_.scalars[0])
                          : rp_.scalars[std::size_t(pick(int(rp_.scalars.size())))];
    switch (pick(3)) {
      case 0:
        return scalar_expression(depth - 1) + scalar_expression(depth - 1);
      case 1:
        return scalar_expression(depth - 1) * scalar_expression(depth - 1);
      default:
        return cos(scalar_expression(depth - 1));
    }
  }

  Expression vector_expression(int depth, int products) {
    if (depth == 0 || pick(4) == 0) return rp_.vectors[std::size_t(pick(int(rp_.vectors.size())))];
    // Nested programs (products_ > 1) draw products three times as often, so that most hold one.
    switch (pick(products == 0 ? 7 : products_ > 1 ? 10 : 8)) {
      case 0:
        return vector_expression(depth - 1, products) + vector_expression(depth - 1, products);
      case 1:
        return vector_expression(depth - 1, products) -
               coefficient() * vector_expression(depth - 1, products);
      case 2:
        return scalar_expression(1) * vector_expression(depth - 1, products);
      case 3:
        return element_prod(vector_expression(depth - 1, products), vector_expression(depth - 1, products));
      case 4:
        return sin(vector_expression(depth - 1, products));
      case 5:  // a modifier (its body in X) and the other functions, all bounded on [-1, 1]
        return damp(max(abs(vector_expression(depth - 1, products)),
                        min(vector_expression(depth - 1, products), vector_expression(depth - 1, products))));
      case 6:
        return element_prod(
            exp(-abs(vector_expression(depth - 1, products))),
            greater(vector_expression(depth - 1, products), vector_expression(depth - 1, products)));
      default:
        return prod(*rp_.matrix, vector_expression(depth - 1, products - 1));
    }
  }

  // tanh keeps every value in [-1, 1] whatever the program does.
  Statement statement(int target_kind, int target) {
    if (target_kind == 0) {
      const Assignable t(rp_.vector_targets[std::size_t(target)]);
      return pick(3) == 0 ? (t += 0.25 * tanh(vector_expression(3, products_)))
                          : (t = tanh(vector_expression(3, products_)));
    }
    const Assignable t(rp_.scalar_targets[std::size_t(target)]);
    const int reduced = 1;  // products in reductions are not nested (Program rejects them)
    switch (pick(3)) {
      case 0: {  // a cosine in [-1, 1]
        auto e = vector_expression(2, reduced), f = vector_expression(2, reduced);
        return t = safe_div(inner_prod(e, f), norm_2(e) * norm_2(f) + 1.0) + 0.5 * scalar_expression(1) -
                   0.5 * scalar_expression(1);
      }
      case 1:
        return t = tanh(inner_prod(vector_expression(2, reduced), vector_expression(2, reduced)) * 0.01);
      default:
        return t = tanh(scalar_expression(2));
    }
  }

  std::vector<Statement> step() {
    const int count = pick(4) == 0 ? 2 : 1;
    std::vector<Statement> out;
    std::set<std::pair<int, int>> used;
    while (int(out.size()) < count) {
      const int kind = pick(2);
      const int target = pick(int(kind == 0 ? rp_.vector_targets.size() : rp_.scalar_targets.size()));
      if (used.insert({kind, target}).second) out.push_back(statement(kind, target));
    }
    return out;
  }

 private:
  RandomProgram& rp_;
  std::mt19937_64 rng_;
  int products_ = 1;
};

inline HostCsr<double> random_matrix(std::size_t n, std::mt19937_64& rng) {
  // Non-symmetric, a few entries per row, |row sum| <= 1 so products stay in range.
  HostCsr<double> a;
  a.rows = a.cols = n;
  std::uniform_int_distribution<std::size_t> col(0, n - 1);
  std::uniform_real_distribution<double> val(-1, 1);
  for (std::size_t r = 0; r < n; ++r) {
    std::set<std::size_t> cols{r, col(rng), col(rng), (r + 1) % n};
    for (std::size_t c : cols) {
      a.col_idx.push_back(std::int32_t(c));
      a.values.push_back(val(rng) / double(cols.size()));
    }
    a.row_ptr.push_back(std::int32_t(a.col_idx.size()));
  }
  return a;
}

// A matrix with entries on kBandOffsets only (the diagonal always, the others 85 % of the time,
// so the band has holes), |row sum| <= 1.
inline HostCsr<double> banded_matrix(std::size_t n, std::mt19937_64& rng) {
  HostCsr<double> a;
  a.rows = a.cols = n;
  std::uniform_real_distribution<double> u(0, 1), val(-1, 1);
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<std::size_t> cols;
    for (int off : kBandOffsets) {
      const auto c = std::ptrdiff_t(r) + off;
      if (c >= 0 && c < std::ptrdiff_t(n) && (off == 0 || u(rng) < 0.85)) cols.push_back(std::size_t(c));
    }
    for (std::size_t c : cols) {
      a.col_idx.push_back(std::int32_t(c));
      a.values.push_back(val(rng) / double(cols.size()));
    }
    a.row_ptr.push_back(std::int32_t(a.col_idx.size()));
  }
  return a;
}

// The values of `a` by the diagonals `offsets` (every entry on one of them), as the kernel reads
// them: diagonal-major, a NaN where a row has no entry.
template <std::size_t D>
std::vector<double> diagonal_values(const HostCsr<double>& a, const std::array<int, D>& offsets) {
  std::vector<double> out(D * a.rows, std::nan(""));
  for (std::size_t r = 0; r < a.rows; ++r)
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      const int off = a.col_idx[std::size_t(k)] - int(r);
      const auto d = std::size_t(std::find(offsets.begin(), offsets.end(), off) - offsets.begin());
      if (d == D) throw std::invalid_argument("diagonal_values: an entry off the diagonals");
      out[d * a.rows + r] = a.values[std::size_t(k)];
    }
  return out;
}

// A random program over 4 vectors, 3 scalars and A: 1-3 setup steps, 2-9 loop steps, run for
// `iterations` (1-3) iterations; `products` levels of products (2: nested).
inline std::unique_ptr<RandomProgram> random_program(std::uint64_t seed, int& iterations, int products = 1) {
  auto rp = std::make_unique<RandomProgram>();
  for (int i = 0; i < 4; ++i) {
    rp->vector_targets.push_back(rp->program.vector("v" + std::to_string(i)).node());
    rp->vectors.emplace_back(rp->vector_targets.back());
  }
  for (int i = 0; i < 3; ++i) {
    rp->scalar_targets.push_back(rp->program.scalar("s" + std::to_string(i)).node());
    rp->scalars.emplace_back(rp->scalar_targets.back());
  }
  rp->matrix = std::make_unique<Expression>(rp->program.matrix("A"));
  Generator gen(*rp, seed, products);
  const int setup_steps = 1 + gen.pick(3), loop_steps = 2 + gen.pick(8);
  iterations = 1 + gen.pick(3);
  for (int i = 0; i < setup_steps; ++i) rp->program.setup(gen.step());
  for (int i = 0; i < loop_steps; ++i) rp->program.step(gen.step());
  return rp;
}

// Emulated program `seed` (1 .. kEmulatedRandomPrograms).
inline std::unique_ptr<RandomProgram> emulated_random_program(int seed, int& iterations) {
  return seed > 20 ? random_program(std::uint64_t(seed - 20), iterations, 2)
                   : random_program(std::uint64_t(seed), iterations);
}

// The library's methods, in the order of the emulated kernels' tables: the five, then CG,
// BiCGStab and one-barrier BiCGStab with Jacobi preconditioning.
inline std::vector<Program> emulated_methods() {
  const auto f64 = ValueType::f64;
  const auto jacobi = Preconditioner::jacobi;
  return {cg_program(),
          bicgstab_program(),
          pipelined_cg_program(),
          pipelined_bicgstab_program(),
          one_barrier_bicgstab_program(),
          cg_program(f64, jacobi),
          bicgstab_program(f64, jacobi),
          one_barrier_bicgstab_program(f64, jacobi)};
}

// `a` with its diagonal varying from row to row (4 to 6 on Poisson): Jacobi then scales the rows
// unevenly. The same pattern, so kernels by diagonals read it; not a constant stencil.
inline HostCsr<double> uneven_diagonal(HostCsr<double> a) {
  for (std::size_t r = 0; r < a.rows; ++r)
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k)
      if (std::size_t(a.col_idx[std::size_t(k)]) == r) a.values[std::size_t(k)] = 4.0 + 0.5 * double(r % 5);
  return a;
}

// Inputs of the methods (CG, BiCGStab and their pipelined forms): A, b, the stop bound
// tol^2 ||b||^2 on the squared residual norm, the iteration cap.
inline ProgramInputs method_inputs(const HostCsr<double>& a, const std::vector<double>& b, double tol,
                                   int max_iterations) {
  double bb = 0;
  for (double v : b) bb += v * v;
  ProgramInputs in;
  in.matrix = &a;
  in.vectors["b"] = b;
  in.scalars["bound"] = tol * tol * bb;
  in.max_iterations = max_iterations;
  return in;
}

// Inputs of a random program: the matrix, values in [-1, 1] for every vector and scalar.
inline ProgramInputs random_inputs(const Program& p, const HostCsr<double>& a, int iterations,
                                   std::mt19937_64& rng) {
  ProgramInputs in;
  in.matrix = &a;
  in.max_iterations = iterations;
  std::uniform_real_distribution<double> u(-1, 1);
  for (const auto& sym : p.symbols()) {
    if (sym.kind == NodeKind::vector) {
      std::vector<double> v(a.rows);
      for (auto& e : v) e = u(rng);
      in.vectors[sym.name] = v;
    } else if (sym.kind == NodeKind::device_scalar) {
      in.scalars[sym.name] = u(rng);
    }
  }
  return in;
}

}  // namespace molaccel::linalg::testing

// Random programs of statements (fixed seeds) for the program tests.
#pragma once

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"

namespace molaccel::linalg::testing {

// Random programs whose generated kernels test_program_emulated.cpp runs on the CPU.
inline constexpr int kEmulatedRandomPrograms = 20;

struct RandomProgram {
  Program program{"random"};
  std::vector<Expression> vectors, scalars;
  std::vector<NodePtr> vector_targets, scalar_targets;  // leaves (Assignable made when used)
  std::unique_ptr<Expression> matrix;
};

class Generator {
 public:
  const ElementwiseModifier damp{"damp", "X / (1 + X * X)"};

  Generator(RandomProgram& rp, std::uint64_t seed) : rp_(rp), rng_(seed) {}

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

  Expression vector_expression(int depth, bool products) {
    if (depth == 0 || pick(4) == 0) return rp_.vectors[std::size_t(pick(int(rp_.vectors.size())))];
    switch (pick(products ? 8 : 7)) {
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
        return prod(*rp_.matrix, vector_expression(depth - 1, false));
    }
  }

  // tanh keeps every value in [-1, 1] whatever the program does.
  Statement statement(int target_kind, int target) {
    if (target_kind == 0) {
      const Assignable t(rp_.vector_targets[std::size_t(target)]);
      return pick(3) == 0 ? (t += 0.25 * tanh(vector_expression(3, true)))
                          : (t = tanh(vector_expression(3, true)));
    }
    const Assignable t(rp_.scalar_targets[std::size_t(target)]);
    switch (pick(3)) {
      case 0: {  // a cosine in [-1, 1]
        auto e = vector_expression(2, true), f = vector_expression(2, true);
        return t = safe_div(inner_prod(e, f), norm_2(e) * norm_2(f) + 1.0) + 0.5 * scalar_expression(1) -
                   0.5 * scalar_expression(1);
      }
      case 1:
        return t = tanh(inner_prod(vector_expression(2, true), vector_expression(2, true)) * 0.01);
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

// A random program over 4 vectors, 3 scalars and A: 1-3 setup steps, 2-9 loop steps, run for
// `iterations` (1-3) iterations.
inline std::unique_ptr<RandomProgram> random_program(std::uint64_t seed, int& iterations) {
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
  Generator gen(*rp, seed);
  const int setup_steps = 1 + gen.pick(3), loop_steps = 2 + gen.pick(8);
  iterations = 1 + gen.pick(3);
  for (int i = 0; i < setup_steps; ++i) rp->program.setup(gen.step());
  for (int i = 0; i < loop_steps; ++i) rp->program.step(gen.step());
  return rp;
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

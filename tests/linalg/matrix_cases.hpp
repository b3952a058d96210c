// Element-wise statements with dense matrices as targets (`A = alpha * B + C`, `A += B`,
// functions, element_prod/div, modifiers, two simultaneous matrix targets), checked on any
// placement against the plain reference on random data, odd shapes and padded rows (columns not
// a multiple of 32: the padding must stay zero). Shared by the CPU and GPU tests and the NVRTC
// compile test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg::testing {

MOLACCEL_EW_MODIFIER(MatSquash, "1/(1+X*X)");

// Operands: 0 = A (target), 1 = B, 2 = C, 3 = alpha (host), 4 = beta (device scalar).
template <class T>
struct MatrixCase {
  std::string name;
  std::vector<Statement> statements;
  bool second_target = false;  // B is written too
};

template <class T>
std::vector<MatrixCase<T>> matrix_cases() {
  SymbolicMatrix<T, 0> A;
  SymbolicMatrix<T, 1> B;
  SymbolicMatrix<T, 2> C;
  CpuSymbolicScalar<T, 3> alpha;
  GpuSymbolicScalar<T, 4> beta;
  return {
      {"axpy", {A = alpha * B + C + 0.0 * beta}},
      {"add_assign", {A += B + 0.0 * alpha + 0.0 * beta + 0.0 * C}},
      {"sub_assign_prod", {A -= element_prod(B, C) + 0.0 * (alpha + beta)}},
      {"functions", {A = exp(B) - sqrt(abs(C)) + tanh(alpha * B) + 0.0 * beta}},
      {"element_prod", {A = element_prod(B, C) * beta + 0.0 * alpha}},
      {"element_div", {A = element_div(B, C + 3.0) - max(B, C) + 0.0 * (alpha + beta)}},
      {"modifier", {A = MatSquash(B) * alpha + C * beta}},
      {"fill", {A = alpha + beta + 0.0 * (B + C)}},
      {"simultaneous", {A = A + B + 0.0 * (alpha + beta + C), B = A - B}, true},
  };
}

// |got - want| <= tol * (1 + |want|): fp64 1e-12 (a few roundings of values of order 1-10);
// fp32 2e-6 (a few ulps of exp/tanh/sqrt and of the sums).
template <class T>
void check_matrix_case(const MatrixCase<T>& tc, std::size_t rows, std::size_t cols, const Placement& where,
                       std::uint64_t seed) {
  SCOPED_TRACE(tc.name + " " + std::to_string(rows) + "x" + std::to_string(cols) + " on " + where.describe());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::vector<T>> host(3, std::vector<T>(rows * cols));
  for (auto& m : host)
    for (auto& v : m) v = T(u(rng));
  const T alpha_value = T(0.75), beta_value = T(-1.25);
  std::vector<Matrix<T>> mats;
  for (int i = 0; i < 3; ++i) {
    mats.emplace_back(where, rows, cols);
    mats.back().copy_from_host(host[i]);
  }
  Scalar<T> beta(where, beta_value);
  CustomOperation op(tc.statements);
  op(mats[0], mats[1], mats[2], alpha_value, beta);

  std::vector<ReferenceOperand> ref(5);
  for (int i = 0; i < 3; ++i) {
    ref[i].values.assign(host[i].begin(), host[i].end());
    ref[i].rows = rows;
    ref[i].cols = cols;
  }
  ref[3].values = {double(alpha_value)};
  ref[4].values = {double(beta_value)};
  reference_execute(tc.statements, ref);

  const double tol = std::is_same_v<T, double> ? 1e-12 : 2e-6;
  for (int i = 0; i < (tc.second_target ? 2 : 1); ++i) {
    const auto got = mats[i].to_host();
    for (std::size_t e = 0; e < rows * cols; ++e)
      ASSERT_LE(std::abs(double(got[e]) - ref[i].values[e]), tol * (1 + std::abs(ref[i].values[e])))
          << "matrix " << i << " element (" << e / cols << ", " << e % cols << ")";
    // The padding of each row stays zero.
    const std::size_t ld = mats[i].leading_dimension();
    std::vector<T> raw(rows * ld);
    mats[i].raw().download(raw.data(), raw.size());
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = cols; c < ld; ++c) ASSERT_EQ(raw[r * ld + c], T(0)) << "padding of row " << r;
  }
}

template <class T>
void check_all_matrix_cases(const Placement& where) {
  std::uint64_t seed = 500;
  const std::vector<std::pair<std::size_t, std::size_t>> shapes = {{1, 1},   {3, 5},     {7, 33},
                                                                   {64, 32}, {100, 100}, {257, 31}};
  for (const auto& tc : matrix_cases<T>())
    for (auto [rows, cols] : shapes) check_matrix_case<T>(tc, rows, cols, where, seed++);
}

// Shapes must match; a matrix target takes no vectors; matrices mix with vectors nowhere.
template <class T>
void check_matrix_errors(const Placement& where) {
  SymbolicMatrix<T, 0> A;
  SymbolicMatrix<T, 1> B;
  SymbolicVector<T, 1> v;
  SymbolicVector<T, 0> x;
  Matrix<T> a(where, 4, 5), b(where, 4, 6), c(where, 5, 5);
  CustomOperation copy(A = B + 1.0);
  EXPECT_THROW(copy(a, b), Error);
  EXPECT_THROW(copy(a, c), Error);
  EXPECT_THROW((void)(A + v), Error);                              // matrix + vector
  EXPECT_THROW((void)(A * B), Error);                              // ambiguous: element_prod()
  EXPECT_THROW((void)(x = B + 1.0), Error);                        // a matrix assigned to a vector
  EXPECT_THROW((void)(A = v + 1.0), Error);                        // a vector assigned to a matrix
  EXPECT_THROW(CustomOperation(A = B + inner_prod(v, v)), Error);  // reads a vector
}

}  // namespace molaccel::linalg::testing

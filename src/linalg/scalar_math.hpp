// Scalar arithmetic on the host: the element functions by name, in T (the CPU executor's scalar
// sub-expressions, cpu/executor.cpp, in the operation's type; the programs' host-side executors,
// program/program_host.cpp and program/program_run.cpp, in double), and what those two program
// executors share besides: scalar expressions and the loop of iterations with its monitors and
// stop tests.
#pragma once

#include <cmath>
#include <span>
#include <string>

#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"

namespace molaccel::linalg {

template <class T>
T apply_unary(const std::string& f, T x) {
  if (f == "exp") return std::exp(x);
  if (f == "log") return std::log(x);
  if (f == "sqrt") return std::sqrt(x);
  if (f == "abs") return std::fabs(x);
  if (f == "sin") return std::sin(x);
  if (f == "cos") return std::cos(x);
  if (f == "tanh") return std::tanh(x);
  if (f == "nonzero") return x != T(0) ? T(1) : T(0);
  throw Error("linalg program: unknown function " + f, __FILE__, __LINE__);
}

// A binary node (arithmetic or binary_function) applied to its two operands' values.
template <class T>
T apply_binary(const ExpressionNode& n, T a, T b) {
  switch (n.kind) {
    case NodeKind::add:
      return a + b;
    case NodeKind::subtract:
      return a - b;
    case NodeKind::multiply:
    case NodeKind::element_product:
      return a * b;
    case NodeKind::divide:
    case NodeKind::element_division:
      return a / b;
    default:
      break;
  }
  if (n.name == "max") return std::max(a, b);
  if (n.name == "min") return std::min(a, b);
  if (n.name == "pow") return std::pow(a, b);
  if (n.name == "safe_div") return b == T(0) ? T(0) : a / b;
  if (n.name == "greater") return a > b ? T(1) : T(0);
  throw Error("linalg program: unknown function " + n.name, __FILE__, __LINE__);
}

namespace program {

inline double apply_assign(AssignOp op, double old_value, double value) {
  return op == AssignOp::assign ? value : op == AssignOp::add_assign ? old_value + value : old_value - value;
}

// The value of an expression of scalars (constants, the program's scalars by symbol index,
// arithmetic, functions and modifiers); `x` is the modifier's placeholder.
inline double evaluate_scalar(const NodePtr& n, std::span<const double> scalars, double x = 0) {
  switch (n->kind) {
    case NodeKind::constant:
      return n->constant;
    case NodeKind::device_scalar:
      return scalars[std::size_t(n->index)];
    case NodeKind::placeholder:
      return x;
    case NodeKind::negate:
      return -evaluate_scalar(n->children[0], scalars, x);
    case NodeKind::function:
      return apply_unary(n->name, evaluate_scalar(n->children[0], scalars, x));
    case NodeKind::modifier:
      return evaluate_scalar(n->children[1], scalars, evaluate_scalar(n->children[0], scalars, x));
    default:
      break;
  }
  if (n->children.size() != 2)
    throw Error("linalg program: not an expression of scalars", __FILE__, __LINE__);
  return apply_binary(*n, evaluate_scalar(n->children[0], scalars, x),
                      evaluate_scalar(n->children[1], scalars, x));
}

// The iterations after the setup: the monitors recorded and the stop tests tried (in order of
// declaration) before every iteration, then `iterate()`, until a test fires or the cap.
// `value(node)` evaluates a scalar expression on the current scalars.
template <class Value, class Iterate>
void run_iterations(const Program& program, int max_iterations, ProgramResult& result, Value value,
                    Iterate iterate) {
  result.monitor_history.resize(program.monitors().size());
  for (;;) {
    for (std::size_t m = 0; m < program.monitors().size(); ++m)
      result.monitor_history[m].push_back(value(program.monitors()[m].node()));
    for (const auto& test : program.stop_tests())
      if (value(test.condition.node()) != 0) {
        result.status = test.status;
        return;
      }
    if (result.iterations >= max_iterations) {
      result.status = "iteration limit";
      return;
    }
    iterate();
    ++result.iterations;
  }
}

}  // namespace program
}  // namespace molaccel::linalg

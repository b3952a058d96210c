// The planner: turns the statements of a CustomOperation into stages (kernels) with the
// paper's rules, independent of the backend that runs them.
//   1. `x += e` becomes `x = x + e`; scalar multiplications are expanded over sums (alpha*(x+y)
//      -> alpha*x + alpha*y) so that a vector right-hand side is a signed list of tokens.
//   2. Inner products and norms are computed in reduction stages before anything is written
//      (level k needs the values of levels < k); their final summation is fused into the
//      consumer stage, which adds up the per-block partial sums in its prologue.
//   3. A matrix-vector product whose vector operand reads a vector that the operation writes
//      is materialised into a temporary first; every other product is evaluated inline, row by
//      row, so `x = y - alpha*(prod(A, y) - z)` writes x directly.
//   4. The final stage computes every right-hand side of an element before storing any of them
//      (simultaneous assignment: the plane rotation sees the old x).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

struct Assignment {
  NodePtr target;  // vector or device_scalar leaf
  NodePtr value;   // expanded right-hand side
};

struct PlanStage {
  enum class Kind { reduction, temporaries, final } what = Kind::final;
  int level = 0;  // reduction level (1-based) for reduction stages
  std::string kernel_name;
  std::vector<int> reductions;                                     // slots computed here
  std::vector<int> temporaries;                                    // temporaries written here
  std::vector<Assignment> vector_assignments, scalar_assignments;  // final stage only
  std::vector<int> consumed;                                // reduction slots whose value this stage reads
  bool has_dense_product = false, has_csr_product = false;  // evaluated here (not via partials)
};

struct PlanOperand {
  NodeKind kind = NodeKind::vector;
  ValueType type = ValueType::f64;
  bool written = false;
  bool used = false;
};

struct PlanReduction {
  NodePtr node;  // inner_product or norm_2
  std::string key;
  int level = 1;
};

struct PlanTemporary {
  NodePtr operand;  // vector expression, written by the temporaries stage
};

struct OperationPlan {
  std::vector<Statement> statements;
  std::string name;  // e.g. vec0_eq_vec1_plus_vec2
  ValueType type = ValueType::f64;
  std::vector<PlanOperand> operands;
  std::vector<PlanReduction> reductions;  // index = slot
  std::vector<PlanTemporary> temporaries;
  std::vector<PlanStage> stages;
  std::map<std::string, int> slot_by_key;
  std::map<const ExpressionNode*, int> slot_by_node;  // fast path of slot_of (no key strings)

  int slot_of(const NodePtr& reduction) const;
};

OperationPlan make_plan(std::vector<Statement> statements);

// Tokens of an expanded vector expression: sign and term (for readable generated code).
struct Token {
  bool negative = false;
  NodePtr term;
};
std::vector<Token> tokens_of(const NodePtr& expanded);

// Run-time shapes: checks the arguments against the plan (count, kinds, types, one device,
// consistent lengths) and returns the lengths the stages need.
struct BoundShapes {
  std::vector<std::size_t> reduction_length;  // per slot
  std::vector<std::size_t> temporary_length;
  std::vector<std::size_t> stage_rows;  // rows each stage iterates over
  double csr_average_row_nnz = 0;       // of the CSR operands (for the GPU group size)
  Placement where;
};
BoundShapes bind_arguments(const OperationPlan& plan, const std::vector<Argument>& args);
// Length of a vector expression under `args` (throws on inconsistent lengths).
std::size_t vector_length(const OperationPlan& plan, const NodePtr& n, const std::vector<Argument>& args);

// Whether `n` (outside reductions it does not compute) evaluates a matrix product.
void collect_products(const NodePtr& n, bool& dense, bool& csr);

}  // namespace molaccel::linalg

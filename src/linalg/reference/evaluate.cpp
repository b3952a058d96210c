// The oracle: evaluates statements with one plain loop per tree node, in double precision, on
// host copies. Deliberately naive and independent of the planner and of the fast paths.
#include <cmath>
#include <optional>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

namespace {

struct Value {
  bool is_vector = false;
  double s = 0;
  std::vector<double> v;
};

double apply_unary(const std::string& f, double x) {
  if (f == "exp") return std::exp(x);
  if (f == "log") return std::log(x);
  if (f == "sqrt") return std::sqrt(x);
  if (f == "abs") return std::fabs(x);
  if (f == "sin") return std::sin(x);
  if (f == "cos") return std::cos(x);
  if (f == "tanh") return std::tanh(x);
  if (f == "nonzero") return x != 0 ? 1.0 : 0.0;
  throw Error("reference: unknown function " + f, __FILE__, __LINE__);
}

double apply_binary(NodeKind k, const std::string& f, double a, double b) {
  switch (k) {
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
  if (f == "max") return std::max(a, b);
  if (f == "min") return std::min(a, b);
  if (f == "pow") return std::pow(a, b);
  if (f == "safe_div") return b == 0 ? 0.0 : a / b;
  if (f == "greater") return a > b ? 1.0 : 0.0;
  throw Error("reference: unknown function " + f, __FILE__, __LINE__);
}

class Evaluator {
 public:
  explicit Evaluator(const std::vector<ReferenceOperand>& ops) : ops_(ops) {}

  Value eval(const NodePtr& n, const Value* x = nullptr) {
    Value out;
    switch (n->kind) {
      case NodeKind::vector:
      case NodeKind::dense_matrix:  // element-wise over a matrix: its rows x cols values, flat
        out.is_vector = true;
        out.v = ops_.at(n->index).values;
        return out;
      case NodeKind::host_scalar:
      case NodeKind::device_scalar:
        out.s = ops_.at(n->index).values.at(0);
        return out;
      case NodeKind::constant:
        out.s = n->constant;
        return out;
      case NodeKind::placeholder:
        return *x;
      case NodeKind::negate: {
        Value a = eval(n->children[0], x);
        if (a.is_vector)
          for (auto& e : a.v) e = -e;
        else
          a.s = -a.s;
        return a;
      }
      case NodeKind::function: {
        Value a = eval(n->children[0], x);
        if (a.is_vector)
          for (auto& e : a.v) e = apply_unary(n->name, e);
        else
          a.s = apply_unary(n->name, a.s);
        return a;
      }
      case NodeKind::modifier: {
        Value a = eval(n->children[0], x);
        return eval(n->children[1], &a);
      }
      case NodeKind::inner_product: {
        Value a = eval(n->children[0], x), b = eval(n->children[1], x);
        for (std::size_t i = 0; i < a.v.size(); ++i) out.s += a.v[i] * b.v[i];
        return out;
      }
      case NodeKind::norm_2: {
        Value a = eval(n->children[0], x);
        for (double e : a.v) out.s += e * e;
        out.s = std::sqrt(out.s);
        return out;
      }
      case NodeKind::matrix_product: {
        const auto& m = ops_.at(n->children[0]->index);
        Value v = eval(n->children[1], x);
        out.is_vector = true;
        if (m.csr) {
          out.v.assign(m.csr->rows, 0.0);
          for (std::size_t r = 0; r < m.csr->rows; ++r)
            for (auto k = m.csr->row_ptr[r]; k < m.csr->row_ptr[r + 1]; ++k)
              out.v[r] += m.csr->values[k] * v.v[m.csr->col_idx[k]];
        } else {
          out.v.assign(m.rows, 0.0);
          for (std::size_t r = 0; r < m.rows; ++r)
            for (std::size_t c = 0; c < m.cols; ++c) out.v[r] += m.values[r * m.cols + c] * v.v[c];
        }
        return out;
      }
      default:
        break;
    }
    // Binary element-wise node, with scalar broadcasting.
    Value a = eval(n->children[0], x), b = eval(n->children[1], x);
    if (!a.is_vector && !b.is_vector) {
      out.s = apply_binary(n->kind, n->name, a.s, b.s);
      return out;
    }
    const std::size_t len = a.is_vector ? a.v.size() : b.v.size();
    out.is_vector = true;
    out.v.resize(len);
    for (std::size_t i = 0; i < len; ++i)
      out.v[i] = apply_binary(n->kind, n->name, a.is_vector ? a.v[i] : a.s, b.is_vector ? b.v[i] : b.s);
    return out;
  }

 private:
  const std::vector<ReferenceOperand>& ops_;
};

}  // namespace

void reference_execute(const std::vector<Statement>& statements, std::vector<ReferenceOperand>& operands) {
  // Every right-hand side first (old values), then every assignment.
  std::vector<Value> results;
  Evaluator ev(operands);
  for (const auto& s : statements) results.push_back(ev.eval(s.value()));
  for (std::size_t k = 0; k < statements.size(); ++k) {
    auto& target = operands.at(statements[k].target()->index).values;
    const Value& r = results[k];
    for (std::size_t i = 0; i < target.size(); ++i) {
      const double rhs = r.is_vector ? r.v.at(i) : r.s;
      switch (statements[k].op()) {
        case AssignOp::assign:
          target[i] = rhs;
          break;
        case AssignOp::add_assign:
          target[i] += rhs;
          break;
        case AssignOp::subtract_assign:
          target[i] -= rhs;
          break;
      }
    }
  }
}

}  // namespace molaccel::linalg

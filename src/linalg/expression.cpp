// Expression trees: construction with shape and type checking, printing, kernel names and the
// parser of element-wise modifiers ("1/(1+X)").
#include <cctype>
#include <cmath>
#include <string>

#include "linalg/expression_util.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

std::string_view to_string(ValueType type) {
  switch (type) {
    case ValueType::f32:
      return "float";
    case ValueType::f64:
      return "double";
    case ValueType::i32:
      return "int";
  }
  return "?";
}

std::size_t size_of(ValueType type) {
  return type == ValueType::f64 ? 8 : 4;
}

namespace detail {

NodePtr leaf(NodeKind kind, ValueType type, int index) {
  auto n = std::make_shared<ExpressionNode>();
  n->kind = kind;
  n->type = type;
  n->index = index;
  n->shape = (kind == NodeKind::vector || kind == NodeKind::temporary)          ? Shape::vector
             : (kind == NodeKind::dense_matrix || kind == NodeKind::csr_matrix) ? Shape::matrix
                                                                                : Shape::scalar;
  MOLACCEL_EXPECTS(index >= 0, "symbolic operand index must be >= 0");
  return n;
}

}  // namespace detail

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw Error("linalg expression: " + message, __FILE__, __LINE__);
}

bool is_untyped_constant(const NodePtr& n) {
  return n->kind == NodeKind::constant && n->index == -2;
}

NodePtr constant_node(double value, ValueType type, bool untyped) {
  auto n = std::make_shared<ExpressionNode>();
  n->kind = NodeKind::constant;
  n->constant = value;
  n->type = type;
  n->index = untyped ? -2 : -1;  // -2: type taken from the other operand when combined
  return n;
}

NodePtr retype(const NodePtr& n, ValueType type) {
  if (!is_untyped_constant(n)) return n;
  return constant_node(n->constant, type, false);
}

NodePtr make(NodeKind kind, std::vector<NodePtr> children, std::string name = {}) {
  // Constants written as C++ literals adopt the element type of their typed sibling.
  ValueType type = ValueType::f64;
  bool typed = false;
  for (auto& c : children)
    if (!is_untyped_constant(c)) {
      if (typed && c->type != type)
        fail(fmt::format("mixing {} and {} operands", to_string(type), to_string(c->type)));
      type = c->type;
      typed = true;
    }
  for (auto& c : children) c = retype(c, type);
  auto n = std::make_shared<ExpressionNode>();
  n->kind = kind;
  n->type = type;
  n->name = std::move(name);
  n->children = std::move(children);
  if (!typed) n->index = -2;  // still untyped (constant folding of literals only)
  return n;
}

// Dense matrices take part in element-wise expressions (with other dense matrices and scalars);
// a sparse matrix only as the first argument of prod().
void require_elementwise_operand(const NodePtr& n, std::string_view what) {
  if (n->kind == NodeKind::csr_matrix)
    fail(fmt::format("{}: a sparse matrix can only appear as the first argument of prod()", what));
}

NodePtr elementwise(NodeKind kind, const NodePtr& a, const NodePtr& b, std::string name = {}) {
  const std::string what = name.empty() ? "arithmetic" : name;
  require_elementwise_operand(a, what);
  require_elementwise_operand(b, what);
  if ((a->shape == Shape::matrix && b->shape == Shape::vector) ||
      (a->shape == Shape::vector && b->shape == Shape::matrix))
    fail(fmt::format("{}: a matrix and a vector combined element-wise (use prod() for products)", what));
  auto n = make(kind, {a, b}, std::move(name));
  const_cast<ExpressionNode&>(*n).shape =
      (a->shape == Shape::matrix || b->shape == Shape::matrix)   ? Shape::matrix
      : (a->shape == Shape::vector || b->shape == Shape::vector) ? Shape::vector
                                                                 : Shape::scalar;
  return n;
}

NodePtr unary(NodeKind kind, const NodePtr& a, std::string name = {}) {
  require_elementwise_operand(a, name.empty() ? "negation" : name);
  auto n = make(kind, {a}, std::move(name));
  const_cast<ExpressionNode&>(*n).shape = a->shape;
  return n;
}

}  // namespace

Expression operator+(const Expression& a, const Expression& b) {
  return Expression(elementwise(NodeKind::add, a.node(), b.node()));
}
Expression operator-(const Expression& a, const Expression& b) {
  return Expression(elementwise(NodeKind::subtract, a.node(), b.node()));
}
Expression operator*(const Expression& a, const Expression& b) {
  if (a.node()->shape == Shape::vector && b.node()->shape == Shape::vector)
    fail("vector * vector is ambiguous: use element_prod() or inner_prod()");
  if (a.node()->shape == Shape::matrix && b.node()->shape == Shape::matrix)
    fail("matrix * matrix is ambiguous: use element_prod() (matrix products are not supported)");
  return Expression(elementwise(NodeKind::multiply, a.node(), b.node()));
}
Expression operator/(const Expression& a, const Expression& b) {
  if (b.node()->shape == Shape::vector) fail("division by a vector: use element_div()");
  if (b.node()->shape == Shape::matrix) fail("division by a matrix: use element_div()");
  return Expression(elementwise(NodeKind::divide, a.node(), b.node()));
}
Expression operator-(const Expression& a) {
  return Expression(unary(NodeKind::negate, a.node()));
}

static Expression literal(double v) {
  return Expression(constant_node(v, ValueType::f64, true));
}
Expression operator+(const Expression& a, double b) {
  return a + literal(b);
}
Expression operator+(double a, const Expression& b) {
  return literal(a) + b;
}
Expression operator-(const Expression& a, double b) {
  return a - literal(b);
}
Expression operator-(double a, const Expression& b) {
  return literal(a) - b;
}
Expression operator*(const Expression& a, double b) {
  return a * literal(b);
}
Expression operator*(double a, const Expression& b) {
  return literal(a) * b;
}
Expression operator/(const Expression& a, double b) {
  return a / literal(b);
}
Expression operator/(double a, const Expression& b) {
  return literal(a) / b;
}

Expression element_prod(const Expression& a, const Expression& b) {
  return Expression(elementwise(NodeKind::element_product, a.node(), b.node(), ""));
}
Expression element_div(const Expression& a, const Expression& b) {
  return Expression(elementwise(NodeKind::element_division, a.node(), b.node(), ""));
}

bool is_unary_function(std::string_view name) {
  for (auto f : {"exp", "log", "sqrt", "abs", "sin", "cos", "tanh", "nonzero"})
    if (name == f) return true;
  return false;
}
bool is_binary_function(std::string_view name) {
  for (auto f : {"max", "min", "pow", "safe_div", "greater"})
    if (name == f) return true;
  return false;
}

static Expression function(std::string name, const Expression& a) {
  return Expression(unary(NodeKind::function, a.node(), std::move(name)));
}
static Expression binary_function(std::string name, const Expression& a, const Expression& b) {
  return Expression(elementwise(NodeKind::binary_function, a.node(), b.node(), std::move(name)));
}
Expression exp(const Expression& a) {
  return function("exp", a);
}
Expression log(const Expression& a) {
  return function("log", a);
}
Expression sqrt(const Expression& a) {
  return function("sqrt", a);
}
Expression abs(const Expression& a) {
  return function("abs", a);
}
Expression sin(const Expression& a) {
  return function("sin", a);
}
Expression cos(const Expression& a) {
  return function("cos", a);
}
Expression tanh(const Expression& a) {
  return function("tanh", a);
}
Expression nonzero(const Expression& a) {
  return function("nonzero", a);
}
Expression max(const Expression& a, const Expression& b) {
  return binary_function("max", a, b);
}
Expression min(const Expression& a, const Expression& b) {
  return binary_function("min", a, b);
}
Expression pow(const Expression& a, const Expression& b) {
  return binary_function("pow", a, b);
}
Expression safe_div(const Expression& a, const Expression& b) {
  return binary_function("safe_div", a, b);
}
Expression greater(const Expression& a, const Expression& b) {
  return binary_function("greater", a, b);
}

Expression inner_prod(const Expression& a, const Expression& b) {
  if (a.node()->shape != Shape::vector || b.node()->shape != Shape::vector)
    fail("inner_prod() takes two vector expressions");
  auto n = make(NodeKind::inner_product, {a.node(), b.node()});
  const_cast<ExpressionNode&>(*n).shape = Shape::scalar;
  return Expression(n);
}
Expression norm_2(const Expression& a) {
  if (a.node()->shape != Shape::vector) fail("norm_2() takes a vector expression");
  auto n = make(NodeKind::norm_2, {a.node()});
  const_cast<ExpressionNode&>(*n).shape = Shape::scalar;
  return Expression(n);
}
Expression prod(const Expression& m, const Expression& v) {
  const auto k = m.node()->kind;
  if (k != NodeKind::dense_matrix && k != NodeKind::csr_matrix)
    fail("prod(): the first argument must be a symbolic matrix");
  if (v.node()->shape != Shape::vector) fail("prod(): the second argument must be a vector expression");
  auto n = make(NodeKind::matrix_product, {m.node(), v.node()});
  const_cast<ExpressionNode&>(*n).shape = Shape::vector;
  return Expression(n);
}

Statement::Statement(NodePtr target, AssignOp op, NodePtr value)
    : target_(std::move(target)), op_(op), value_(std::move(value)) {
  if (target_->kind != NodeKind::vector && target_->kind != NodeKind::device_scalar &&
      target_->kind != NodeKind::dense_matrix)
    fail("only vectors, dense matrices and device scalars can be assigned to");
  if (target_->kind == NodeKind::dense_matrix && value_->shape == Shape::vector)
    fail("a vector expression cannot be assigned to a matrix");
  if (target_->kind != NodeKind::dense_matrix && value_->shape == Shape::matrix)
    fail("a matrix expression can only be assigned to a matrix (use prod() for products)");
  if (target_->kind == NodeKind::device_scalar && value_->shape != Shape::scalar)
    fail("a vector expression cannot be assigned to a scalar");
  value_ = retype(value_, target_->type);
  if (value_->type != target_->type)
    fail(fmt::format("assigning a {} expression to a {} operand", to_string(value_->type),
                     to_string(target_->type)));
}

// ---------------------------------------------------------------------------------------------
// Printing and names.
// ---------------------------------------------------------------------------------------------
std::string format_constant(double v) {
  std::string s = fmt::format("{}", v);
  return s;
}

std::string leaf_name(const ExpressionNode& n) {
  switch (n.kind) {
    case NodeKind::vector:
      return fmt::format("vec{}", n.index);
    case NodeKind::dense_matrix:
      return fmt::format("mat{}", n.index);
    case NodeKind::csr_matrix:
      return fmt::format("csr{}", n.index);
    case NodeKind::host_scalar:
      return fmt::format("scal{}", n.index);
    case NodeKind::device_scalar:
      return fmt::format("gscal{}", n.index);
    case NodeKind::temporary:
      return fmt::format("tmp{}", n.index);
    case NodeKind::placeholder:
      return "X";
    default:
      return {};
  }
}

static int precedence(NodeKind k) {
  switch (k) {
    case NodeKind::add:
    case NodeKind::subtract:
      return 1;
    case NodeKind::multiply:
    case NodeKind::divide:
      return 2;
    case NodeKind::negate:
      return 3;
    default:
      return 4;
  }
}

std::string infix(const NodePtr& n) {
  auto wrap = [&](const NodePtr& c, int min_prec) {
    std::string s = infix(c);
    return precedence(c->kind) < min_prec ? "(" + s + ")" : s;
  };
  switch (n->kind) {
    case NodeKind::constant:
      return format_constant(n->constant);
    case NodeKind::negate:
      return "-" + wrap(n->children[0], 3);
    case NodeKind::add:
      return wrap(n->children[0], 1) + " + " + wrap(n->children[1], 2);
    case NodeKind::subtract:
      return wrap(n->children[0], 1) + " - " + wrap(n->children[1], 2);
    case NodeKind::multiply:
      return wrap(n->children[0], 2) + " * " + wrap(n->children[1], 3);
    case NodeKind::divide:
      return wrap(n->children[0], 2) + " / " + wrap(n->children[1], 3);
    case NodeKind::element_product:
      return "element_prod(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case NodeKind::element_division:
      return "element_div(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case NodeKind::function:
    case NodeKind::modifier:
      return n->name + "(" + infix(n->children[0]) + ")";
    case NodeKind::binary_function:
      return n->name + "(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case NodeKind::inner_product:
      return "inner_prod(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case NodeKind::norm_2:
      return "norm_2(" + infix(n->children[0]) + ")";
    case NodeKind::matrix_product:
      return "prod(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    default:
      return leaf_name(*n);
  }
}

std::string Expression::to_string() const {
  return infix(node_);
}

std::string statement_to_string(const Statement& s) {
  const char* op = s.op() == AssignOp::assign ? " = " : s.op() == AssignOp::add_assign ? " += " : " -= ";
  return infix(s.target()) + op + infix(s.value());
}

// The paper's kernel names: `vec0 = vec1 + vec2` -> vec0_eq_vec1_plus_vec2.
std::string name_of(const NodePtr& n) {
  auto bin = [&](const char* op) {
    return name_of(n->children[0]) + "_" + op + "_" + name_of(n->children[1]);
  };
  switch (n->kind) {
    case NodeKind::constant: {
      std::string s = format_constant(n->constant);
      for (auto& ch : s) {
        if (ch == '.')
          ch = 'p';
        else if (ch == '-')
          ch = 'm';
        else if (ch == '+')
          ch = 'P';
      }
      return "c" + s;
    }
    case NodeKind::negate:
      return "neg_" + name_of(n->children[0]);
    case NodeKind::add:
      return bin("plus");
    case NodeKind::subtract:
      return bin("minus");
    case NodeKind::multiply:
      return bin("times");
    case NodeKind::divide:
      return bin("div");
    case NodeKind::element_product:
      return bin("eprod");
    case NodeKind::element_division:
      return bin("ediv");
    case NodeKind::function:
    case NodeKind::modifier:
      return n->name + "_" + name_of(n->children[0]);
    case NodeKind::binary_function:
      return n->name + "_" + name_of(n->children[0]) + "_" + name_of(n->children[1]);
    case NodeKind::inner_product:
      return "ip_" + name_of(n->children[0]) + "_with_" + name_of(n->children[1]);
    case NodeKind::norm_2:
      return "norm2_" + name_of(n->children[0]);
    case NodeKind::matrix_product:
      return "prod_" + name_of(n->children[0]) + "_" + name_of(n->children[1]);
    default:
      return leaf_name(*n);
  }
}

std::string kernel_base_name(const std::vector<Statement>& statements) {
  std::string name;
  for (const auto& s : statements) {
    if (!name.empty()) name += "_and_";
    const char* op = s.op() == AssignOp::assign       ? "_eq_"
                     : s.op() == AssignOp::add_assign ? "_pluseq_"
                                                      : "_minuseq_";
    name += name_of(s.target()) + op + name_of(s.value());
  }
  // Identifiers stay readable; very long statements keep a prefix and a hash for uniqueness.
  if (name.size() > 96) name = name.substr(0, 80) + "_" + hash_hex(name).substr(0, 8);
  return name;
}

// Structural identity (used to share one inner product between its uses).
std::string structural_key(const NodePtr& n) {
  std::string s = fmt::format("{}:{}:{}:{}:{}[", int(n->kind), int(n->type), n->index, n->constant, n->name);
  for (auto& c : n->children) s += structural_key(c) + ",";
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
// Element-wise modifiers: a small recursive-descent parser over the text in X.
// ---------------------------------------------------------------------------------------------
namespace {

class ModifierParser {
 public:
  ModifierParser(std::string_view text, std::string_view name, const NodePtr& x)
      : text_(text), name_(name), x_(x) {}

  Expression parse() {
    Expression e = parse_sum();
    skip_space();
    if (pos_ != text_.size()) error(fmt::format("unexpected '{}'", text_[pos_]));
    return e;
  }

 private:
  [[noreturn]] void error(const std::string& message) const {
    throw InputError(fmt::format("modifier {}", name_), 1,
                     fmt::format("column {}: {} in \"{}\"", pos_ + 1, message, text_), __FILE__, __LINE__);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Expression parse_sum() {
    Expression e = parse_product();
    for (;;) {
      if (accept('+'))
        e = e + parse_product();
      else if (accept('-'))
        e = e - parse_product();
      else
        return e;
    }
  }
  Expression parse_product() {
    Expression e = parse_unary();
    for (;;) {
      if (accept('*')) {
        Expression r = parse_unary();
        // X * X is element-wise inside a modifier: both sides are the same element.
        if (e.node()->shape != Shape::scalar && r.node()->shape != Shape::scalar)
          e = element_prod(e, r);
        else
          e = e * r;
      } else if (accept('/')) {
        Expression r = parse_unary();
        if (r.node()->shape != Shape::scalar)
          e = element_div(e, r);
        else
          e = e / r;
      } else {
        return e;
      }
    }
  }
  Expression parse_unary() {
    if (++depth_ > 200) error("expression nested too deeply");
    Expression e = accept('-') ? -parse_unary() : accept('+') ? parse_unary() : parse_primary();
    --depth_;
    return e;
  }
  Expression parse_primary() {
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end of expression");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      Expression e = parse_sum();
      if (!accept(')')) error("missing ')'");
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      std::size_t end = pos_;
      while (end < text_.size() &&
             (std::isdigit(static_cast<unsigned char>(text_[end])) || text_[end] == '.'))
        ++end;
      if (end < text_.size() && (text_[end] == 'e' || text_[end] == 'E')) {
        std::size_t e = end + 1;
        if (e < text_.size() && (text_[e] == '+' || text_[e] == '-')) ++e;
        if (e < text_.size() && std::isdigit(static_cast<unsigned char>(text_[e]))) {
          end = e;
          while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
        }
      }
      std::string number(text_.substr(pos_, end - pos_));
      char* stop = nullptr;
      double v = std::strtod(number.c_str(), &stop);
      if (stop != number.c_str() + number.size() || !std::isfinite(v)) error("bad number '" + number + "'");
      pos_ = end;
      return Expression(constant_node(v, x_->type, false));
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t end = pos_;
      while (end < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
        ++end;
      std::string ident(text_.substr(pos_, end - pos_));
      pos_ = end;
      if (ident == "X" || ident == "x") return Expression(x_);
      if (!is_unary_function(ident) && !is_binary_function(ident)) error("unknown name '" + ident + "'");
      if (!accept('(')) error("expected '(' after " + ident);
      Expression a = parse_sum();
      if (is_binary_function(ident)) {
        if (!accept(',')) error(ident + " takes two arguments");
        Expression b = parse_sum();
        if (!accept(')')) error("missing ')'");
        return binary_function(ident, a, b);
      }
      if (!accept(')')) error("missing ')'");
      return function(ident, a);
    }
    error(fmt::format("unexpected '{}'", c));
  }

  std::string_view text_, name_;
  NodePtr x_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

NodePtr parse_modifier_body(std::string_view name, std::string_view body, ValueType type, Shape s) {
  auto x = std::make_shared<ExpressionNode>();
  x->kind = NodeKind::placeholder;
  x->type = type;
  x->shape = s;
  return ModifierParser(body, name, x).parse().node();
}

ElementwiseModifier::ElementwiseModifier(std::string name, std::string body)
    : name_(std::move(name)), body_(std::move(body)) {
  bool ok = !name_.empty() && (std::isalpha(static_cast<unsigned char>(name_[0])) || name_[0] == '_');
  for (char c : name_) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) throw InputError("modifier " + name_, 0, "the name must be an identifier", __FILE__, __LINE__);
  (void)parse_modifier_body(name_, body_, ValueType::f64, Shape::vector);  // validate now
}

Expression ElementwiseModifier::operator()(const Expression& argument) const {
  require_elementwise_operand(argument.node(), name_);
  const auto& a = argument.node();
  NodePtr body = parse_modifier_body(name_, body_, a->type, a->shape);
  auto n = std::make_shared<ExpressionNode>();
  n->kind = NodeKind::modifier;
  n->type = a->type;
  n->shape = a->shape;
  n->name = name_;
  n->index = a->index == -2 ? -2 : -1;
  n->children = {a, body};
  return Expression(n);
}

}  // namespace molaccel::linalg

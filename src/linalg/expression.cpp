// Expression trees: construction with shape and type checking, printing, kernel names and the
// parser of element-wise modifiers ("1/(1+X)").
#include <cctype>
#include <cmath>
#include <string>

#include "linalg/expression_util.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

std::string_view to_string(value_type type) {
  switch (type) {
    case value_type::f32:
      return "float";
    case value_type::f64:
      return "double";
    case value_type::i32:
      return "int";
  }
  return "?";
}

std::size_t size_of(value_type type) {
  return type == value_type::f64 ? 8 : 4;
}

namespace detail {

node_ptr leaf(node_kind kind, value_type type, int index) {
  auto n = std::make_shared<expression_node>();
  n->kind = kind;
  n->type = type;
  n->index = index;
  n->shape = (kind == node_kind::vector || kind == node_kind::temporary)          ? shape::vector
             : (kind == node_kind::dense_matrix || kind == node_kind::csr_matrix) ? shape::matrix
                                                                                  : shape::scalar;
  MOLACCEL_EXPECTS(index >= 0, "symbolic operand index must be >= 0");
  return n;
}

}  // namespace detail

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw Error("linalg expression: " + message, __FILE__, __LINE__);
}

bool is_untyped_constant(const node_ptr& n) {
  return n->kind == node_kind::constant && n->index == -2;
}

node_ptr constant_node(double value, value_type type, bool untyped) {
  auto n = std::make_shared<expression_node>();
  n->kind = node_kind::constant;
  n->constant = value;
  n->type = type;
  n->index = untyped ? -2 : -1;  // -2: type taken from the other operand when combined
  return n;
}

node_ptr retype(const node_ptr& n, value_type type) {
  if (!is_untyped_constant(n)) return n;
  return constant_node(n->constant, type, false);
}

node_ptr make(node_kind kind, std::vector<node_ptr> children, std::string name = {}) {
  // Constants written as C++ literals adopt the element type of their typed sibling.
  value_type type = value_type::f64;
  bool typed = false;
  for (auto& c : children)
    if (!is_untyped_constant(c)) {
      if (typed && c->type != type)
        fail(fmt::format("mixing {} and {} operands", to_string(type), to_string(c->type)));
      type = c->type;
      typed = true;
    }
  for (auto& c : children) c = retype(c, type);
  auto n = std::make_shared<expression_node>();
  n->kind = kind;
  n->type = type;
  n->name = std::move(name);
  n->children = std::move(children);
  if (!typed) n->index = -2;  // still untyped (constant folding of literals only)
  return n;
}

// Dense matrices take part in element-wise expressions (with other dense matrices and scalars);
// a sparse matrix only as the first argument of prod().
void require_elementwise_operand(const node_ptr& n, std::string_view what) {
  if (n->kind == node_kind::csr_matrix)
    fail(fmt::format("{}: a sparse matrix can only appear as the first argument of prod()", what));
}

node_ptr elementwise(node_kind kind, const node_ptr& a, const node_ptr& b, std::string name = {}) {
  const std::string what = name.empty() ? "arithmetic" : name;
  require_elementwise_operand(a, what);
  require_elementwise_operand(b, what);
  if ((a->shape == shape::matrix && b->shape == shape::vector) ||
      (a->shape == shape::vector && b->shape == shape::matrix))
    fail(fmt::format("{}: a matrix and a vector combined element-wise (use prod() for products)", what));
  auto n = make(kind, {a, b}, std::move(name));
  const_cast<expression_node&>(*n).shape =
      (a->shape == shape::matrix || b->shape == shape::matrix)   ? shape::matrix
      : (a->shape == shape::vector || b->shape == shape::vector) ? shape::vector
                                                                 : shape::scalar;
  return n;
}

node_ptr unary(node_kind kind, const node_ptr& a, std::string name = {}) {
  require_elementwise_operand(a, name.empty() ? "negation" : name);
  auto n = make(kind, {a}, std::move(name));
  const_cast<expression_node&>(*n).shape = a->shape;
  return n;
}

}  // namespace

expression operator+(const expression& a, const expression& b) {
  return expression(elementwise(node_kind::add, a.node(), b.node()));
}
expression operator-(const expression& a, const expression& b) {
  return expression(elementwise(node_kind::subtract, a.node(), b.node()));
}
expression operator*(const expression& a, const expression& b) {
  if (a.node()->shape == shape::vector && b.node()->shape == shape::vector)
    fail("vector * vector is ambiguous: use element_prod() or inner_prod()");
  if (a.node()->shape == shape::matrix && b.node()->shape == shape::matrix)
    fail("matrix * matrix is ambiguous: use element_prod() (matrix products are not supported)");
  return expression(elementwise(node_kind::multiply, a.node(), b.node()));
}
expression operator/(const expression& a, const expression& b) {
  if (b.node()->shape == shape::vector) fail("division by a vector: use element_div()");
  if (b.node()->shape == shape::matrix) fail("division by a matrix: use element_div()");
  return expression(elementwise(node_kind::divide, a.node(), b.node()));
}
expression operator-(const expression& a) {
  return expression(unary(node_kind::negate, a.node()));
}

static expression literal(double v) {
  return expression(constant_node(v, value_type::f64, true));
}
expression operator+(const expression& a, double b) {
  return a + literal(b);
}
expression operator+(double a, const expression& b) {
  return literal(a) + b;
}
expression operator-(const expression& a, double b) {
  return a - literal(b);
}
expression operator-(double a, const expression& b) {
  return literal(a) - b;
}
expression operator*(const expression& a, double b) {
  return a * literal(b);
}
expression operator*(double a, const expression& b) {
  return literal(a) * b;
}
expression operator/(const expression& a, double b) {
  return a / literal(b);
}
expression operator/(double a, const expression& b) {
  return literal(a) / b;
}

expression element_prod(const expression& a, const expression& b) {
  return expression(elementwise(node_kind::element_product, a.node(), b.node(), ""));
}
expression element_div(const expression& a, const expression& b) {
  return expression(elementwise(node_kind::element_division, a.node(), b.node(), ""));
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

static expression function(std::string name, const expression& a) {
  return expression(unary(node_kind::function, a.node(), std::move(name)));
}
static expression binary_function(std::string name, const expression& a, const expression& b) {
  return expression(elementwise(node_kind::binary_function, a.node(), b.node(), std::move(name)));
}
expression exp(const expression& a) {
  return function("exp", a);
}
expression log(const expression& a) {
  return function("log", a);
}
expression sqrt(const expression& a) {
  return function("sqrt", a);
}
expression abs(const expression& a) {
  return function("abs", a);
}
expression sin(const expression& a) {
  return function("sin", a);
}
expression cos(const expression& a) {
  return function("cos", a);
}
expression tanh(const expression& a) {
  return function("tanh", a);
}
expression nonzero(const expression& a) {
  return function("nonzero", a);
}
expression max(const expression& a, const expression& b) {
  return binary_function("max", a, b);
}
expression min(const expression& a, const expression& b) {
  return binary_function("min", a, b);
}
expression pow(const expression& a, const expression& b) {
  return binary_function("pow", a, b);
}
expression safe_div(const expression& a, const expression& b) {
  return binary_function("safe_div", a, b);
}
expression greater(const expression& a, const expression& b) {
  return binary_function("greater", a, b);
}

expression inner_prod(const expression& a, const expression& b) {
  if (a.node()->shape != shape::vector || b.node()->shape != shape::vector)
    fail("inner_prod() takes two vector expressions");
  auto n = make(node_kind::inner_product, {a.node(), b.node()});
  const_cast<expression_node&>(*n).shape = shape::scalar;
  return expression(n);
}
expression norm_2(const expression& a) {
  if (a.node()->shape != shape::vector) fail("norm_2() takes a vector expression");
  auto n = make(node_kind::norm_2, {a.node()});
  const_cast<expression_node&>(*n).shape = shape::scalar;
  return expression(n);
}
expression prod(const expression& m, const expression& v) {
  const auto k = m.node()->kind;
  if (k != node_kind::dense_matrix && k != node_kind::csr_matrix)
    fail("prod(): the first argument must be a symbolic matrix");
  if (v.node()->shape != shape::vector) fail("prod(): the second argument must be a vector expression");
  auto n = make(node_kind::matrix_product, {m.node(), v.node()});
  const_cast<expression_node&>(*n).shape = shape::vector;
  return expression(n);
}

statement::statement(node_ptr target, assign_op op, node_ptr value)
    : target_(std::move(target)), op_(op), value_(std::move(value)) {
  if (target_->kind != node_kind::vector && target_->kind != node_kind::device_scalar &&
      target_->kind != node_kind::dense_matrix)
    fail("only vectors, dense matrices and device scalars can be assigned to");
  if (target_->kind == node_kind::dense_matrix && value_->shape == shape::vector)
    fail("a vector expression cannot be assigned to a matrix");
  if (target_->kind != node_kind::dense_matrix && value_->shape == shape::matrix)
    fail("a matrix expression can only be assigned to a matrix (use prod() for products)");
  if (target_->kind == node_kind::device_scalar && value_->shape != shape::scalar)
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

std::string leaf_name(const expression_node& n) {
  switch (n.kind) {
    case node_kind::vector:
      return fmt::format("vec{}", n.index);
    case node_kind::dense_matrix:
      return fmt::format("mat{}", n.index);
    case node_kind::csr_matrix:
      return fmt::format("csr{}", n.index);
    case node_kind::host_scalar:
      return fmt::format("scal{}", n.index);
    case node_kind::device_scalar:
      return fmt::format("gscal{}", n.index);
    case node_kind::temporary:
      return fmt::format("tmp{}", n.index);
    case node_kind::placeholder:
      return "X";
    default:
      return {};
  }
}

static int precedence(node_kind k) {
  switch (k) {
    case node_kind::add:
    case node_kind::subtract:
      return 1;
    case node_kind::multiply:
    case node_kind::divide:
      return 2;
    case node_kind::negate:
      return 3;
    default:
      return 4;
  }
}

std::string infix(const node_ptr& n) {
  auto wrap = [&](const node_ptr& c, int min_prec) {
    std::string s = infix(c);
    return precedence(c->kind) < min_prec ? "(" + s + ")" : s;
  };
  switch (n->kind) {
    case node_kind::constant:
      return format_constant(n->constant);
    case node_kind::negate:
      return "-" + wrap(n->children[0], 3);
    case node_kind::add:
      return wrap(n->children[0], 1) + " + " + wrap(n->children[1], 2);
    case node_kind::subtract:
      return wrap(n->children[0], 1) + " - " + wrap(n->children[1], 2);
    case node_kind::multiply:
      return wrap(n->children[0], 2) + " * " + wrap(n->children[1], 3);
    case node_kind::divide:
      return wrap(n->children[0], 2) + " / " + wrap(n->children[1], 3);
    case node_kind::element_product:
      return "element_prod(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case node_kind::element_division:
      return "element_div(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case node_kind::function:
    case node_kind::modifier:
      return n->name + "(" + infix(n->children[0]) + ")";
    case node_kind::binary_function:
      return n->name + "(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case node_kind::inner_product:
      return "inner_prod(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    case node_kind::norm_2:
      return "norm_2(" + infix(n->children[0]) + ")";
    case node_kind::matrix_product:
      return "prod(" + infix(n->children[0]) + ", " + infix(n->children[1]) + ")";
    default:
      return leaf_name(*n);
  }
}

std::string expression::to_string() const {
  return infix(node_);
}

std::string statement_to_string(const statement& s) {
  const char* op = s.op() == assign_op::assign ? " = " : s.op() == assign_op::add_assign ? " += " : " -= ";
  return infix(s.target()) + op + infix(s.value());
}

// The paper's kernel names: `vec0 = vec1 + vec2` -> vec0_eq_vec1_plus_vec2.
std::string name_of(const node_ptr& n) {
  auto bin = [&](const char* op) {
    return name_of(n->children[0]) + "_" + op + "_" + name_of(n->children[1]);
  };
  switch (n->kind) {
    case node_kind::constant: {
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
    case node_kind::negate:
      return "neg_" + name_of(n->children[0]);
    case node_kind::add:
      return bin("plus");
    case node_kind::subtract:
      return bin("minus");
    case node_kind::multiply:
      return bin("times");
    case node_kind::divide:
      return bin("div");
    case node_kind::element_product:
      return bin("eprod");
    case node_kind::element_division:
      return bin("ediv");
    case node_kind::function:
    case node_kind::modifier:
      return n->name + "_" + name_of(n->children[0]);
    case node_kind::binary_function:
      return n->name + "_" + name_of(n->children[0]) + "_" + name_of(n->children[1]);
    case node_kind::inner_product:
      return "ip_" + name_of(n->children[0]) + "_with_" + name_of(n->children[1]);
    case node_kind::norm_2:
      return "norm2_" + name_of(n->children[0]);
    case node_kind::matrix_product:
      return "prod_" + name_of(n->children[0]) + "_" + name_of(n->children[1]);
    default:
      return leaf_name(*n);
  }
}

std::string kernel_base_name(const std::vector<statement>& statements) {
  std::string name;
  for (const auto& s : statements) {
    if (!name.empty()) name += "_and_";
    const char* op = s.op() == assign_op::assign       ? "_eq_"
                     : s.op() == assign_op::add_assign ? "_pluseq_"
                                                       : "_minuseq_";
    name += name_of(s.target()) + op + name_of(s.value());
  }
  // Identifiers stay readable; very long statements keep a prefix and a hash for uniqueness.
  if (name.size() > 96) name = name.substr(0, 80) + "_" + hash_hex(name).substr(0, 8);
  return name;
}

// Structural identity (used to share one inner product between its uses).
std::string structural_key(const node_ptr& n) {
  std::string s = fmt::format("{}:{}:{}:{}:{}[", int(n->kind), int(n->type), n->index, n->constant, n->name);
  for (auto& c : n->children) s += structural_key(c) + ",";
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
// Element-wise modifiers: a small recursive-descent parser over the text in X.
// ---------------------------------------------------------------------------------------------
namespace {

class modifier_parser {
 public:
  modifier_parser(std::string_view text, std::string_view name, const node_ptr& x)
      : text_(text), name_(name), x_(x) {}

  expression parse() {
    expression e = parse_sum();
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
  expression parse_sum() {
    expression e = parse_product();
    for (;;) {
      if (accept('+'))
        e = e + parse_product();
      else if (accept('-'))
        e = e - parse_product();
      else
        return e;
    }
  }
  expression parse_product() {
    expression e = parse_unary();
    for (;;) {
      if (accept('*')) {
        expression r = parse_unary();
        // X * X is element-wise inside a modifier: both sides are the same element.
        if (e.node()->shape != shape::scalar && r.node()->shape != shape::scalar)
          e = element_prod(e, r);
        else
          e = e * r;
      } else if (accept('/')) {
        expression r = parse_unary();
        if (r.node()->shape != shape::scalar)
          e = element_div(e, r);
        else
          e = e / r;
      } else {
        return e;
      }
    }
  }
  expression parse_unary() {
    if (++depth_ > 200) error("expression nested too deeply");
    expression e = accept('-') ? -parse_unary() : accept('+') ? parse_unary() : parse_primary();
    --depth_;
    return e;
  }
  expression parse_primary() {
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end of expression");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      expression e = parse_sum();
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
      return expression(constant_node(v, x_->type, false));
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t end = pos_;
      while (end < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
        ++end;
      std::string ident(text_.substr(pos_, end - pos_));
      pos_ = end;
      if (ident == "X" || ident == "x") return expression(x_);
      if (!is_unary_function(ident) && !is_binary_function(ident)) error("unknown name '" + ident + "'");
      if (!accept('(')) error("expected '(' after " + ident);
      expression a = parse_sum();
      if (is_binary_function(ident)) {
        if (!accept(',')) error(ident + " takes two arguments");
        expression b = parse_sum();
        if (!accept(')')) error("missing ')'");
        return binary_function(ident, a, b);
      }
      if (!accept(')')) error("missing ')'");
      return function(ident, a);
    }
    error(fmt::format("unexpected '{}'", c));
  }

  std::string_view text_, name_;
  node_ptr x_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

node_ptr parse_modifier_body(std::string_view name, std::string_view body, value_type type, shape s) {
  auto x = std::make_shared<expression_node>();
  x->kind = node_kind::placeholder;
  x->type = type;
  x->shape = s;
  return modifier_parser(body, name, x).parse().node();
}

elementwise_modifier::elementwise_modifier(std::string name, std::string body)
    : name_(std::move(name)), body_(std::move(body)) {
  bool ok = !name_.empty() && (std::isalpha(static_cast<unsigned char>(name_[0])) || name_[0] == '_');
  for (char c : name_) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) throw InputError("modifier " + name_, 0, "the name must be an identifier", __FILE__, __LINE__);
  (void)parse_modifier_body(name_, body_, value_type::f64, shape::vector);  // validate now
}

expression elementwise_modifier::operator()(const expression& argument) const {
  require_elementwise_operand(argument.node(), name_);
  const auto& a = argument.node();
  node_ptr body = parse_modifier_body(name_, body_, a->type, a->shape);
  auto n = std::make_shared<expression_node>();
  n->kind = node_kind::modifier;
  n->type = a->type;
  n->shape = a->shape;
  n->name = name_;
  n->index = a->index == -2 ? -2 : -1;
  n->children = {a, body};
  return expression(n);
}

}  // namespace molaccel::linalg

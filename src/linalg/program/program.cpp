// Program: symbols, steps and stop tests; CG, BiCGStab and pipelined CG written with it.
#include "molaccel/linalg_program.hpp"

#include <optional>
#include <set>

#include "linalg/expression_util.hpp"
#include "linalg/program/program_plan.hpp"

namespace molaccel::linalg {

namespace {
[[noreturn]] void fail(const std::string& program, const std::string& message) {
  throw Error("linalg program " + program + ": " + message, __FILE__, __LINE__);
}
// 1 where a <= b, else 0; 0 where either is NaN (1 - greater(a, b) would call a NaN residual
// converged): b > a, or a - b == 0.
Expression at_most(const Expression& a, const Expression& b) {
  return greater(b, a) + (1.0 - nonzero(a - b));
}
Expression constant(double value, ValueType type) {
  auto n = std::make_shared<ExpressionNode>();
  n->kind = NodeKind::constant;
  n->constant = value;
  n->type = type;
  return Expression(n);
}
// The BiCGStab family's monitor (the relative residual) and stop tests, as solve() names them.
void bicgstab_monitor_and_stops(Program& p, const Expression& rr, const Expression& bb,
                                const Expression& bound, const Expression& rho, const Expression& omega,
                                const Expression& alpha) {
  p.monitor(sqrt(safe_div(rr, bb)));
  p.stop_when(at_most(rr, bound), "converged");
  p.stop_when(1.0 - nonzero(rho), "breakdown (rho = 0)");
  p.stop_when(1.0 - nonzero(omega), "breakdown (omega = 0)");
  p.stop_when(1.0 - nonzero(alpha), "breakdown (rho = 0)");  // (r0, A p) = 0: solve()'s name
}
}  // namespace

Program::Program(std::string name, ValueType type) : name_(std::move(name)), type_(type) {}

NodePtr Program::declare(const std::string& name, NodeKind kind) {
  for (const auto& s : symbols_)
    if (s.name == name) fail(name_, "'" + name + "' is declared twice");
  if (kind == NodeKind::csr_matrix)
    for (const auto& s : symbols_)
      if (s.kind == NodeKind::csr_matrix) fail(name_, "a program has one matrix");
  symbols_.push_back({name, kind});
  return detail::leaf(kind, type_, static_cast<int>(symbols_.size()) - 1);
}

Assignable Program::vector(const std::string& name) {
  return Assignable(declare(name, NodeKind::vector));
}
Assignable Program::scalar(const std::string& name) {
  return Assignable(declare(name, NodeKind::device_scalar));
}
Expression Program::matrix(const std::string& name) {
  return Expression(declare(name, NodeKind::csr_matrix));
}

int Program::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < symbols_.size(); ++i)
    if (symbols_[i].name == name) return static_cast<int>(i);
  fail(name_, "no symbol '" + name + "'");
}

void Program::check_step(const std::vector<Statement>& step) const {
  if (step.empty()) fail(name_, "an empty step");
  std::set<int> targets;
  auto check_leaf = [&](const NodePtr& m) {
    if (!m->children.empty() || m->kind == NodeKind::constant || m->kind == NodeKind::placeholder) return;
    const bool known = m->index >= 0 && m->index < static_cast<int>(symbols_.size()) &&
                       symbols_[std::size_t(m->index)].kind == m->kind;
    if (!known) fail(name_, "operand " + leaf_name(*m) + " is not a symbol of this program");
    if (m->type != type_) fail(name_, "operand " + leaf_name(*m) + " has another element type");
  };
  for (const auto& s : step) {
    const std::string text = statement_to_string(s);
    program::visit(s.target(), check_leaf);
    program::visit(s.value(), check_leaf);
    if (!targets.insert(s.target()->index).second) fail(name_, "a step assigns a symbol twice: " + text);
    const bool vector_target = s.target()->kind == NodeKind::vector;
    program::visit(s.value(), [&](const NodePtr& n) {
      if (program::is_reduction(n)) {
        if (vector_target)
          fail(name_,
               "a vector statement holds an inner product or norm (assign it to a scalar first): " + text);
        for (const auto& c : n->children)
          program::visit(c, [&](const NodePtr& m) {
            if (program::is_reduction(m)) fail(name_, "nested reductions: " + text);
            if (m->kind == NodeKind::matrix_product)
              program::visit(m->children[1], [&](const NodePtr& k) {
                if (k->kind == NodeKind::matrix_product)
                  fail(name_,
                       "nested products in an inner product or norm (assign the outer product to a vector "
                       "first): " +
                           text);
              });
          });
      }
      // One level of nesting: the operand of an inner product of the matrix holds none.
      if (n->kind == NodeKind::matrix_product)
        program::visit(n->children[1], [&](const NodePtr& m) {
          if (m->kind == NodeKind::matrix_product)
            program::visit(m->children[1], [&](const NodePtr& k) {
              if (k->kind == NodeKind::matrix_product)
                fail(name_,
                     "products nested more than one level deep (assign the inner one to a vector first): " +
                         text);
            });
        });
    });
  }
}

Program& Program::setup(std::vector<Statement> simultaneous) {
  check_step(simultaneous);
  setup_.push_back(std::move(simultaneous));
  return *this;
}

Program& Program::step(std::vector<Statement> simultaneous) {
  check_step(simultaneous);
  loop_.push_back(std::move(simultaneous));
  return *this;
}

Program& Program::stop_when(Expression condition, std::string status) {
  program::visit(condition.node(), [&](const NodePtr& n) {
    if (n->shape != Shape::scalar || program::is_reduction(n))
      fail(name_, "a stop test reads scalars only: " + condition.to_string());
  });
  stops_.push_back({std::move(condition), std::move(status)});
  return *this;
}

int Program::vector_symbol(const NodePtr& n, const char* message) const {
  const bool known = n->kind == NodeKind::vector && n->index >= 0 &&
                     n->index < static_cast<int>(symbols_.size()) &&
                     symbols_[std::size_t(n->index)].kind == NodeKind::vector;
  if (!known) fail(name_, message);
  return n->index;
}

Program& Program::transposed_product(const Assignable& target, const Assignable& source) {
  const char* message = "a transposed product reads and writes vectors of this program";
  transposed_.push_back({vector_symbol(target.node(), message), vector_symbol(source.node(), message)});
  return *this;
}

Program& Program::inverse_diagonal(const Assignable& target) {
  inverse_diagonals_.push_back(
      vector_symbol(target.node(), "an inverse diagonal is a vector of this program"));
  return *this;
}

Program& Program::monitor(Expression value) {
  program::visit(value.node(), [&](const NodePtr& n) {
    if (n->shape != Shape::scalar || program::is_reduction(n))
      fail(name_, "a monitor reads scalars only: " + value.to_string());
  });
  monitors_.push_back(std::move(value));
  return *this;
}

// ---------------------------------------------------------------------------------------------
// The methods. Every division that can meet a zero is safe_div (0 instead of inf/NaN): the
// breakdown tests then stop the loop before the next iteration, with x left finite.
// ---------------------------------------------------------------------------------------------
namespace {

// Jacobi preconditioning: the vector "d" = diag(A)^-1, computed from the matrix (declared after
// the method's other symbols, so the unpreconditioned programs stay as they were).
struct Jacobi {
  std::optional<Assignable> d;
  Jacobi(Program& p, Preconditioner preconditioner) {
    if (preconditioner != Preconditioner::jacobi) return;
    d.emplace(p.vector("d").node());
    p.inverse_diagonal(*d);
  }
  Expression operator()(const Expression& e) const { return d ? element_prod(*d, e) : e; }  // M e
};

std::string method_name(const char* name, Preconditioner preconditioner) {
  return (preconditioner == Preconditioner::jacobi ? "jacobi_" : "") + std::string(name);
}

}  // namespace

// Preconditioned CG (z = M r): rho = (r, z) drives alpha and beta, rr = (r, r) the monitor and
// the stop test (summed at one barrier); unpreconditioned, rho is rr.
Program cg_program(ValueType type, Preconditioner preconditioner) {
  Program p(method_name("cg", preconditioner), type);
  auto x = p.vector("x"), r = p.vector("r"), pv = p.vector("p"), q = p.vector("q"), b = p.vector("b");
  auto a = p.matrix("A");
  auto rr = p.scalar("rr"), bb = p.scalar("bb"), alpha = p.scalar("alpha"), beta = p.scalar("beta"),
       rho_new = p.scalar(preconditioner == Preconditioner::jacobi ? "rz_new" : "rr_new"),
       bound = p.scalar("bound");
  const Jacobi m(p, preconditioner);
  const Assignable rho(m.d ? p.scalar("rz").node() : rr.node());
  p.setup(r = b);
  if (m.d)
    p.setup({rr = inner_prod(b, b), rho = inner_prod(b, m(b))});
  else
    p.setup(rr = inner_prod(b, b));
  p.setup(bb = rr).setup(alpha = constant(1.0, type));
  // p = z + beta p and q = A p in one step: the product reads r and the old p at other rows
  // (both known since the last barrier) instead of the new p, which would need a barrier.
  p.step({pv = m(r) + beta * pv, q = prod(a, m(r) + beta * pv)});
  p.step(alpha = safe_div(rho, inner_prod(pv, q)));
  p.step(x = x + alpha * pv);
  p.step(r = r - alpha * q);
  if (m.d)
    p.step({rho_new = inner_prod(r, m(r)), rr = inner_prod(r, r)});
  else
    p.step(rho_new = inner_prod(r, r));
  p.step(beta = safe_div(rho_new, rho));
  p.step(rho = rho_new);
  p.monitor(sqrt(safe_div(rr, bb)));
  p.stop_when(at_most(rr, bound), "converged");
  p.stop_when(1.0 - nonzero(alpha), "breakdown ((p, Ap) = 0)");
  return p;
}

// Preconditioned on the right, as solve(): v = A M p, t = A M s, x += alpha M p + omega M s.
Program bicgstab_program(ValueType type, Preconditioner preconditioner) {
  Program p(method_name("bicgstab", preconditioner), type);
  auto x = p.vector("x"), r = p.vector("r"), r0 = p.vector("r0"), pv = p.vector("p"), v = p.vector("v"),
       s = p.vector("s"), t = p.vector("t"), b = p.vector("b");
  auto a = p.matrix("A");
  auto rho = p.scalar("rho"), rr = p.scalar("rr"), bb = p.scalar("bb"), alpha = p.scalar("alpha"),
       omega = p.scalar("omega"), beta = p.scalar("beta"), rho_new = p.scalar("rho_new"),
       bound = p.scalar("bound");
  const Jacobi m(p, preconditioner);
  p.setup({r = b, r0 = b, pv = b})
      .setup({rho = inner_prod(b, b), rr = inner_prod(b, b)})
      .setup(bb = rr)
      .setup(omega = constant(1.0, type))
      .setup(v = prod(a, m(pv)))
      .setup(alpha = safe_div(rho, inner_prod(r0, v)));
  // s = r - alpha v, and t = A s with s recomputed at other rows from r and v.
  p.step({s = r - alpha * v, t = prod(a, m(r - alpha * v))});
  p.step(omega = safe_div(inner_prod(t, s), inner_prod(t, t)));
  p.step({x = x + alpha * m(pv) + omega * m(s), r = s - omega * t});
  p.step({rho_new = inner_prod(r0, r), rr = inner_prod(r, r)});
  p.step(beta = safe_div(rho_new, rho) * safe_div(alpha, omega));
  p.step(rho = rho_new);
  // The next iteration's v = A p, with p recomputed at other rows (p and v are renamed).
  p.step({pv = r + beta * (pv - omega * v), v = prod(a, m(r + beta * (pv - omega * v)))});
  p.step(alpha = safe_div(rho, inner_prod(r0, v)));
  bicgstab_monitor_and_stops(p, rr, bb, bound, rho, omega, alpha);
  return p;
}

// BiCGStab with two barriers per iteration instead of three, by recurrences: besides v = A p it
// carries w = A r and z = A v, so that the next v = A p' = w + beta (v - omega z) and t = A s =
// w - alpha z need no product of a vector of the same segment, and the next alpha's (r0, A p')
// expands into (r0, w) + beta (r0, v) - beta omega (r0, z), summed with rho and (r, r). The
// products are those of vectors known at the last barrier: A w and A z for the new z, A t for
// the new w (three per iteration instead of two). In exact arithmetic its iterates are
// BiCGStab's; in floating point v, w and z drift from A p, A r and A v (docs/linalg.md).
Program pipelined_bicgstab_program(ValueType type) {
  Program p("pipelined_bicgstab", type);
  auto x = p.vector("x"), r = p.vector("r"), r0 = p.vector("r0"), pv = p.vector("p"), v = p.vector("v"),
       s = p.vector("s"), t = p.vector("t"), w = p.vector("w"), z = p.vector("z"), b = p.vector("b");
  auto a = p.matrix("A");
  auto rho = p.scalar("rho"), rr = p.scalar("rr"), bb = p.scalar("bb"), alpha = p.scalar("alpha"),
       omega = p.scalar("omega"), beta = p.scalar("beta"), rho_new = p.scalar("rho_new"),
       r0w = p.scalar("r0w"), r0v = p.scalar("r0v"), r0z = p.scalar("r0z"), bound = p.scalar("bound");
  // p = r = r0 = b, v = w = A b, z = A v; beta = 0 keeps them in the first iteration.
  p.setup({r = b, r0 = b, pv = b, w = prod(a, b), v = prod(a, b)})
      .setup({rho = inner_prod(b, b), rr = inner_prod(b, b)})
      .setup(bb = rr)
      .setup(omega = constant(1.0, type))
      .setup(z = prod(a, v))
      .setup(alpha = safe_div(rho, inner_prod(r0, v)));
  p.step({pv = r + beta * (pv - omega * v), v = w + beta * (v - omega * z),
          z = prod(a, w) + beta * (z - omega * prod(a, z))});
  p.step(s = r - alpha * v);
  p.step(t = w - alpha * z);
  p.step(omega = safe_div(inner_prod(t, s), inner_prod(t, t)));
  p.step({x = x + alpha * pv + omega * s, r = s - omega * t, w = t - omega * prod(a, t)});
  p.step({rho_new = inner_prod(r0, r), rr = inner_prod(r, r), r0w = inner_prod(r0, w),
          r0v = inner_prod(r0, v), r0z = inner_prod(r0, z)});
  p.step(beta = safe_div(rho_new, rho) * safe_div(alpha, omega));
  p.step(rho = rho_new);
  p.step(alpha = safe_div(rho, r0w + beta * r0v - beta * omega * r0z));
  bicgstab_monitor_and_stops(p, rr, bb, bound, rho, omega, alpha);
  return p;
}

// BiCGStab with one barrier per iteration. The barrier's nine sums give this iteration's omega,
// the next rho and beta and, through h = A^T r0 ((r0, A p') = (h, p') with p' = r' + beta (p -
// omega v) and r' = s - omega t expanded), the next alpha:
//   omega = (t, s) / (t, t), rho' = (r0, s) - omega (r0, t), beta = rho' / rho * alpha / omega,
//   alpha' = rho' / ((h, s) - omega (h, t) + beta ((h, p) - omega (h, v))).
// After it, one step updates x, r and p from the last s, t, p and v, and takes the products of
// the new p and of the new s at once: read at other rows, p' and r' are recomputed there from the
// old vectors (one hop for v' = A p', two for t' = A (r' - alpha' A p')), which every row can do
// without waiting for another. The sum of (r, r) reads the r of the step, so a stop test sees
// the residual of the iteration before: one iteration more than bicgstab, x and r consistent.
// Jacobi: on the right as bicgstab_program, h = (A M)^T r0 = M A^T r0.
Program one_barrier_bicgstab_program(ValueType type, Preconditioner preconditioner) {
  Program p(method_name("one_barrier_bicgstab", preconditioner), type);
  auto x = p.vector("x"), r = p.vector("r"), r0 = p.vector("r0"), h = p.vector("h"), pv = p.vector("p"),
       v = p.vector("v"), s = p.vector("s"), t = p.vector("t"), b = p.vector("b");
  auto a = p.matrix("A");
  auto rho = p.scalar("rho"), rr = p.scalar("rr"), bb = p.scalar("bb"), alpha = p.scalar("alpha"),
       omega = p.scalar("omega"), beta = p.scalar("beta"), rho_new = p.scalar("rho_new"),
       alpha_x = p.scalar("alpha_x"), omega_x = p.scalar("omega_x"), ts = p.scalar("ts"), tt = p.scalar("tt"),
       r0t = p.scalar("r0t"), r0s = p.scalar("r0s"), hs = p.scalar("hs"), ht = p.scalar("ht"),
       hp = p.scalar("hp"), hv = p.scalar("hv"), bound = p.scalar("bound");
  const Jacobi m(p, preconditioner);
  p.transposed_product(h, b);  // r0 = b
  if (m.d) p.setup(h = m(h));
  // s = b and t = v = 0, alpha_x = omega_x = beta = 0: the first iteration's step gives x = 0,
  // r = p = b. omega = 1 keeps the breakdown test quiet before it.
  p.setup({r0 = b, s = b})
      .setup({rho = inner_prod(b, b), rr = inner_prod(b, b), hp = inner_prod(h, b)})
      .setup(bb = rr)
      .setup(omega = constant(1.0, type))
      .setup(alpha = safe_div(rho, hp));
  const Expression r_new = s - omega * t, p_new = r_new + beta * (pv - omega * v);
  p.step({x = x + alpha_x * m(pv) + omega_x * m(s), r = r_new, pv = p_new, v = prod(a, m(p_new)),
          t = prod(a, m(r_new - alpha * prod(a, m(p_new))))});
  p.step(s = r - alpha * v);
  p.step(alpha_x = alpha);
  p.step({ts = inner_prod(t, s), tt = inner_prod(t, t), r0t = inner_prod(r0, t), r0s = inner_prod(r0, s),
          hs = inner_prod(h, s), ht = inner_prod(h, t), hp = inner_prod(h, pv), hv = inner_prod(h, v),
          rr = inner_prod(r, r)});
  p.step(omega = safe_div(ts, tt));
  p.step(rho_new = r0s - omega * r0t);
  p.step(beta = safe_div(rho_new, rho) * safe_div(alpha, omega));
  p.step(rho = rho_new);
  p.step(alpha = safe_div(rho, hs - omega * ht + beta * (hp - omega * hv)));
  p.step(omega_x = omega);
  bicgstab_monitor_and_stops(p, rr, bb, bound, rho, omega, alpha);
  return p;
}

// Ghysels & Vanroose, "Hiding global synchronization latency in the preconditioned Conjugate
// Gradient algorithm" (Parallel Computing 40, 2014), Alg. 2 without preconditioner: the two
// inner products of an iteration are summed at one barrier, and the product q = A w needs no
// other barrier (w is renamed: read at other rows, written later in the segment).
Program pipelined_cg_program(ValueType type) {
  Program p("pipelined_cg", type);
  auto x = p.vector("x"), r = p.vector("r"), w = p.vector("w"), q = p.vector("q"), z = p.vector("z"),
       s = p.vector("s"), pv = p.vector("p"), b = p.vector("b");
  auto a = p.matrix("A");
  auto gamma = p.scalar("gamma"), delta = p.scalar("delta"), gamma_old = p.scalar("gamma_old"),
       alpha = p.scalar("alpha"), beta = p.scalar("beta"), bb = p.scalar("bb"), bound = p.scalar("bound");
  p.setup(r = b).setup(w = prod(a, b)).setup({gamma = inner_prod(b, b), delta = inner_prod(prod(a, b), b)});
  p.setup(bb = gamma).setup(alpha = constant(1.0, type));
  // gamma_old = 0 makes beta = 0 in the first iteration (safe_div), as the algorithm's i = 0.
  p.step(q = prod(a, w));
  p.step(beta = safe_div(gamma, gamma_old));
  p.step(alpha = safe_div(gamma, delta - safe_div(beta * gamma, alpha)));
  p.step({z = q + beta * z, s = w + beta * s, pv = r + beta * pv});
  p.step({x = x + alpha * pv, r = r - alpha * s, w = w - alpha * z});
  p.step(gamma_old = gamma);
  p.step({gamma = inner_prod(r, r), delta = inner_prod(w, r)});
  p.monitor(sqrt(safe_div(gamma, bb)));
  p.stop_when(at_most(gamma, bound), "converged");
  p.stop_when(1.0 - nonzero(alpha), "breakdown ((p, Ap) = 0)");
  return p;
}

}  // namespace molaccel::linalg

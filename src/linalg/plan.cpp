#include "linalg/plan.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "linalg/expression_util.hpp"

namespace molaccel::linalg {

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw Error("linalg operation: " + message, __FILE__, __LINE__);
}

bool is_reduction(const NodePtr& n) {
  return n->kind == NodeKind::inner_product || n->kind == NodeKind::norm_2;
}
bool is_leaf(const NodePtr& n) {
  return n->children.empty();
}

NodePtr with_children(const NodePtr& n, std::vector<NodePtr> children) {
  auto copy = std::make_shared<ExpressionNode>(*n);
  copy->children = std::move(children);
  return copy;
}
NodePtr binary(NodeKind kind, const NodePtr& a, const NodePtr& b, Shape s) {
  auto n = std::make_shared<ExpressionNode>();
  n->kind = kind;
  n->type = a->type;
  n->shape = s;
  n->children = {a, b};
  return n;
}

bool is_sum(const NodePtr& n) {
  return n->kind == NodeKind::add || n->kind == NodeKind::subtract;
}

// The paper's Procedure 1: alpha*(x + y) -> alpha*x + alpha*y (and (x + y)*alpha), applied
// recursively; -(x + y) -> -x - y. Reduction operands and products keep their own trees.
NodePtr expand(const NodePtr& n) {
  if (is_leaf(n) || is_reduction(n) || n->kind == NodeKind::modifier) return n;
  std::vector<NodePtr> children;
  for (auto& c : n->children) children.push_back(expand(c));
  if (n->kind == NodeKind::multiply) {
    const auto& l = children[0];
    const auto& r = children[1];
    if (l->shape == Shape::scalar && is_sum(r))
      return expand(binary(r->kind,
                           binary(NodeKind::multiply, l, r->children[0],
                                  r->children[0]->shape == Shape::vector ? Shape::vector : l->shape),
                           binary(NodeKind::multiply, l, r->children[1],
                                  r->children[1]->shape == Shape::vector ? Shape::vector : l->shape),
                           n->shape));
    if (r->shape == Shape::scalar && is_sum(l))
      return expand(binary(l->kind,
                           binary(NodeKind::multiply, l->children[0], r,
                                  l->children[0]->shape == Shape::vector ? Shape::vector : r->shape),
                           binary(NodeKind::multiply, l->children[1], r,
                                  l->children[1]->shape == Shape::vector ? Shape::vector : r->shape),
                           n->shape));
  }
  if (n->kind == NodeKind::negate && is_sum(children[0])) {
    const auto& s = children[0];
    auto neg = [&](const NodePtr& x) {
      auto m = std::make_shared<ExpressionNode>();
      m->kind = NodeKind::negate;
      m->type = x->type;
      m->shape = x->shape;
      m->children = {x};
      return NodePtr(m);
    };
    return expand(binary(s->kind, neg(s->children[0]), neg(s->children[1]), n->shape));
  }
  return with_children(n, std::move(children));
}

void visit_all(const NodePtr& n, const std::function<void(const NodePtr&)>& f) {
  f(n);
  for (auto& c : n->children) visit_all(c, f);
}

bool reads_any(const NodePtr& n, const std::set<int>& written_vectors) {
  bool found = false;
  visit_all(n, [&](const NodePtr& m) {
    if (m->kind == NodeKind::vector && written_vectors.count(m->index)) found = true;
  });
  return found;
}

bool contains_product(const NodePtr& n) {
  bool found = false;
  visit_all(n, [&](const NodePtr& m) { found = found || m->kind == NodeKind::matrix_product; });
  return found;
}

// A product evaluated row by row needs its vector operand at any index: products inside that
// operand must have been materialised (one level is, by the temporaries stage).
void check_product_nesting(const NodePtr& n) {
  visit_all(n, [&](const NodePtr& m) {
    if (m->kind == NodeKind::matrix_product && contains_product(m->children[1]))
      fail(
          "products nested more than one level deep (prod(A, prod(B, prod(C, x)))) or inside inner products; "
          "split the operation");
  });
}

}  // namespace

std::vector<Token> tokens_of(const NodePtr& expanded) {
  std::vector<Token> out;
  std::function<void(const NodePtr&, bool)> walk = [&](const NodePtr& n, bool negative) {
    if (n->kind == NodeKind::add) {
      walk(n->children[0], negative);
      walk(n->children[1], negative);
    } else if (n->kind == NodeKind::subtract) {
      walk(n->children[0], negative);
      walk(n->children[1], !negative);
    } else if (n->kind == NodeKind::negate) {
      walk(n->children[0], !negative);
    } else {
      out.push_back({negative, n});
    }
  };
  walk(expanded, false);
  return out;
}

int OperationPlan::slot_of(const NodePtr& reduction) const {
  if (auto hit = slot_by_node.find(reduction.get()); hit != slot_by_node.end()) return hit->second;
  auto it = slot_by_key.find(structural_key(reduction));
  MOLACCEL_EXPECTS(it != slot_by_key.end(), "reduction not planned");
  return it->second;
}

void collect_products(const NodePtr& n, bool& dense, bool& csr) {
  if (n->kind == NodeKind::matrix_product) {
    (n->children[0]->kind == NodeKind::dense_matrix ? dense : csr) = true;
  }
  if (is_reduction(n)) return;  // read from partial sums
  for (auto& c : n->children) collect_products(c, dense, csr);
}

OperationPlan make_plan(std::vector<Statement> statements) {
  if (statements.empty()) fail("no statements");
  OperationPlan plan;
  plan.statements = statements;
  plan.name = kernel_base_name(statements);
  plan.type = statements.front().target()->type;

  // Operands: consistent kinds and types, contiguous numbering, distinct targets.
  std::map<int, PlanOperand> ops;
  auto note_operand = [&](const NodePtr& m) {
    if (m->index < 0 || !is_leaf(m) || m->kind == NodeKind::constant || m->kind == NodeKind::placeholder)
      return;
    if (m->type != plan.type)
      fail(fmt::format("operand {} is {} but the operation is {}", leaf_name(*m), to_string(m->type),
                       to_string(plan.type)));
    auto [it, fresh] = ops.try_emplace(m->index, PlanOperand{m->kind, m->type, false, true});
    if (!fresh && it->second.kind != m->kind)
      fail(fmt::format("operand {} is used as two different kinds", m->index));
  };
  std::set<int> written_vectors, written_scalars;
  for (auto& s : statements) {
    visit_all(s.target(), note_operand);
    visit_all(s.value(), note_operand);
    const int t = s.target()->index;
    if (!(s.target()->kind == NodeKind::vector ? written_vectors : written_scalars).insert(t).second)
      fail(fmt::format("{} is assigned twice in one operation", leaf_name(*s.target())));
    ops[t].written = true;
  }
  for (auto& s : statements)
    visit_all(s.value(), [&](const NodePtr& m) {
      if (m->kind == NodeKind::device_scalar && written_scalars.count(m->index))
        fail(
            fmt::format("{} is both assigned and read by one operation; split it into two operations "
                        "(its blocks would race on the scalar)",
                        leaf_name(*m)));
    });
  const int n_operands = ops.empty() ? 0 : ops.rbegin()->first + 1;
  for (int i = 0; i < n_operands; ++i) {
    if (!ops.count(i)) fail(fmt::format("operand numbers must be contiguous: {} is unused", i));
    plan.operands.push_back(ops[i]);
  }

  // Right-hand sides: x += e -> x = x + e, then expansion into tokens.
  std::vector<Assignment> vector_assignments, scalar_assignments;
  for (auto& s : statements) {
    NodePtr value = s.value();
    if (s.op() != AssignOp::assign)
      value = binary(s.op() == AssignOp::add_assign ? NodeKind::add : NodeKind::subtract, s.target(), value,
                     s.target()->shape);
    value = expand(value);
    (s.target()->kind == NodeKind::vector ? vector_assignments : scalar_assignments)
        .push_back({s.target(), value});
  }

  // Products in the final stage that read a written vector get a temporary.
  std::function<NodePtr(const NodePtr&)> detach = [&](const NodePtr& n) -> NodePtr {
    if (is_leaf(n) || is_reduction(n)) return n;
    std::vector<NodePtr> children;
    for (auto& c : n->children) children.push_back(detach(c));
    if (n->kind == NodeKind::matrix_product &&
        (reads_any(children[1], written_vectors) || contains_product(children[1]))) {
      const int index = static_cast<int>(plan.temporaries.size());
      plan.temporaries.push_back({children[1]});
      children[1] = detail::leaf(NodeKind::temporary, n->type, index);
    }
    return with_children(n, std::move(children));
  };
  for (auto& a : vector_assignments) a.value = detach(a.value);
  for (auto& a : vector_assignments) check_product_nesting(a.value);
  for (auto& a : scalar_assignments) check_product_nesting(a.value);
  for (auto& t : plan.temporaries) check_product_nesting(t.operand);

  // Reductions with their levels, shared by structural identity.
  std::function<int(const NodePtr&)> level_of = [&](const NodePtr& n) -> int {
    int deepest = 0;
    for (auto& c : n->children) deepest = std::max(deepest, level_of(c));
    if (!is_reduction(n)) return deepest;
    const std::string key = structural_key(n);
    auto it = plan.slot_by_key.find(key);
    if (it == plan.slot_by_key.end()) {
      plan.slot_by_key[key] = static_cast<int>(plan.reductions.size());
      plan.reductions.push_back({n, key, deepest + 1});
    }
    plan.slot_by_node[n.get()] = plan.slot_by_key[key];
    return deepest + 1;
  };
  for (auto& a : vector_assignments) level_of(a.value);
  for (auto& a : scalar_assignments) level_of(a.value);
  for (auto& t : plan.temporaries) level_of(t.operand);
  int max_level = 0;
  for (auto& r : plan.reductions) max_level = std::max(max_level, r.level);

  // Reductions a stage reads (their values) when it evaluates `n`.
  auto consumed_by = [&](const NodePtr& root, int stage_level, std::set<int>& out) {
    std::function<void(const NodePtr&)> walk = [&](const NodePtr& n) {
      if (is_reduction(n)) {
        const int slot = plan.slot_of(n);
        if (plan.reductions[slot].level < stage_level) {
          out.insert(slot);
          return;
        }
      }
      for (auto& c : n->children) walk(c);
    };
    walk(root);
  };

  for (int level = 1; level <= max_level; ++level) {
    PlanStage st;
    st.what = PlanStage::Kind::reduction;
    st.level = level;
    st.kernel_name = plan.name + fmt::format("_reduce{}", level);
    std::set<int> consumed;
    for (int slot = 0; slot < static_cast<int>(plan.reductions.size()); ++slot) {
      if (plan.reductions[slot].level != level) continue;
      st.reductions.push_back(slot);
      for (auto& c : plan.reductions[slot].node->children) {
        consumed_by(c, level, consumed);
        collect_products(c, st.has_dense_product, st.has_csr_product);
      }
    }
    st.consumed.assign(consumed.begin(), consumed.end());
    plan.stages.push_back(std::move(st));
  }
  // A temporary whose operand takes a product of another temporary (prod(A, f(prod(A, x))) with
  // x written: T1 = x, T0 = f(prod(A, T1))) reads that one at other rows: it is materialised in a
  // later stage, after the whole of the other (created first: detach works bottom-up).
  std::vector<int> depth(plan.temporaries.size(), 1);
  int depths = 0;
  for (std::size_t t = 0; t < plan.temporaries.size(); ++t) {
    visit_all(plan.temporaries[t].operand, [&](const NodePtr& m) {
      if (m->kind == NodeKind::temporary) depth[t] = std::max(depth[t], depth[std::size_t(m->index)] + 1);
    });
    depths = std::max(depths, depth[t]);
  }
  for (int d = 1; d <= depths; ++d) {
    PlanStage st;
    st.what = PlanStage::Kind::temporaries;
    st.level = max_level + d;
    st.kernel_name = plan.name + (d == 1 ? std::string("_materialize") : fmt::format("_materialize{}", d));
    std::set<int> consumed;
    for (int t = 0; t < static_cast<int>(plan.temporaries.size()); ++t) {
      if (depth[std::size_t(t)] != d) continue;
      st.temporaries.push_back(t);
      consumed_by(plan.temporaries[t].operand, st.level, consumed);
      collect_products(plan.temporaries[t].operand, st.has_dense_product, st.has_csr_product);
    }
    st.consumed.assign(consumed.begin(), consumed.end());
    plan.stages.push_back(std::move(st));
  }
  PlanStage final_stage;
  final_stage.what = PlanStage::Kind::final;
  final_stage.level = max_level + depths + 1;
  final_stage.kernel_name = plan.name;
  std::set<int> consumed;
  for (auto& a : vector_assignments) {
    consumed_by(a.value, final_stage.level, consumed);
    collect_products(a.value, final_stage.has_dense_product, final_stage.has_csr_product);
  }
  for (auto& a : scalar_assignments) consumed_by(a.value, final_stage.level, consumed);
  final_stage.consumed.assign(consumed.begin(), consumed.end());
  final_stage.vector_assignments = std::move(vector_assignments);
  final_stage.scalar_assignments = std::move(scalar_assignments);
  plan.stages.push_back(std::move(final_stage));
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Run-time shapes.
// ---------------------------------------------------------------------------------------------
std::size_t vector_length(const OperationPlan& plan, const NodePtr& n, const std::vector<Argument>& args) {
  switch (n->kind) {
    case NodeKind::vector:
      return args[n->index].rows;
    case NodeKind::temporary:
      return vector_length(plan, plan.temporaries[n->index].operand, args);
    case NodeKind::matrix_product: {
      const auto& m = args[n->children[0]->index];
      const std::size_t len = vector_length(plan, n->children[1], args);
      if (len != m.cols)
        throw Error(fmt::format("linalg: prod({}, ...) of a {}x{} matrix with a vector of length {}",
                                leaf_name(*n->children[0]), m.rows, m.cols, len),
                    __FILE__, __LINE__);
      return m.rows;
    }
    default:
      break;
  }
  if (n->shape == Shape::scalar) return 0;
  std::size_t len = 0;
  bool have = false;
  for (std::size_t c = 0; c < n->children.size(); ++c) {
    if (n->kind == NodeKind::modifier && c == 1) break;  // the body follows its argument
    const auto& child = n->children[c];
    if (child->shape != Shape::vector) continue;
    const std::size_t l = vector_length(plan, child, args);
    if (have && l != len)
      throw Error(fmt::format("linalg: vectors of lengths {} and {} combined in '{}'", len, l, infix(n)),
                  __FILE__, __LINE__);
    len = l;
    have = true;
  }
  return len;
}

BoundShapes bind_arguments(const OperationPlan& plan, const std::vector<Argument>& args) {
  if (args.size() != plan.operands.size())
    throw Error(fmt::format("linalg operation {} takes {} operands, got {}", plan.name, plan.operands.size(),
                            args.size()),
                __FILE__, __LINE__);
  BoundShapes out;
  bool have_place = false;
  double csr_nnz = 0, csr_rows = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    const auto& op = plan.operands[i];
    Argument::Kind expected = Argument::Kind::vector;
    switch (op.kind) {
      case NodeKind::vector:
        expected = Argument::Kind::vector;
        break;
      case NodeKind::dense_matrix:
        expected = Argument::Kind::dense_matrix;
        break;
      case NodeKind::csr_matrix:
        expected = Argument::Kind::csr_matrix;
        break;
      case NodeKind::host_scalar:
        expected = Argument::Kind::host_value;
        break;
      case NodeKind::device_scalar:
        expected = Argument::Kind::device_scalar;
        break;
      default:
        break;
    }
    // A device scalar may also be read where a host value is expected? No: the kernel signature
    // differs (value vs address), so the kinds must match exactly.
    if (a.what != expected)
      throw Error(fmt::format("linalg operation {}: operand {} has the wrong kind", plan.name, i), __FILE__,
                  __LINE__);
    if (a.type != op.type)
      throw Error(fmt::format("linalg operation {}: operand {} is {}, expected {}", plan.name, i,
                              to_string(a.type), to_string(op.type)),
                  __FILE__, __LINE__);
    if (a.data) {
      if (have_place && !(a.data->where() == out.where))
        throw Error(fmt::format("linalg operation {}: operands on different devices ({} and {})", plan.name,
                                out.where.describe(), a.data->where().describe()),
                    __FILE__, __LINE__);
      if (!have_place) out.where = a.data->where();
      have_place = true;
    }
    if (a.what == Argument::Kind::csr_matrix) {
      csr_nnz += static_cast<double>(a.data->size());
      csr_rows += static_cast<double>(a.rows);
    }
  }
  if (!have_place)
    throw Error("linalg operation " + plan.name + ": no container operand", __FILE__, __LINE__);
  // A written operand may not share memory with another operand: kernels read every operand
  // through restrict pointers and the simultaneous-assignment order assumes distinct storage.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!plan.operands[i].written || !args[i].data) continue;
    const char* wb = static_cast<const char*>(args[i].data->data());
    const char* we = wb + args[i].data->size() * size_of(args[i].type);
    for (std::size_t j = 0; j < args.size(); ++j) {
      if (j == i || !args[j].data) continue;
      const char* b = static_cast<const char*>(args[j].data->data());
      const char* e = b + args[j].data->size() * size_of(args[j].type);
      if (b < we && wb < e)
        throw Error(
            fmt::format("linalg operation {}: operand {} is written and overlaps operand {}; pass distinct "
                        "containers (a Statement may read its own target: x = x + y)",
                        plan.name, i, j),
            __FILE__, __LINE__);
    }
  }
  out.csr_average_row_nnz = csr_rows > 0 ? csr_nnz / csr_rows : 0;

  for (auto& r : plan.reductions)
    out.reduction_length.push_back(vector_length(plan, r.node->children[0], args));
  for (auto& r : plan.reductions)
    if (r.node->kind == NodeKind::inner_product) {
      const std::size_t other = vector_length(plan, r.node->children[1], args);
      if (other != vector_length(plan, r.node->children[0], args))
        throw Error(fmt::format("linalg: inner_prod of vectors of lengths {} and {}",
                                vector_length(plan, r.node->children[0], args), other),
                    __FILE__, __LINE__);
    }
  for (auto& t : plan.temporaries) out.temporary_length.push_back(vector_length(plan, t.operand, args));
  for (auto& st : plan.stages) {
    std::size_t rows = 0;
    for (int slot : st.reductions) rows = std::max(rows, out.reduction_length[slot]);
    for (int t : st.temporaries) rows = std::max(rows, out.temporary_length[t]);
    for (auto& a : st.vector_assignments) {
      const std::size_t target = args[a.target->index].rows;
      const std::size_t value = a.value->shape == Shape::vector ? vector_length(plan, a.value, args) : target;
      if (value != target)
        throw Error(fmt::format("linalg: assigning a vector of length {} to {} of length {}", value,
                                leaf_name(*a.target), target),
                    __FILE__, __LINE__);
      rows = std::max(rows, target);
    }
    out.stage_rows.push_back(rows);
  }
  return out;
}

}  // namespace molaccel::linalg

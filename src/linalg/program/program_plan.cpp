#include "linalg/program/program_plan.hpp"

#include "linalg/expression_util.hpp"

namespace molaccel::linalg::program {

bool is_reduction(const NodePtr& n) {
  return n->kind == NodeKind::inner_product || n->kind == NodeKind::norm_2;
}

void visit(const NodePtr& n, const std::function<void(const NodePtr&)>& f) {
  f(n);
  for (const auto& c : n->children) visit(c, f);
}

bool nests_products(const Program& program) {
  bool nested = false;
  for (const auto* steps : {&program.setup_steps(), &program.loop_steps()})
    for (const auto& step : *steps)
      for (const auto& st : step)
        visit(st.value(), [&](const NodePtr& n) {
          if (n->kind == NodeKind::matrix_product)
            visit(n->children[1],
                  [&](const NodePtr& m) { nested = nested || m->kind == NodeKind::matrix_product; });
        });
  return nested;
}

namespace {

// What a step reads, split by how: scalars (anywhere), vectors at other rows (through a
// product), and scalars read by row-wise expressions (vector right-hand sides, reduction operands).
struct StepReads {
  std::set<int> scalars, row_scalars, product_vectors;
  std::vector<NodePtr> reductions;
};

void collect_row_wise(const NodePtr& n, StepReads& out, bool in_product) {
  if (n->kind == NodeKind::device_scalar) out.row_scalars.insert(n->index);
  if (n->kind == NodeKind::vector && in_product) out.product_vectors.insert(n->index);
  for (std::size_t c = 0; c < n->children.size(); ++c)
    collect_row_wise(n->children[c], out, in_product || (n->kind == NodeKind::matrix_product && c == 1));
}

StepReads reads_of(const std::vector<Statement>& step) {
  StepReads out;
  for (const auto& s : step) {
    visit(s.value(), [&](const NodePtr& n) {
      if (n->kind == NodeKind::device_scalar) out.scalars.insert(n->index);
    });
    if (s.target()->kind == NodeKind::vector) {
      collect_row_wise(s.value(), out, false);
    } else {
      visit(s.value(), [&](const NodePtr& n) {
        if (!is_reduction(n)) return;
        out.reductions.push_back(n);
        for (const auto& c : n->children) collect_row_wise(c, out, false);
      });
    }
  }
  return out;
}

bool intersects(const std::set<int>& a, const std::set<int>& b) {
  for (int x : a)
    if (b.count(x)) return true;
  return false;
}

class Planner {
 public:
  explicit Planner(Phase& phase) : phase_(phase) {}

  void add(int index, const std::vector<Statement>& step) {
    const StepReads reads = reads_of(step);
    if (intersects(reads.row_scalars, pending_) || intersects(reads.product_vectors, dirty_)) close();
    std::set<int> scalar_targets;
    bool has_scalars = false;
    for (const auto& s : step)
      if (s.target()->kind == NodeKind::device_scalar) {
        scalar_targets.insert(s.target()->index);
        has_scalars = true;
      }
    SegmentItem item;
    item.step = index;
    // Deferred: the step sums a reduction, reads a scalar known only after the barrier, or
    // would overtake (write or read) a scalar of a statement already deferred.
    const bool defer =
        has_scalars && (!reads.reductions.empty() || intersects(reads.scalars, pending_) ||
                        intersects(scalar_targets, deferred_reads_) || intersects(scalar_targets, pending_));
    item.scalars_in_place = !defer;
    for (const auto& r : reads.reductions) {
      if (item.slot_of.count(r.get())) continue;  // the same node twice in one step
      const int slot = static_cast<int>(phase_.reductions.size());
      phase_.reductions.push_back({r, index});
      item.slot_of[r.get()] = slot;
      item.reductions.push_back(slot);
      current_.reductions.push_back(slot);
    }
    product_read_.insert(reads.product_vectors.begin(), reads.product_vectors.end());
    for (const auto& s : step)
      if (s.target()->kind == NodeKind::vector) {
        const int v = s.target()->index;
        if (product_read_.count(v)) current_.renamed.insert(v);
        dirty_.insert(v);
      }
    if (defer) {
      current_.deferred.push_back(index);
      pending_.insert(scalar_targets.begin(), scalar_targets.end());
      deferred_reads_.insert(reads.scalars.begin(), reads.scalars.end());
    }
    current_.body.push_back(std::move(item));
  }

  // The barrier: the segment ends, the partial sums are reduced, the deferred steps run.
  void close() {
    if (current_.body.empty()) return;
    phase_.segments.push_back(std::move(current_));
    current_ = Segment{};
    dirty_.clear();
    product_read_.clear();
    pending_.clear();
    deferred_reads_.clear();
  }

 private:
  Phase& phase_;
  Segment current_;
  std::set<int> dirty_, product_read_, pending_, deferred_reads_;
};

Phase plan_phase(const std::vector<std::vector<Statement>>& steps) {
  Phase phase;
  Planner planner(phase);
  for (std::size_t i = 0; i < steps.size(); ++i) planner.add(static_cast<int>(i), steps[i]);
  planner.close();
  return phase;
}

}  // namespace

ProgramPlan plan_program(const Program& program) {
  ProgramPlan plan;
  plan.setup = plan_phase(program.setup_steps());
  plan.iteration = plan_phase(program.loop_steps());
  return plan;
}

std::string describe(const Program& program, const ProgramPlan& plan) {
  auto phase_text = [](const Phase& phase, const std::vector<std::vector<Statement>>& steps) {
    std::string out;
    for (const auto& seg : phase.segments) {
      out += "[";
      for (std::size_t i = 0; i < seg.body.size(); ++i) {
        if (i) out += " | ";
        const auto& step = steps[std::size_t(seg.body[i].step)];
        for (std::size_t k = 0; k < step.size(); ++k) out += (k ? ", " : "") + statement_to_string(step[k]);
        if (!seg.body[i].scalars_in_place) out += " (after the barrier)";
      }
      out += "]";
      if (!seg.renamed.empty()) {
        out += " renamed:";
        for (int v : seg.renamed) out += " vec" + std::to_string(v);
      }
      out += "\n";
    }
    return out;
  };
  return "setup:\n" + phase_text(plan.setup, program.setup_steps()) + "iteration:\n" +
         phase_text(plan.iteration, program.loop_steps());
}

}  // namespace molaccel::linalg::program

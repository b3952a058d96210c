// The host executor of a planned program: segment by segment, and inside a segment row by row
// in order (every step of the segment for row 0, then for row 1, ...), which is what a GPU
// thread owning its rows does, one row at a time. A barrier the plan lacks (a product reading a
// vector written earlier in the segment) or a renaming it lacks (a vector overwritten while
// other rows still read it) gives wrong values here, which the tests compare with the
// statement-by-statement reference.
#include <cmath>

#include "linalg/backend.hpp"
#include "linalg/expression_util.hpp"
#include "linalg/program/program_cuda.hpp"
#include "linalg/program/program_plan.hpp"
#include "linalg/scalar_math.hpp"

namespace molaccel::linalg {

namespace {

class HostMachine {
 public:
  HostMachine(const Program& program, const ProgramInputs& inputs) : program_(program), a_(inputs.matrix) {
    const auto& symbols = program.symbols();
    const std::size_t n = program::checked_rows(program, inputs);
    rows_ = n;
    front_.resize(symbols.size());
    back_.resize(symbols.size());
    scalars_.assign(symbols.size(), 0.0);
    for (std::size_t i = 0; i < symbols.size(); ++i)
      if (symbols[i].kind == NodeKind::vector) front_[i].assign(n, 0.0);
    for (const auto& [name, values] : inputs.vectors) front_[std::size_t(program.index_of(name))] = values;
    for (const auto& [name, value] : inputs.scalars) scalars_[std::size_t(program.index_of(name))] = value;
  }

  void run(const program::Phase& phase, const std::vector<std::vector<Statement>>& steps) {
    for (const auto& seg : phase.segments) run_segment(phase, seg, steps);
  }

  double scalar_value(const NodePtr& n) {
    Context c;
    c.env = &scalars_;
    return eval(n, c);
  }

  ProgramResult finish(ProgramResult result) {
    const auto& symbols = program_.symbols();
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      if (symbols[i].kind == NodeKind::vector) result.vectors[symbols[i].name] = front_[i];
      if (symbols[i].kind == NodeKind::device_scalar) result.scalars[symbols[i].name] = scalars_[i];
    }
    return result;
  }

 private:
  struct Context {
    const std::vector<double>* env = nullptr;  // scalars
    std::size_t row = 0;
    bool row_wise = false;                       // vector leaves readable
    bool other_row = false;                      // inside a product: the front buffer
    const std::vector<char>* written = nullptr;  // renamed vectors written at this row
    const std::map<const ExpressionNode*, int>* slots = nullptr;
    const std::vector<double>* totals = nullptr;  // reduction totals (deferred steps)
    double placeholder = 0;
  };

  [[noreturn]] void fail(const std::string& message) const {
    throw Error("linalg program " + program_.name() + ": " + message, __FILE__, __LINE__);
  }

  double vector_at(int v, const Context& c) const {
    const bool back = !c.other_row && c.written && (*c.written)[std::size_t(v)];
    return (back ? back_ : front_)[std::size_t(v)][c.row];
  }

  double eval(const NodePtr& n, const Context& c) const {
    switch (n->kind) {
      case NodeKind::vector:
        if (!c.row_wise) fail("a vector read in a scalar expression");
        return vector_at(n->index, c);
      case NodeKind::device_scalar:
        return (*c.env)[std::size_t(n->index)];
      case NodeKind::constant:
        return n->constant;
      case NodeKind::placeholder:
        return c.placeholder;
      case NodeKind::negate:
        return -eval(n->children[0], c);
      case NodeKind::function:
        return apply_unary(n->name, eval(n->children[0], c));
      case NodeKind::modifier: {
        Context inner = c;
        inner.placeholder = eval(n->children[0], c);
        return eval(n->children[1], inner);
      }
      case NodeKind::matrix_product: {
        Context other = c;
        other.other_row = true;
        double sum = 0;
        for (auto k = a_->row_ptr[c.row]; k < a_->row_ptr[c.row + 1]; ++k) {
          other.row = std::size_t(a_->col_idx[std::size_t(k)]);
          sum += a_->values[std::size_t(k)] * eval(n->children[1], other);
        }
        return sum;
      }
      case NodeKind::inner_product:
      case NodeKind::norm_2: {
        if (!c.slots || !c.totals) fail("a reduction outside a deferred step");
        const double total = (*c.totals)[std::size_t(c.slots->at(n.get()))];
        return n->kind == NodeKind::norm_2 ? std::sqrt(total) : total;
      }
      default:
        break;
    }
    if (n->children.size() != 2) fail("unsupported node in " + infix(n));
    return apply_binary(*n, eval(n->children[0], c), eval(n->children[1], c));
  }

  void run_segment(const program::Phase& phase, const program::Segment& seg,
                   const std::vector<std::vector<Statement>>& steps) {
    std::vector<double> partials(phase.reductions.size(), 0.0);
    std::vector<char> written(front_.size(), 0);
    for (int v : seg.renamed) back_[std::size_t(v)].assign(rows_, 0.0);
    std::vector<double> env;
    std::vector<double> values;
    for (std::size_t row = 0; row < rows_; ++row) {
      env = scalars_;  // every row computes the in-place scalars alike (as every GPU thread does)
      std::fill(written.begin(), written.end(), 0);
      Context c;
      c.env = &env;
      c.row = row;
      c.row_wise = true;
      c.written = &written;
      for (const auto& item : seg.body) {
        const auto& step = steps[std::size_t(item.step)];
        // Every right-hand side and reduction operand first (simultaneous), then the stores.
        values.assign(step.size(), 0.0);
        for (std::size_t k = 0; k < step.size(); ++k) {
          const auto& s = step[k];
          if (s.target()->kind == NodeKind::vector || item.scalars_in_place) values[k] = eval(s.value(), c);
        }
        for (int slot : item.reductions) {
          const auto& node = phase.reductions[std::size_t(slot)].node;
          const double u = eval(node->children[0], c);
          partials[std::size_t(slot)] +=
              node->kind == NodeKind::norm_2 ? u * u : u * eval(node->children[1], c);
        }
        for (std::size_t k = 0; k < step.size(); ++k) {
          const auto& s = step[k];
          const int t = s.target()->index;
          if (s.target()->kind == NodeKind::vector) {
            const double old_value = vector_at(t, c);
            if (seg.renamed.count(t)) {
              back_[std::size_t(t)][row] = program::apply_assign(s.op(), old_value, values[k]);
              written[std::size_t(t)] = 1;
            } else {
              front_[std::size_t(t)][row] = program::apply_assign(s.op(), old_value, values[k]);
            }
          } else if (item.scalars_in_place) {
            env[std::size_t(t)] = program::apply_assign(s.op(), env[std::size_t(t)], values[k]);
          }
        }
      }
    }
    scalars_ = env;
    // The barrier: renamed buffers swap, the partial sums are final, the deferred steps run.
    for (int v : seg.renamed) std::swap(front_[std::size_t(v)], back_[std::size_t(v)]);
    for (const auto& item : seg.body) {
      if (item.scalars_in_place) continue;
      const auto& step = steps[std::size_t(item.step)];
      Context c;
      c.env = &scalars_;
      c.slots = &item.slot_of;
      c.totals = &partials;
      values.assign(step.size(), 0.0);
      for (std::size_t k = 0; k < step.size(); ++k)
        if (step[k].target()->kind == NodeKind::device_scalar) values[k] = eval(step[k].value(), c);
      for (std::size_t k = 0; k < step.size(); ++k)
        if (step[k].target()->kind == NodeKind::device_scalar) {
          auto& target = scalars_[std::size_t(step[k].target()->index)];
          target = program::apply_assign(step[k].op(), target, values[k]);
        }
    }
  }

  const Program& program_;
  const HostCsr<double>* a_;
  std::size_t rows_ = 0;
  std::vector<std::vector<double>> front_, back_;
  std::vector<double> scalars_;
};

}  // namespace

std::size_t program::checked_rows(const Program& program, const ProgramInputs& inputs) {
  auto fail = [&](const std::string& message) {
    throw Error("linalg program " + program.name() + ": " + message, __FILE__, __LINE__);
  };
  const auto& symbols = program.symbols();
  const HostCsr<double>* a = inputs.matrix;
  std::size_t n = a ? a->rows : 0;
  if (a && a->rows != a->cols) fail("the matrix is not square");
  for (const auto& [name, values] : inputs.vectors) {
    if (symbols[std::size_t(program.index_of(name))].kind != NodeKind::vector)
      fail("'" + name + "' is not a vector");
    if (n == 0) n = values.size();
    if (values.size() != n) fail(fmt::format("vector '{}' has {} elements, not {}", name, values.size(), n));
  }
  if (n == 0) fail("no rows (give the matrix or a vector)");
  for (const auto& [name, value] : inputs.scalars)
    if (symbols[std::size_t(program.index_of(name))].kind != NodeKind::device_scalar)
      fail("'" + name + "' is not a scalar");
  for (const auto& s : symbols)
    if (s.kind == NodeKind::csr_matrix && !a) fail("the matrix '" + s.name + "' is missing");
  return n;
}

const ProgramInputs& program::with_derived_inputs(const Program& program, const ProgramInputs& inputs,
                                                  ProgramInputs& storage) {
  const auto& symbols = program.symbols();
  auto given = [&](int symbol) { return inputs.vectors.count(symbols[std::size_t(symbol)].name) > 0; };
  bool missing = false;
  for (const auto& tp : program.transposed_products()) missing = missing || !given(tp.target);
  for (int d : program.inverse_diagonals()) missing = missing || !given(d);
  if (!missing) return inputs;
  const std::size_t n = checked_rows(program, inputs);
  if (!inputs.matrix)
    throw Error("linalg program " + program.name() + ": a vector derived from the matrix without the matrix",
                __FILE__, __LINE__);
  const HostCsr<double>& a = *inputs.matrix;
  storage = inputs;
  for (const auto& tp : program.transposed_products()) {
    if (given(tp.target)) continue;
    std::vector<double> out(n, 0.0);
    if (auto it = inputs.vectors.find(symbols[std::size_t(tp.source)].name); it != inputs.vectors.end())
      for (std::size_t r = 0; r < n; ++r)  // (A^T v)[c] += A[r][c] v[r]: a scatter over the rows
        for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k)
          out[std::size_t(a.col_idx[std::size_t(k)])] += a.values[std::size_t(k)] * it->second[r];
    storage.vectors[symbols[std::size_t(tp.target)].name] = std::move(out);
  }
  for (int d : program.inverse_diagonals())  // solve()'s Jacobi preconditioner
    if (!given(d)) storage.vectors[symbols[std::size_t(d)].name] = inverse_diagonal(a);
  return storage;
}

ProgramResult run_program_on_host(const Program& program, const ProgramInputs& inputs) {
  return program::run_planned_on_host(program, program::plan_program(program), inputs);
}

ProgramResult program::run_planned_on_host(const Program& program, const program::ProgramPlan& plan,
                                           const ProgramInputs& given) {
  ProgramInputs storage;
  const ProgramInputs& inputs = program::with_derived_inputs(program, given, storage);
  HostMachine machine(program, inputs);
  ProgramResult result;
  result.barriers_per_iteration = plan.barriers_per_iteration();
  machine.run(plan.setup, program.setup_steps());
  program::run_iterations(
      program, inputs.max_iterations, result, [&](const NodePtr& n) { return machine.scalar_value(n); },
      [&] { machine.run(plan.iteration, program.loop_steps()); });
  return machine.finish(std::move(result));
}

#ifndef MOLACCEL_HAVE_CUDA
ProgramResult run_program_on_gpu(const Program& program, const ProgramInputs&, int) {
  throw Error("linalg program " + program.name() + ": this build has no CUDA", __FILE__, __LINE__);
}
#endif

}  // namespace molaccel::linalg

#ifndef MOLACCEL_HAVE_CUDA
namespace molaccel::linalg::program {
ProgramResult run_shaped_on_gpu(const Program& program, const ProgramInputs&, KernelShape, int) {
  throw Error("linalg program " + program.name() + ": this build has no CUDA", __FILE__, __LINE__);
}
ProgramResult run_on_gpu(const Program& program, const ProgramInputs&, int, const KernelShape*,
                         const std::function<void(int)>&) {
  throw Error("linalg program " + program.name() + ": this build has no CUDA", __FILE__, __LINE__);
}
}  // namespace molaccel::linalg::program
#endif

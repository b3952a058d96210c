// run_program: a program on the resources' first worker, as one tile of the scheduler (a GPU
// that fails hands the run to a CPU worker where the resources have one).
//   GPU: the generated kernel of the whole solve (run_program_on_gpu).
//   CPU: every step as one CustomOperation, i.e. one fused, vectorised and threaded loop of the
//     expression generator's CPU backend over the rows. The step's statements keep their
//     simultaneous semantics: its vector statements and its scalar statements holding
//     reductions run as one operation whose scalar targets are stand-ins, copied into the
//     scalars after it; scalar statements without reductions, the stop tests and the monitors
//     are evaluated on the host (the scalars live in host memory).
#include <chrono>
#include <optional>

#include "linalg/program/program_cuda.hpp"
#include "linalg/program/program_plan.hpp"
#include "linalg/program/program_solve.hpp"
#include "linalg/scalar_math.hpp"
#include "molaccel/linalg_program.hpp"

namespace molaccel::linalg {

namespace {

bool holds_reduction(const NodePtr& n) {
  bool found = false;
  program::visit(n, [&](const NodePtr& m) { found = found || program::is_reduction(m); });
  return found;
}

template <class T>
class CpuRunner {
 public:
  // `n`: the rows checked_rows found (run_program checks the inputs once, before the tile).
  CpuRunner(const Program& program, const ProgramInputs& inputs, const Placement& where, std::size_t n)
      : program_(program), where_(where) {
    const auto& symbols = program.symbols();
    const HostCsr<double>* a = inputs.matrix;
    arrays_.resize(symbols.size());
    scalars_.assign(symbols.size(), 0.0);
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      if (symbols[i].kind == NodeKind::vector) {
        arrays_[i] = detail::Array(where, value_type_of<T>(), n);
        if (auto it = inputs.vectors.find(symbols[i].name); it != inputs.vectors.end()) {
          const std::vector<T> converted(it->second.begin(), it->second.end());
          arrays_[i].upload(converted.data(), n);
        }
      } else if (symbols[i].kind == NodeKind::device_scalar) {
        arrays_[i] = detail::Array(where, value_type_of<T>(), 1);
        if (auto it = inputs.scalars.find(symbols[i].name); it != inputs.scalars.end())
          set_scalar(i, it->second);
      } else {
        matrix_ = CsrMatrix<T>(where, *a);
      }
    }
    for (const auto& step : program.setup_steps()) setup_.push_back(compile(step));
    for (const auto& step : program.loop_steps()) loop_.push_back(compile(step));
  }

  void run_setup() {
    for (auto& s : setup_) run(s);
  }
  void run_iteration() {
    for (auto& s : loop_) run(s);
  }
  double scalar_value(const NodePtr& n) const { return program::evaluate_scalar(n, scalars_); }
  int loops_per_iteration() const {
    int k = 0;
    for (const auto& s : loop_) k += s.operation ? 1 : 0;
    return k;
  }
  std::string cpu_variant() const {  // the instruction set the loops ran with ("avx2" ...)
    for (const auto* steps : {&loop_, &setup_})
      for (const auto& s : *steps)
        if (s.operation && !s.operation->last_cpu_variant().empty()) return s.operation->last_cpu_variant();
    return "?";
  }

  void finish(ProgramResult& result) const {
    const auto& symbols = program_.symbols();
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      if (symbols[i].kind == NodeKind::vector) {
        std::vector<T> v(arrays_[i].size());
        arrays_[i].download(v.data(), v.size());
        result.vectors[symbols[i].name].assign(v.begin(), v.end());
      } else if (symbols[i].kind == NodeKind::device_scalar) {
        result.scalars[symbols[i].name] = scalars_[i];
      }
    }
  }

 private:
  // An operand of a step's operation: a symbol or a stand-in for a scalar target.
  struct Operand {
    int symbol = -1;
    int stand_in = -1;
  };
  struct CompiledStep {
    std::optional<CustomOperation> operation;
    std::vector<Operand> operands;
    std::vector<std::pair<int, int>> committed;  // (stand-in, scalar symbol) after the operation
    std::vector<const Statement*> on_host;       // scalar statements without reductions
  };

  void set_scalar(std::size_t i, double value) {
    const T stored = static_cast<T>(value);
    arrays_[i].upload(&stored, 1);
    scalars_[i] = static_cast<double>(stored);
  }

  // The same tree with its leaves renumbered 0, 1, ... in order of first use (CustomOperation
  // takes contiguous operand numbers).
  NodePtr renumber(const NodePtr& n, std::map<int, int>& number, std::vector<Operand>& operands) {
    if (n->children.empty()) {
      if (n->index < 0 || n->kind == NodeKind::constant || n->kind == NodeKind::placeholder) return n;
      auto [it, fresh] = number.try_emplace(n->index, int(operands.size()));
      if (fresh) operands.push_back({n->index, -1});
      return detail::leaf(n->kind, n->type, it->second);
    }
    auto copy = std::make_shared<ExpressionNode>(*n);
    for (auto& c : copy->children) c = renumber(c, number, operands);
    return copy;
  }

  CompiledStep compile(const std::vector<Statement>& step) {
    CompiledStep out;
    std::map<int, int> number;
    std::vector<Statement> statements;
    for (const auto& s : step) {
      const bool scalar = s.target()->kind == NodeKind::device_scalar;
      if (scalar && !holds_reduction(s.value())) {
        out.on_host.push_back(&s);
        continue;
      }
      NodePtr value = renumber(s.value(), number, out.operands);
      NodePtr target;
      if (scalar) {
        // t = value, or t = s + value for s += value: the stand-in t is written, s only read.
        if (s.op() != AssignOp::assign) {
          auto sum = std::make_shared<ExpressionNode>();
          sum->kind = s.op() == AssignOp::add_assign ? NodeKind::add : NodeKind::subtract;
          sum->type = s.target()->type;
          sum->shape = Shape::scalar;
          sum->children = {renumber(s.target(), number, out.operands), value};
          value = sum;
        }
        const int slot = int(stand_ins_.size());
        stand_ins_.emplace_back(where_, value_type_of<T>(), 1);
        target = detail::leaf(NodeKind::device_scalar, s.target()->type, int(out.operands.size()));
        out.operands.push_back({-1, slot});
        out.committed.emplace_back(slot, s.target()->index);
        statements.emplace_back(target, AssignOp::assign, value);
      } else {
        target = renumber(s.target(), number, out.operands);
        statements.emplace_back(target, s.op(), value);
      }
    }
    if (!statements.empty()) out.operation.emplace(std::move(statements));
    return out;
  }

  Argument argument(const Operand& o) const {
    if (o.symbol >= 0 && program_.symbols()[std::size_t(o.symbol)].kind == NodeKind::csr_matrix)
      return Argument(matrix_);
    const detail::Array& array =
        o.symbol >= 0 ? arrays_[std::size_t(o.symbol)] : stand_ins_[std::size_t(o.stand_in)];
    const bool scalar =
        o.symbol < 0 || program_.symbols()[std::size_t(o.symbol)].kind == NodeKind::device_scalar;
    Argument a(0.0);
    a.what = scalar ? Argument::Kind::device_scalar : Argument::Kind::vector;
    a.type = value_type_of<T>();
    a.data = &array;
    a.rows = array.size();
    a.cols = 1;
    return a;
  }

  void run(CompiledStep& s) {
    // Every right-hand side reads the values from before the step: the host statements are
    // evaluated first, stored after the operation.
    std::vector<double> host_values;
    for (const Statement* st : s.on_host) host_values.push_back(scalar_value(st->value()));
    if (s.operation) {
      std::vector<Argument> args;
      for (const auto& o : s.operands) args.push_back(argument(o));
      s.operation->run(args);
      for (const auto& [slot, symbol] : s.committed) {
        T value{};
        stand_ins_[std::size_t(slot)].download(&value, 1);
        set_scalar(std::size_t(symbol), static_cast<double>(value));
      }
    }
    for (std::size_t k = 0; k < s.on_host.size(); ++k) {
      const auto i = std::size_t(s.on_host[k]->target()->index);
      set_scalar(i, program::apply_assign(s.on_host[k]->op(), scalars_[i], host_values[k]));
    }
  }

  const Program& program_;
  Placement where_;
  std::vector<detail::Array> arrays_;  // by symbol: vectors (n) and scalars (1)
  std::vector<double> scalars_;        // the scalars' values, as stored
  std::vector<detail::Array> stand_ins_;
  CsrMatrix<T> matrix_;
  std::vector<CompiledStep> setup_, loop_;
};

template <class T>
ProgramResult run_on_cpu(const Program& program, const ProgramInputs& inputs, const Placement& where,
                         std::size_t n, const std::function<void(int)>& progress) {
  CpuRunner<T> machine(program, inputs, where, n);
  ProgramResult result;
  result.barriers_per_iteration = program::plan_program(program).barriers_per_iteration();
  const auto start = std::chrono::steady_clock::now();
  machine.run_setup();
  program::run_iterations(
      program, inputs.max_iterations, result, [&](const NodePtr& n) { return machine.scalar_value(n); },
      [&, done = 0]() mutable {
        machine.run_iteration();
        if (progress) progress(++done);
      });
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.kernel = fmt::format("cpu/{} ({} threads): {} fused loops per iteration", machine.cpu_variant(),
                              where.cpu_threads, machine.loops_per_iteration());
  machine.finish(result);
  return result;
}

}  // namespace

ProgramResult run_program_on_worker(const WorkerInfo& worker, const Program& program,
                                    const ProgramInputs& given, const program::KernelShape* shape,
                                    const std::function<void(int)>& progress) {
  const std::size_t n = program::checked_rows(program, given);  // bad input: the caller's error
  ProgramInputs storage;
  const ProgramInputs& inputs = program::with_derived_inputs(program, given, storage);
  if (worker.kind == WorkerInfo::Kind::gpu)
    return program::run_on_gpu(program, inputs, worker.device, shape, progress);
  Placement where;
  where.cpu_threads = worker.cpu_threads;
  return program.type() == ValueType::f32 ? run_on_cpu<float>(program, inputs, where, n, progress)
                                          : run_on_cpu<double>(program, inputs, where, n, progress);
}

ProgramResult run_program(const Resources& resources, const Program& program, const ProgramInputs& inputs) {
  (void)program::checked_rows(program, inputs);  // bad input: the caller's error, before the tile
  ProgramResult result;
  JobOptions job;
  job.name = "program " + program.name();
  job.progress_bar = false;
  run_tiles(
      resources, 1,
      [&](WorkerContext& ctx, std::size_t) {
        IterationProgress progress(resources, job.name, inputs.max_iterations);
        result = run_program_on_worker(ctx.worker(), program, inputs, nullptr, progress.callback());
      },
      job);
  return result;
}

}  // namespace molaccel::linalg

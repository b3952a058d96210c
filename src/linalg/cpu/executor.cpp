// CPU backend: compiles each stage of a plan into a ChunkProgram and runs it over chunks of
// rows on the CPU threads. Reductions are summed per chunk and then in chunk order, so results
// do not depend on the thread count.
#include <cmath>
#include <cstring>
#include <functional>

#include "linalg/backend.hpp"
#include "linalg/cpu/program.hpp"
#include "linalg/expression_util.hpp"
#include "linalg/scalar_math.hpp"

namespace molaccel::linalg {

namespace {

const cpu::ChunkKernels& selected_kernels() {
  static const cpu::ChunkKernels k = [] {
    switch (cpu_info().simd) {
      case SimdLevel::avx512:
        return cpu::isa_avx512::kernels();
      case SimdLevel::avx2:
        return cpu::isa_avx2::kernels();
      default:
        return cpu::isa_scalar::kernels();
    }
  }();
  return k;
}

template <class T>
cpu::ChunkFunction<T> chunk_function_for() {
  if constexpr (std::is_same_v<T, float>)
    return selected_kernels().f32;
  else
    return selected_kernels().f64;
}

template <class T>
class CpuRunner {
 public:
  CpuRunner(const OperationPlan& plan, const std::vector<Argument>& args, const BoundShapes& shapes)
      : plan_(plan),
        args_(args),
        shapes_(shapes),
        results_(plan.reductions.size(), 0.0),
        temporaries_(plan.temporaries.size()) {
    threads_ = shapes.where.cpu_threads;
  }

  void run() {
    for (std::size_t s = 0; s < plan_.stages.size(); ++s) run_stage(plan_.stages[s], shapes_.stage_rows[s]);
  }

 private:
  // ---- scalar sub-expressions: evaluated once per stage, in T ----
  T scalar_value(const NodePtr& n, const T* x = nullptr) {
    switch (n->kind) {
      case NodeKind::constant:
        return T(n->constant);
      case NodeKind::host_scalar:
        return T(args_[n->index].host_value);
      case NodeKind::device_scalar:
        return *static_cast<const T*>(args_[n->index].data->data());
      case NodeKind::placeholder:
        return *x;
      case NodeKind::inner_product:
        return T(results_[plan_.slot_of(n)]);
      case NodeKind::norm_2:
        return T(std::sqrt(results_[plan_.slot_of(n)]));
      case NodeKind::negate:
        return -scalar_value(n->children[0], x);
      case NodeKind::modifier: {
        const T a = scalar_value(n->children[0], x);
        return scalar_value(n->children[1], &a);
      }
      case NodeKind::function:
        return apply_unary(n->name, scalar_value(n->children[0], x));
      default:
        break;
    }
    return apply_binary(*n, scalar_value(n->children[0], x), scalar_value(n->children[1], x));
  }

  // ---- vector sub-expressions: compiled to instructions ----
  int emit(cpu::ChunkProgram<T>& p, cpu::Instruction ins) {
    ins.dst = p.registers++;
    p.code.push_back(ins);
    return ins.dst;
  }

  // Address of a vector operand of a product: a leaf, or the expression materialised first.
  const T* vector_address(const NodePtr& n, std::vector<std::vector<T>>& keep) {
    if (n->kind == NodeKind::vector) return static_cast<const T*>(args_[n->index].data->data());
    if (n->kind == NodeKind::temporary) return temporaries_[n->index].data();
    const std::size_t len = vector_length(plan_, n, args_);
    keep.emplace_back(len);
    cpu::ChunkProgram<T> p;
    const int reg = compile(p, n, nullptr, keep);
    p.stores.push_back({reg, keep.back().data(), len});
    run_program(p, len, 0);
    return keep.back().data();
  }

  int compile(cpu::ChunkProgram<T>& p, const NodePtr& n, const int* x, std::vector<std::vector<T>>& keep) {
    if (n->shape == Shape::scalar) {
      cpu::Instruction ins;
      ins.op = cpu::Opcode::broadcast;
      ins.imm = double(scalar_value(n));
      return emit(p, ins);
    }
    cpu::Instruction ins;
    switch (n->kind) {
      case NodeKind::vector:
        ins.op = cpu::Opcode::load;
        ins.ptr = args_[n->index].data->data();
        ins.length = args_[n->index].rows;
        return emit(p, ins);
      case NodeKind::temporary:
        ins.op = cpu::Opcode::load;
        ins.ptr = temporaries_[n->index].data();
        ins.length = temporaries_[n->index].size();
        return emit(p, ins);
      case NodeKind::placeholder:
        return *x;
      case NodeKind::modifier: {
        const int arg = compile(p, n->children[0], x, keep);
        return compile(p, n->children[1], &arg, keep);
      }
      case NodeKind::matrix_product: {
        const auto& m = args_[n->children[0]->index];
        const T* v = vector_address(n->children[1], keep);
        if (m.what == Argument::Kind::csr_matrix) {
          ins.op = cpu::Opcode::csr_dot;
          ins.ptr = m.row_ptr->data();
          ins.ptr2 = m.col_idx->data();
          ins.ptr3 = m.data->data();
          ins.ptr4 = v;
        } else {
          ins.op = cpu::Opcode::dense_dot;
          ins.ptr = m.data->data();
          ins.ptr2 = v;
          ins.ld = m.ld;
          ins.cols = m.cols;
        }
        ins.length = m.rows;
        return emit(p, ins);
      }
      case NodeKind::negate:
      case NodeKind::function: {
        ins.a = compile(p, n->children[0], x, keep);
        if (n->kind == NodeKind::negate)
          ins.op = cpu::Opcode::negate;
        else
          ins.op = unary_opcode(n->name);
        return emit(p, ins);
      }
      default:
        break;
    }
    ins.a = compile(p, n->children[0], x, keep);
    ins.b = compile(p, n->children[1], x, keep);
    switch (n->kind) {
      case NodeKind::add:
        ins.op = cpu::Opcode::add;
        break;
      case NodeKind::subtract:
        ins.op = cpu::Opcode::subtract;
        break;
      case NodeKind::multiply:
      case NodeKind::element_product:
        ins.op = cpu::Opcode::multiply;
        break;
      case NodeKind::divide:
      case NodeKind::element_division:
        ins.op = cpu::Opcode::divide;
        break;
      default:
        ins.op = binary_opcode(n->name);
        break;
    }
    return emit(p, ins);
  }

  static cpu::Opcode unary_opcode(const std::string& f) {
    if (f == "exp") return cpu::Opcode::exp;
    if (f == "log") return cpu::Opcode::log;
    if (f == "sqrt") return cpu::Opcode::sqrt;
    if (f == "abs") return cpu::Opcode::abs;
    if (f == "sin") return cpu::Opcode::sin;
    if (f == "cos") return cpu::Opcode::cos;
    if (f == "tanh") return cpu::Opcode::tanh;
    return cpu::Opcode::nonzero;
  }
  static cpu::Opcode binary_opcode(const std::string& f) {
    if (f == "max") return cpu::Opcode::max;
    if (f == "min") return cpu::Opcode::min;
    if (f == "pow") return cpu::Opcode::pow;
    if (f == "safe_div") return cpu::Opcode::safe_div;
    return cpu::Opcode::greater;
  }

  // Runs a program over `rows` rows; returns per-slot sums in chunk order.
  std::vector<double> run_program(const cpu::ChunkProgram<T>& p, std::size_t rows, std::size_t slots) {
    const std::size_t n_chunks = (rows + cpu::chunk_rows - 1) / cpu::chunk_rows;
    std::vector<double> partials(n_chunks * std::max<std::size_t>(slots, 1), 0.0);
    const auto fn = chunk_function_for<T>();
    const std::size_t width = std::max<std::size_t>(slots, 1);
    auto body = [&](std::size_t c0, std::size_t c1) {
      thread_local std::vector<T> registers;
      registers.resize(std::max(1, p.registers) * cpu::batch);
      for (std::size_t c = c0; c < c1; ++c)
        fn(p, c * cpu::chunk_rows, std::min(rows, (c + 1) * cpu::chunk_rows), partials.data() + c * width,
           registers.data());
    };
    // parallel_for starts its threads per call (tens of microseconds): below 8 chunks (65,536
    // rows) one thread finishes sooner.
    if (n_chunks < 8)
      body(0, n_chunks);
    else
      parallel_for(n_chunks, threads_, 1, body);
    std::vector<double> sums(slots, 0.0);
    for (std::size_t c = 0; c < n_chunks; ++c)
      for (std::size_t s = 0; s < slots; ++s) sums[s] += partials[c * width + s];
    return sums;
  }

  void run_stage(const PlanStage& st, std::size_t rows) {
    cpu::ChunkProgram<T> p;
    std::vector<std::vector<T>> keep;  // materialised product operands of this stage
    if (st.what == PlanStage::Kind::reduction) {
      for (int slot : st.reductions) {
        const auto& node = plan_.reductions[slot].node;
        typename cpu::ChunkProgram<T>::Reduction r;
        r.a = compile(p, node->children[0], nullptr, keep);
        r.b = node->kind == NodeKind::norm_2 ? r.a : compile(p, node->children[1], nullptr, keep);
        r.length = shapes_.reduction_length[slot];
        r.slot = slot;
        p.reductions.push_back(r);
      }
      // Slots are global; partial sums are kept for every slot, filled only for this stage's.
      const auto sums = run_program(p, rows, plan_.reductions.size());
      for (int slot : st.reductions) results_[slot] = sums[slot];
      return;
    }
    if (st.what == PlanStage::Kind::temporaries) {
      for (int t : st.temporaries) temporaries_[t].assign(shapes_.temporary_length[t], T(0));
      for (int t : st.temporaries) {
        const int reg = compile(p, plan_.temporaries[t].operand, nullptr, keep);
        p.stores.push_back({reg, temporaries_[t].data(), temporaries_[t].size()});
      }
      run_program(p, rows, 0);
      return;
    }
    // Final stage: scalar targets from the values before the operation, then every vector
    // right-hand side of a batch into registers before the first store.
    std::vector<T> scalar_results;
    for (auto& a : st.scalar_assignments) scalar_results.push_back(scalar_value(a.value));
    for (auto& a : st.vector_assignments) {
      const int reg = compile(p, a.value, nullptr, keep);
      p.stores.push_back(
          {reg, static_cast<T*>(args_[a.target->index].data->data()), args_[a.target->index].rows});
    }
    if (!p.stores.empty()) run_program(p, rows, 0);
    for (std::size_t k = 0; k < st.scalar_assignments.size(); ++k)
      *static_cast<T*>(args_[st.scalar_assignments[k].target->index].data->data()) = scalar_results[k];
  }

  const OperationPlan& plan_;
  const std::vector<Argument>& args_;
  const BoundShapes& shapes_;
  std::vector<double> results_;              // reduction values (norms squared until read)
  std::vector<std::vector<T>> temporaries_;  // materialised operands of the temporaries stage
  int threads_ = 0;
};

}  // namespace

std::string cpu_execute(const OperationPlan& plan, const std::vector<Argument>& args,
                        const BoundShapes& shapes) {
  if (plan.type == ValueType::f32)
    CpuRunner<float>(plan, args, shapes).run();
  else
    CpuRunner<double>(plan, args, shapes).run();
  return selected_kernels().isa;
}

}  // namespace molaccel::linalg

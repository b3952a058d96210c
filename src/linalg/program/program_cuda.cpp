// Emission of a planned program: one persistent kernel per solve, in the generator's two
// dialects (codegen/codegen.hpp: CUDA for NVRTC, OpenCL C for program_opencl.cpp). Every thread
// walks its rows (row = global thread id, stride = grid size) through each segment; a segment
// ends with block sums of its reductions, the grid barrier (an arrival counter), and the totals
// summed by every block in the same order (so every thread holds the same bits); the deferred
// scalar statements, the stop tests and the monitors then run in every thread alike. The
// dialects differ in the helper blocks (block sums, grid total, grid barrier: CUDA's below,
// OpenCL's in program_opencl.cpp), the load of a value written by another block, and the
// spellings of the Dialect table.
//
// Plain C++ (no CUDA headers): CI compiles the generated source with NVRTC without a GPU.
#include <cctype>
#include <cmath>

#include "linalg/codegen/codegen.hpp"
#include "linalg/expression_util.hpp"
#include "linalg/program/program_cuda.hpp"

namespace molaccel::linalg::program {

namespace {

// The building blocks shared with the hand-written kernels (linalg/cuda/grid_blocks.cuh, as
// text), then the program kernels' own (no includes: NVRTC compiles the source alone).
#define MOLACCEL_GRID_BLOCKS(...) #__VA_ARGS__
constexpr const char* kSharedBlocks =
#include "linalg/cuda/grid_blocks.cuh"
    ;
#undef MOLACCEL_GRID_BLOCKS

constexpr const char* kBlocks = R"(
// Block sum of v, written by thread 0 to *out (warps' sums added in warp order).
__device__ __forceinline__ void mp_block_sum(double v, double* out) {
  __shared__ double warp_part[32];
  v = molaccel_warp_sum(v);
  if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) s += warp_part[w];
    *out = s;
  }
  __syncthreads();
}
// Sum of the blocks' partials (after the barrier), by the first warp of every block in the same
// order (every block gets the same bits), handed to the block's threads in shared memory.
__device__ __forceinline__ double mp_grid_total(const double* partials) {
  __shared__ double total;
  if (threadIdx.x < 32) {
    double s = 0.0;
    for (int b = (int)threadIdx.x; b < (int)gridDim.x; b += 32) s += __ldcg(partials + b);
    s = molaccel_warp_sum(s);
    if (threadIdx.x == 0) total = s;
  }
  __syncthreads();
  const double t = total;
  __syncthreads();
  return t;
}
__device__ __forceinline__ double mp_safe_div(double a, double b) {
  return b == 0.0 ? 0.0 : a / b;
}
)";

std::string literal(double v) {
  if (std::isinf(v)) return v > 0 ? "(1.0/0.0)" : "(-1.0/0.0)";
  std::string s = fmt::format("{:.17g}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return "(" + s + ")";
}

class Emitter {
 public:
  Emitter(const Program& program, const ProgramPlan& plan, const Dialect& dialect, std::string helpers)
      : program_(program), plan_(plan), d_(dialect), helpers_(std::move(helpers)) {
    for (std::size_t i = 0; i < program.symbols().size(); ++i)
      if (program.symbols()[i].kind == NodeKind::vector) vector_ordinal_[int(i)] = vectors_++;
    slots_ = std::max(plan.setup.reductions.size(), plan.iteration.reductions.size());
  }

  std::string source() {
    const std::string t = program_.type() == ValueType::f32 ? "float" : "double";
    std::string s = "// molaccel linalg program " + program_.name() + ": one persistent " +
                    (d_.opencl ? "kernel (OpenCL C).\n" : "cooperative kernel.\n");
    if (d_.opencl) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    s += "typedef " + t + " T;\n";
    s += helpers_;
    const std::string g = d_.global, r = d_.restrict_, i64 = d_.int64;
    s += fmt::format(
        "\n{0} {1}({2}const int* {3} row_ptr, {2}const int* {3} col_idx, {2}const T* {3} values,\n"
        "    {4} n, {2}T* vectors, {2}double* scalars, {2}double* partials, {5},\n"
        "    {2}double* monitors, {2}{4}* outcome, int max_iterations) {{\n",
        d_.kernel, kernel_name(program_), g, r, i64,
        d_.opencl ? "volatile __global int* counter" : "unsigned long long* counter");
    if (d_.opencl)
      s += fmt::format("  __local double scratch[{}];  // block sums (mp_block_sums)\n",
                       272 * max_segment_reductions());
    s += fmt::format("  const {0} first_row = ({0}){1} * {2} + {3};\n", i64, d_.block, d_.block_size,
                     d_.thread);
    s += fmt::format("  const {0} row_stride = ({0}){1} * {2};\n", i64, d_.blocks, d_.block_size);
    s += fmt::format("  const bool leader = {} == 0 && {} == 0;\n", d_.block, d_.thread);
    s += fmt::format("  const {} slots = {};\n", i64, std::max<std::size_t>(1, slots_));
    if (!d_.opencl) s += "  int epoch = 0;\n";
    for (std::size_t i = 0; i < program_.symbols().size(); ++i) {
      const auto kind = program_.symbols()[i].kind;
      if (kind == NodeKind::device_scalar) s += fmt::format("  double s{0} = scalars[{0}];\n", i);
      if (kind == NodeKind::vector) s += fmt::format("  int par{} = 0;\n", i);
    }
    s += "  // ---- setup ----\n";
    for (std::size_t k = 0; k < plan_.setup.segments.size(); ++k)
      s += segment(plan_.setup, plan_.setup.segments[k], program_.setup_steps(), fmt::format("{}", k));
    s += fmt::format("  {0} it = 0;\n  {0} status = 0;\n  for (;; ++it) {{\n", i64);
    const std::size_t m = program_.monitors().size();
    for (std::size_t i = 0; i < m; ++i)
      s += fmt::format("    if (leader) monitors[it * {} + {}] = {};\n", m, i,
                       scalar_expr(program_.monitors()[i].node()));
    for (std::size_t i = 0; i < program_.stop_tests().size(); ++i)
      s += fmt::format("    if (status == 0 && ({}) != 0.0) status = {};\n",
                       scalar_expr(program_.stop_tests()[i].condition.node()), i + 1);
    s += "    if (status == 0 && it >= max_iterations) status = -1;\n    if (status != 0) break;\n";
    for (std::size_t k = 0; k < plan_.iteration.segments.size(); ++k)
      s += segment(plan_.iteration, plan_.iteration.segments[k], program_.loop_steps(),
                   fmt::format("({} + it * {} + {})", plan_.setup.segments.size(),
                               plan_.iteration.segments.size(), k));
    s += "  }\n  if (leader) {\n    outcome[0] = it;\n    outcome[1] = status;\n";
    for (std::size_t i = 0; i < program_.symbols().size(); ++i) {
      const auto kind = program_.symbols()[i].kind;
      if (kind == NodeKind::device_scalar) s += fmt::format("    scalars[{0}] = s{0};\n", i);
      if (kind == NodeKind::vector)
        s += fmt::format("    outcome[2 + {}] = par{};\n", vector_ordinal_.at(int(i)), i);
    }
    s += "  }\n}\n";
    return s;
  }

 private:
  // Scalar expression over the registers (stop tests, monitors, deferred statements).
  std::string scalar_expr(const NodePtr& n,
                          const std::map<const ExpressionNode*, std::string>* totals = nullptr) {
    Context c;
    c.totals = totals;
    std::string pre;
    return expr(n, c, pre);
  }

  struct Context {
    bool row_wise = false;
    bool other_row = false;  // inside a product: at `col`, front buffers
    std::string col;
    const std::set<int>* written_renamed = nullptr;
    const std::set<int>* renamed = nullptr;
    const std::map<int, std::string>* scalar_names = nullptr;
    const std::map<const ExpressionNode*, std::string>* totals = nullptr;
    std::map<std::string, std::string>* row_values = nullptr;  // buffer -> this row's value, loaded or stored
    std::string placeholder;
  };

  static std::string buffer_of(int v, const Context& c) {
    const bool back = !c.other_row && c.renamed && c.renamed->count(v) && c.written_renamed->count(v);
    return fmt::format("v{}_{}", v, back ? "b" : "f");
  }

  // A vector's value: at another row a load through L2 (written by other threads before the
  // barrier); at this row a register, loaded once per row or kept from this thread's store.
  std::string vector_ref(int v, const Context& c, std::string& pre) {
    const std::string buffer = buffer_of(v, c);
    if (c.other_row) return fmt::format("(double){}({} + {})", load(), buffer, c.col);
    MOLACCEL_EXPECTS(c.row_values != nullptr, "program emission: a vector in a scalar expression");
    if (auto it = c.row_values->find(buffer); it != c.row_values->end()) return it->second;
    const std::string name = fmt::format("l{}", temp_++);
    pre += fmt::format("      const double {} = (double){}({} + row);\n", name, load(), buffer);
    (*c.row_values)[buffer] = name;
    return name;
  }

  std::string expr(const NodePtr& n, const Context& c, std::string& pre) {
    auto kid = [&](std::size_t i) { return expr(n->children[i], c, pre); };
    switch (n->kind) {
      case NodeKind::vector:
        return vector_ref(n->index, c, pre);
      case NodeKind::device_scalar:
        if (c.scalar_names)
          if (auto it = c.scalar_names->find(n->index); it != c.scalar_names->end()) return it->second;
        return fmt::format("s{}", n->index);
      case NodeKind::constant:
        return literal(n->constant);
      case NodeKind::placeholder:
        return c.placeholder;
      case NodeKind::negate:
        return "(-" + kid(0) + ")";
      case NodeKind::add:
        return "(" + kid(0) + " + " + kid(1) + ")";
      case NodeKind::subtract:
        return "(" + kid(0) + " - " + kid(1) + ")";
      case NodeKind::multiply:
      case NodeKind::element_product:
        return "(" + kid(0) + " * " + kid(1) + ")";
      case NodeKind::divide:
      case NodeKind::element_division:
        return "(" + kid(0) + " / " + kid(1) + ")";
      case NodeKind::function: {
        const std::string a = kid(0);
        if (n->name == "abs") return "fabs(" + a + ")";
        if (n->name == "nonzero") return "((" + a + ") != 0.0 ? 1.0 : 0.0)";
        return n->name + "(" + a + ")";
      }
      case NodeKind::binary_function: {
        const std::string a = kid(0), b = kid(1);
        if (n->name == "max") return "fmax(" + a + ", " + b + ")";
        if (n->name == "min") return "fmin(" + a + ", " + b + ")";
        if (n->name == "pow") return "pow(" + a + ", " + b + ")";
        if (n->name == "safe_div") return "mp_safe_div(" + a + ", " + b + ")";
        return "((" + a + ") > (" + b + ") ? 1.0 : 0.0)";
      }
      case NodeKind::modifier: {
        Context inner = c;
        inner.placeholder = kid(0);
        return expr(n->children[1], inner, pre);
      }
      case NodeKind::matrix_product: {
        const std::string name = fmt::format("pr{}", temp_++);
        Context other = c;
        other.other_row = true;
        other.col = name + "_c";
        std::string inner_pre;
        const std::string operand = expr(n->children[1], other, inner_pre);
        pre += fmt::format(
            "      double {0} = 0.0;\n      for (int {0}_k = row_ptr[row]; {0}_k < row_ptr[row + 1]; "
            "++{0}_k) {{\n"
            "        const int {0}_c = col_idx[{0}_k];\n{1}        {0} += (double)values[{0}_k] * {2};\n     "
            " }}\n",
            name, inner_pre, operand);
        return name;
      }
      case NodeKind::inner_product:
      case NodeKind::norm_2: {
        MOLACCEL_EXPECTS(c.totals && c.totals->count(n.get()),
                         "program emission: reduction outside its step");
        const std::string& total = c.totals->at(n.get());
        return n->kind == NodeKind::norm_2 ? "sqrt(" + total + ")" : total;
      }
      default:
        throw Error("program emission: unsupported node " + infix(n), __FILE__, __LINE__);
    }
  }

  // `barrier`: the number of grid barriers before this segment's (OpenCL: an expression of `it`).
  std::string segment(const Phase& phase, const Segment& seg,
                      const std::vector<std::vector<Statement>>& steps, const std::string& barrier) {
    std::string head, loop, tail;
    const int id = segment_id_++;
    head += fmt::format("  {{  // segment {}\n", id);
    // Buffers: front (read at other rows, and at this row before a renamed vector's write), back.
    std::set<int> used;
    for (const auto& item : seg.body)
      for (const auto& st : steps[std::size_t(item.step)]) {
        visit(st.target(), [&](const NodePtr& m) {
          if (m->kind == NodeKind::vector) used.insert(m->index);
        });
        visit(st.value(), [&](const NodePtr& m) {
          if (m->kind == NodeKind::vector) used.insert(m->index);
        });
      }
    for (int v : used) {
      const int o = vector_ordinal_.at(v);
      head += fmt::format("    {2}T* v{0}_f = vectors + (2{3} * {1} + par{0}) * n;\n", v, o, d_.global,
                          d_.int64_suffix);
      if (seg.renamed.count(v))
        head += fmt::format("    {2}T* v{0}_b = vectors + (2{3} * {1} + 1 - par{0}) * n;\n", v, o, d_.global,
                            d_.int64_suffix);
    }
    for (int slot : seg.reductions) head += fmt::format("    double acc{} = 0.0;\n", slot);
    std::map<int, std::string> names;  // scalar -> its current in-place value
    std::set<int> written;
    std::map<std::string, std::string> row_values;
    std::string row_code;
    for (const auto& item : seg.body) {
      const auto& step = steps[std::size_t(item.step)];
      Context c;
      c.row_values = &row_values;
      c.row_wise = true;
      c.renamed = &seg.renamed;
      c.written_renamed = &written;
      c.scalar_names = &names;
      std::string pre, stores;
      std::vector<std::pair<int, std::string>> new_scalars;
      std::vector<std::pair<std::string, std::string>> stored;  // buffer, value as stored
      for (std::size_t k = 0; k < step.size(); ++k) {
        const auto& st = step[k];
        const int t = st.target()->index;
        if (st.target()->kind == NodeKind::vector) {
          const std::string value = expr(st.value(), c, pre);
          const std::string tmp = fmt::format("x{}", temp_++);
          pre += fmt::format("      const double {} = {};\n", tmp, value);
          const std::string combined = st.op() == AssignOp::assign ? tmp
                                       : st.op() == AssignOp::add_assign
                                           ? vector_ref(t, c, pre) + " + " + tmp
                                           : vector_ref(t, c, pre) + " - " + tmp;
          const std::string buffer = fmt::format("v{}_{}", t, seg.renamed.count(t) ? "b" : "f");
          const std::string kept = fmt::format("k{}", temp_++);
          stores +=
              fmt::format("      const T {} = (T)({});\n      {}[row] = {};\n", kept, combined, buffer, kept);
          stored.push_back({buffer, "(double)" + kept});
        } else if (item.scalars_in_place) {
          std::string scalar_pre;
          const std::string value = expr(st.value(), c, scalar_pre);
          const std::string name = fmt::format("s{}_{}", t, temp_++);
          const std::string old = names.count(t) ? names.at(t) : fmt::format("s{}", t);
          const std::string combined = st.op() == AssignOp::assign       ? value
                                       : st.op() == AssignOp::add_assign ? old + " + " + value
                                                                         : old + " - " + value;
          head += fmt::format("    const double {} = {};\n", name, combined);
          new_scalars.push_back({t, name});
        }
      }
      for (std::size_t r = 0; r < item.reductions.size(); ++r) {
        const auto& node = phase.reductions[std::size_t(item.reductions[r])].node;
        const std::string a = expr(node->children[0], c, pre);
        const std::string contribution = node->kind == NodeKind::norm_2
                                             ? fmt::format("{0} * {0}", a)
                                             : a + " * " + expr(node->children[1], c, pre);
        pre += fmt::format("      acc{} += {};\n", item.reductions[r], contribution);
      }
      row_code += pre + stores;
      for (const auto& st : step)
        if (st.target()->kind == NodeKind::vector && seg.renamed.count(st.target()->index))
          written.insert(st.target()->index);
      for (auto& [t, name] : new_scalars) names[t] = name;
      for (auto& [buffer, value] : stored) row_values[buffer] = value;
    }
    loop += fmt::format("    for ({} row = first_row; row < n; row += row_stride) {{\n", d_.int64) +
            row_code + "    }\n";
    for (auto& [t, name] : names) tail += fmt::format("    s{} = {};\n", t, name);
    // The barrier: block sums, the counter, the totals; renamed buffers swap.
    // The half of the partials array this barrier uses: CUDA counts barriers in `epoch`; OpenCL
    // derives the count from the segment's place and `it` (PoCL's kernel compiler miscompiled a
    // counter incremented between work-group barriers inside the loop: the partial sums were
    // written to one half and read from the other).
    const std::string half =
        d_.opencl ? fmt::format("partials + (long)({} & 1) * slots * get_num_groups(0)", barrier)
                  : "partials + (long long)(epoch & 1) * slots * gridDim.x";
    if (d_.opencl) {
      tail += opencl_barrier(seg, id, half);
    } else {
      for (int slot : seg.reductions)
        tail += fmt::format("    mp_block_sum(acc{0}, {1} + {0}LL * gridDim.x + blockIdx.x);\n", slot, half);
      tail += "    molaccel_grid_barrier(counter);\n";
      for (int slot : seg.reductions)
        tail += fmt::format("    const double tot{0}_{1} = mp_grid_total({2} + {0}LL * gridDim.x);\n", slot,
                            id, half);
    }
    std::map<const ExpressionNode*, std::string> totals;
    if (!d_.opencl) tail += "    ++epoch;\n";
    for (int v : seg.renamed) tail += fmt::format("    par{0} ^= 1;\n", v);
    for (const auto& item : seg.body) {
      if (item.scalars_in_place) continue;
      totals.clear();
      for (auto& [node, slot] : item.slot_of) totals[node] = fmt::format("tot{}_{}", slot, id);
      const auto& step = steps[std::size_t(item.step)];
      std::vector<std::pair<int, std::string>> values;
      for (const auto& st : step) {
        if (st.target()->kind != NodeKind::device_scalar) continue;
        const int t = st.target()->index;
        const std::string value = scalar_expr(st.value(), &totals);
        const std::string name = fmt::format("d{}", temp_++);
        const std::string combined = st.op() == AssignOp::assign       ? value
                                     : st.op() == AssignOp::add_assign ? fmt::format("s{} + {}", t, value)
                                                                       : fmt::format("s{} - {}", t, value);
        tail += fmt::format("    const double {} = {};\n", name, combined);
        values.push_back({t, name});
      }
      for (auto& [t, name] : values) tail += fmt::format("    s{} = {};\n", t, name);
    }
    return head + loop + tail + "  }\n";
  }

  // OpenCL: the segment's reductions summed together (mp_block_sums: every value in local memory,
  // sums of 16, two work-group barriers for all of them; mp_total adds the 16), the barrier, the
  // totals the same way from the work-groups' partials. The totals are read into registers
  // before local memory is written again: the next write is after a work-group barrier.
  std::string opencl_barrier(const Segment& seg, int id, const std::string& half) const {
    std::string out;
    const std::size_t k = seg.reductions.size(), kmax = max_segment_reductions();
    for (std::size_t r = 0; r < k; ++r)
      out += fmt::format("    scratch[{} * 256 + get_local_id(0)] = acc{};\n", r, seg.reductions[r]);
    if (k)
      out += fmt::format("    mp_block_sums(scratch, {}, {});\n    if (get_local_id(0) == 0) {{\n", k, kmax);
    for (std::size_t r = 0; r < k; ++r)
      out +=
          fmt::format("      ({})[{}L * get_num_groups(0) + get_group_id(0)] = mp_total(scratch, {}, {});\n",
                      half, seg.reductions[r], r, kmax);
    if (k) out += "    }\n";
    out += "    mp_grid_barrier(counter);\n";
    for (std::size_t r = 0; r < k; ++r)
      out += fmt::format(
          "    scratch[{} * 256 + get_local_id(0)] = mp_partials_sum({} + {}L * get_num_groups(0));\n", r,
          half, seg.reductions[r]);
    if (k) out += fmt::format("    mp_block_sums(scratch, {}, {});\n", k, kmax);
    for (std::size_t r = 0; r < k; ++r)
      out += fmt::format("    const double tot{}_{} = mp_total(scratch, {}, {});\n", seg.reductions[r], id, r,
                         kmax);
    return out;
  }

  std::size_t max_segment_reductions() const {
    std::size_t k = 1;
    for (const Phase* phase : {&plan_.setup, &plan_.iteration})
      for (const auto& seg : phase->segments) k = std::max(k, seg.reductions.size());
    return k;
  }

  // The load of a vector element that another block may have written before the barrier.
  const char* load() const { return d_.opencl ? "mp_load" : "__ldcg"; }

  const Program& program_;
  const ProgramPlan& plan_;
  const Dialect& d_;
  std::string helpers_;
  std::map<int, int> vector_ordinal_;
  int vectors_ = 0;
  std::size_t slots_ = 0;
  int temp_ = 0, segment_id_ = 0;
};

}  // namespace

std::string kernel_name(const Program& program) {
  std::string out = "molaccel_program_";
  for (char ch : program.name()) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

std::string generate_program(const Program& program, const ProgramPlan& plan, const Dialect& dialect,
                             std::string helpers) {
  return Emitter(program, plan, dialect, std::move(helpers)).source();
}

std::string generate_program_cuda(const Program& program, const ProgramPlan& plan) {
  return generate_program(program, plan, cuda_dialect,
                          std::string("// linalg/cuda/grid_blocks.cuh\n") + kSharedBlocks + "\n" + kBlocks);
}

}  // namespace molaccel::linalg::program

namespace molaccel::linalg {
std::string program_cuda_source(const Program& program) {
  return program::generate_program_cuda(program, program::plan_program(program));
}
}  // namespace molaccel::linalg

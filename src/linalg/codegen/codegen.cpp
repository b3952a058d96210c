// The kernel generator: one kernel per plan stage, written to be read (named after the
// expression, one line per token), in two dialects from the same code: CUDA C++ (NVRTC) and
// OpenCL C. Plain C++ with no CUDA or OpenCL dependency, so CPU-only builds and CI can generate
// every kernel.
//
// Every difference between the dialects lives in `Dialect` and in the two helper blocks
// (reductions: warp shuffles in CUDA, local memory in OpenCL). OpenCL C has no functional casts,
// so its preamble defines T(x) as a macro next to the type T (a macro is not expanded inside its
// own expansion, so `T(0)` reads the same in both dialects).
//
// CUDA kernel parameters are all 8 bytes wide (pointers, long long, double: host scalars arrive as
// double and are converted to T), so the launcher marshals them without knowing T. OpenCL host
// scalars arrive as T (a float kernel must not need fp64), and a device scalar is a buffer and an
// element offset (an element of a solver's history array).
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "linalg/backend.hpp"
#include "linalg/codegen/codegen.hpp"
#include "linalg/expression_util.hpp"

namespace molaccel::linalg {

const Dialect cuda_dialect{false,
                           "__device__ __forceinline__ ",
                           "",
                           "long long",
                           "threadIdx.x",
                           "blockIdx.x",
                           "blockDim.x",
                           "gridDim.x",
                           "extern \"C\" __global__ void __launch_bounds__(256)",
                           "__shared__ T scratch[32];  // block sums",
                           "__restrict__",
                           "LL"};
const Dialect opencl_dialect{true,
                             "",  // plain definitions: OpenCL C's `inline` has C99 semantics
                             "__global ",
                             "long",
                             "get_local_id(0)",
                             "get_group_id(0)",
                             "get_local_size(0)",
                             "get_num_groups(0)",
                             "__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void",
                             "__local T scratch[256];  // block sums and row-group sums",
                             "restrict",
                             "L"};

namespace {

bool is_reduction(const NodePtr& n) {
  return n->kind == NodeKind::inner_product || n->kind == NodeKind::norm_2;
}

std::string literal(double v, ValueType t) {
  std::string s = fmt::format("{:.17g}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return t == ValueType::f32 ? "T(" + s + "f)" : "T(" + s + ")";
}

class Generator {
 public:
  Generator(const OperationPlan& plan, int group, const Dialect& d) : plan_(plan), group_(group), d_(d) {}

  std::string source() {
    std::ostringstream out;
    out << "// molaccel linalg: generated kernels for\n";
    for (auto& s : plan_.statements) out << "//   " << statement_to_string(s) << "\n";
    out << "// (MOLACCEL_DUMP_KERNELS=dir writes this file; regenerated at run time.)\n";
    out << preamble(plan_.type, group_, d_);
    out << definitions();
    return out.str();
  }

  // Modifiers and stages of this plan: one kernel per stage.
  std::string definitions() {
    std::ostringstream out;
    collect_modifiers();
    for (auto& [name, def] : modifier_defs_) out << def << "\n";
    for (std::size_t s = 0; s < plan_.stages.size(); ++s) out << kernel(plan_.stages[s]) << "\n";
    return out.str();
  }

  // One 8-byte kernel parameter.
  struct Word {
    std::string type, name;
  };

  // Parameter list shared by every stage of the operation (n_rows last).
  std::vector<Word> parameter_words() const {
    std::vector<Word> p;
    const std::string i64 = d_.int64;
    for (std::size_t i = 0; i < plan_.operands.size(); ++i) {
      const auto& op = plan_.operands[i];
      switch (op.kind) {
        case NodeKind::vector:
          p.push_back({op.written ? "T*" : "const T*", fmt::format("vec{}", i)});
          p.push_back({i64, fmt::format("size_vec{}", i)});
          break;
        case NodeKind::dense_matrix:
          p.push_back({"const T*", fmt::format("mat{}", i)});
          for (auto n : {"rows_mat", "cols_mat", "ld_mat"}) p.push_back({i64, fmt::format("{}{}", n, i)});
          break;
        case NodeKind::csr_matrix:
          p.push_back({"const int*", fmt::format("csr{}_row", i)});
          p.push_back({"const int*", fmt::format("csr{}_col", i)});
          p.push_back({"const T*", fmt::format("csr{}_val", i)});
          p.push_back({i64, fmt::format("rows_csr{}", i)});
          p.push_back({i64, fmt::format("cols_csr{}", i)});
          break;
        case NodeKind::host_scalar:
          p.push_back({d_.opencl ? "T" : "double", fmt::format("scal{}_arg", i)});
          break;
        case NodeKind::device_scalar:
          if (d_.opencl) {
            p.push_back({"T*", fmt::format("gscal{}_base", i)});
            p.push_back({i64, fmt::format("gscal{}_offset", i)});
          } else {
            p.push_back({"T*", fmt::format("gscal{}", i)});
          }
          break;
        default:
          break;
      }
    }
    for (std::size_t t = 0; t < plan_.temporaries.size(); ++t) {
      p.push_back({"T*", fmt::format("tmp{}", t)});
      p.push_back({i64, fmt::format("size_tmp{}", t)});
    }
    for (std::size_t r = 0; r < plan_.reductions.size(); ++r) {
      p.push_back({i64, fmt::format("len_red{}", r)});
      p.push_back({i64, fmt::format("parts_red{}", r)});
    }
    p.push_back({"T*", "partials"});
    p.push_back({i64, "partial_stride"});
    p.push_back({i64, "n_rows"});
    return p;
  }

  static std::string preamble(ValueType type, int group, const Dialect& d) {
    std::string out;
    if (d.opencl && type == ValueType::f64) out += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    out += fmt::format("typedef {} T;\n", type == ValueType::f64 ? "double" : "float");
    if (d.opencl) out += "#define T(x) ((T)(x))  // the functional cast of the CUDA dialect\n";
    out += fmt::format("#define GROUP {}  // threads that share one row of a matrix product\n", group);
    out += d.opencl ? "#define RESTRICT restrict\n\n" : "#define RESTRICT __restrict__\n\n";
    out += d.opencl ? opencl_helpers() : cuda_helpers();
    return out;
  }

 private:
  // Element-wise helpers shared by both dialects.
  static std::string common_helpers(const Dialect& d) {
    return fmt::format(
        "{0}T safe_div(T a, T b) {{ return b == T(0) ? T(0) : a / b; }}\n"
        "{0}T greater(T a, T b) {{ return a > b ? T(1) : T(0); }}\n"
        "{0}T nonzero(T a) {{ return a != T(0) ? T(1) : T(0); }}\n",
        d.function);
  }

  // OpenCL 1.2 has no shuffles: row groups and blocks sum through local memory. Every work-item
  // of the work-group calls these (the row loop has the same trip count for all of them).
  static std::string opencl_helpers() {
    return common_helpers(opencl_dialect) + R"(
// Sum over the G consecutive work-items that share a row; lane 0 of each group gets it.
T group_sum(T v, int G, __local T* scratch) {
  const int id = (int)get_local_id(0), lane = id % G;
  barrier(CLK_LOCAL_MEM_FENCE);  // scratch may still be read by a previous call
  scratch[id] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int offset = G / 2; offset > 0; offset >>= 1) {
    if (lane < offset) scratch[id] += scratch[id + offset];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return scratch[id];
}

// Sum over the work-group (a power of two); every work-item gets the total.
T block_sum(T v, __local T* scratch) {
  const int id = (int)get_local_id(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  scratch[id] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int offset = (int)get_local_size(0) / 2; offset > 0; offset >>= 1) {
    if (id < offset) scratch[id] += scratch[id + offset];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return scratch[0];
}

// The final summation of an inner product (see the CUDA dialect).
T sum_partials(__global const T* RESTRICT partials, long count, __local T* scratch) {
  T v = T(0);
  for (long i = get_local_id(0); i < count; i += get_local_size(0)) v += partials[i];
  return block_sum(v, scratch);
}

)";
  }

  static std::string cuda_helpers() {
    return "#define FULL_MASK 0xffffffffu\n" + common_helpers(cuda_dialect) + R"(
// Sum over the G consecutive lanes that share a row (mask: those lanes).
template <int G>
__device__ __forceinline__ T group_sum(T v, unsigned mask) {
  for (int offset = G / 2; offset > 0; offset >>= 1) v += __shfl_down_sync(mask, v, offset, G);
  return v;
}

// Sum over the block; every thread gets the total. `scratch` holds one value per warp.
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(FULL_MASK, v, offset);
  __syncthreads();  // scratch may still be read by a previous call
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  T total = T(0);
  for (int w = 0; w < (int)(blockDim.x / 32); ++w) total += scratch[w];
  return total;
}

// The final summation of an inner product: the partial sums of the blocks of an earlier
// kernel, added up by every block of the consuming kernel (no extra launch).
__device__ __forceinline__ T sum_partials(const T* RESTRICT partials, long long count, T* scratch) {
  T v = T(0);
  for (long long i = threadIdx.x; i < count; i += blockDim.x) v += partials[i];
  return block_sum(v, scratch);
}

)";
  }

  void collect_modifiers() {
    std::function<void(const NodePtr&)> walk = [&](const NodePtr& n) {
      if (n->kind == NodeKind::modifier && !modifier_names_.count(n.get())) {
        const std::string key = structural_key(n->children[1]);
        auto it = modifier_by_body_.find(key);
        std::string fn;
        if (it != modifier_by_body_.end()) {
          fn = it->second;
        } else {
          fn = "modifier_" + n->name;  // prefixed: never clashes with the kernel's own names
          while (modifier_defs_.count(fn)) fn += "_";
          modifier_by_body_[key] = fn;
          modifier_defs_[fn] = fmt::format("// element-wise modifier {}(X)\n{}T {}(T X) {{ return {}; }}\n",
                                           n->name, d_.function, fn, code(n->children[1], "row"));
        }
        modifier_names_[n.get()] = fn;
      }
      for (auto& c : n->children) walk(c);
    };
    for (auto& s : plan_.stages) {
      for (auto& a : s.vector_assignments) walk(a.value);
      for (auto& a : s.scalar_assignments) walk(a.value);
    }
    for (auto& t : plan_.temporaries) walk(t.operand);
    for (auto& r : plan_.reductions) walk(r.node);
  }

  std::string parameters() const {
    std::string s;
    bool first = true;
    for (const auto& w : parameter_words()) {
      const bool pointer = w.type.back() == '*';
      s += (first ? "    " : ",\n    ") + (pointer ? d_.global : std::string()) + w.type +
           (pointer ? " RESTRICT " : " ") + w.name;
      first = false;
    }
    return s;
  }

  // Element expression at index `at` (a row, or a column inside a product).
  std::string code(const NodePtr& n, const std::string& at) {
    auto bin = [&](const char* op) {
      return "(" + code(n->children[0], at) + " " + op + " " + code(n->children[1], at) + ")";
    };
    switch (n->kind) {
      case NodeKind::vector:
        return fmt::format("vec{}[{}]", n->index, at);
      case NodeKind::temporary:
        return fmt::format("tmp{}[{}]", n->index, at);
      case NodeKind::host_scalar:
        return fmt::format("scal{}", n->index);
      case NodeKind::device_scalar:
        return fmt::format("gscal{}_value", n->index);
      case NodeKind::constant:
        return literal(n->constant, n->type);
      case NodeKind::placeholder:
        return "X";
      case NodeKind::negate:
        return "(-" + code(n->children[0], at) + ")";
      case NodeKind::add:
        return bin("+");
      case NodeKind::subtract:
        return bin("-");
      case NodeKind::multiply:
      case NodeKind::element_product:
        return bin("*");
      case NodeKind::divide:
      case NodeKind::element_division:
        return bin("/");
      case NodeKind::function:
        if (n->name == "abs") return "fabs(" + code(n->children[0], at) + ")";
        return n->name + "(" + code(n->children[0], at) + ")";
      case NodeKind::binary_function: {
        std::string f = n->name == "max" ? "fmax" : n->name == "min" ? "fmin" : n->name;
        return f + "(" + code(n->children[0], at) + ", " + code(n->children[1], at) + ")";
      }
      case NodeKind::modifier:
        return modifier_names_.at(n.get()) + "(" + code(n->children[0], at) + ")";
      case NodeKind::inner_product:
      case NodeKind::norm_2:
        return fmt::format("red{}", plan_.slot_of(n));
      case NodeKind::matrix_product:
        return products_.at(structural_key(n));
      default:
        break;
    }
    throw Error("linalg codegen: unexpected node", __FILE__, __LINE__);
  }

  // Products evaluated in this stage (outside reductions consumed from partials).
  void collect_stage_products(const NodePtr& n, int stage_level, std::vector<NodePtr>& out) {
    if (is_reduction(n) && plan_.reductions[plan_.slot_of(n)].level < stage_level) return;
    if (n->kind == NodeKind::matrix_product) {
      const std::string key = structural_key(n);
      if (!products_.count(key)) {
        products_[key] = fmt::format("prod{}", products_.size());
        out.push_back(n);
      }
      return;  // operands of products contain no products (the planner checks)
    }
    for (auto& c : n->children) collect_stage_products(c, stage_level, out);
  }

  std::string product_code(const NodePtr& n) {
    const std::string name = products_.at(structural_key(n));
    const auto& m = n->children[0];
    std::ostringstream o;
    o << "    T " << name << " = T(0);  // row of " << infix(n) << "\n";
    if (m->kind == NodeKind::dense_matrix) {
      o << fmt::format(
          "    if (row < rows_mat{0}) {{\n      {3}const T* RESTRICT a_row = mat{0} + row * ld_mat{0};\n"
          "      for ({4} j = lane; j < cols_mat{0}; j += G) {1} += a_row[j] * {2};\n    }}\n",
          m->index, name, code(n->children[1], "j"), d_.global, d_.int64);
    } else {
      o << fmt::format(
          "    if (row < rows_csr{0}) {{\n      const int end = csr{0}_row[row + 1];\n"
          "      for (int k = csr{0}_row[row] + lane; k < end; k += G) {{\n"
          "        const int j = csr{0}_col[k];\n        {1} += csr{0}_val[k] * {2};\n      }}\n    }}\n",
          m->index, name, code(n->children[1], "j"));
    }
    if (d_.opencl)
      o << "    if (G > 1) " << name << " = group_sum(" << name << ", G, scratch);\n";
    else
      o << "    if (G > 1) " << name << " = group_sum<G>(" << name << ", mask);\n";
    return o.str();
  }

  std::string kernel(const PlanStage& st) {
    products_.clear();
    std::vector<NodePtr> products;
    for (int slot : st.reductions)
      for (auto& c : plan_.reductions[slot].node->children) collect_stage_products(c, st.level, products);
    for (int t : st.temporaries) collect_stage_products(plan_.temporaries[t].operand, st.level, products);
    for (auto& a : st.vector_assignments) collect_stage_products(a.value, st.level, products);
    const bool grouped = !products.empty();

    std::ostringstream o;
    const char* role =
        st.what == PlanStage::Kind::reduction     ? "inner products, first pass (partial sums per block)"
        : st.what == PlanStage::Kind::temporaries ? "operands of products that read written vectors"
                                                  : "the assignments";
    o << "// " << st.kernel_name << ": " << role << "\n";
    o << d_.kernel << " " << st.kernel_name << "(\n" << parameters() << ")\n{\n";
    o << (d_.opencl ? "  const int G = " : "  constexpr int G = ") << (grouped ? "GROUP" : "1") << ";\n";
    if (!st.consumed.empty() || !st.reductions.empty() || (d_.opencl && grouped))
      o << "  " << d_.scratch << "\n";
    // Host and device scalars.
    for (std::size_t i = 0; i < plan_.operands.size(); ++i) {
      if (plan_.operands[i].kind == NodeKind::host_scalar)
        o << fmt::format("  const T scal{0} = T(scal{0}_arg);\n", i);
      if (plan_.operands[i].kind == NodeKind::device_scalar && d_.opencl)
        o << fmt::format("  __global T* RESTRICT gscal{0} = gscal{0}_base + gscal{0}_offset;\n", i);
      if (plan_.operands[i].kind == NodeKind::device_scalar && !plan_.operands[i].written)
        o << fmt::format("  const T gscal{0}_value = *gscal{0};\n", i);
    }
    // Fused final summation of inner products from earlier kernels.
    for (int slot : st.consumed) {
      const auto& r = plan_.reductions[slot];
      o << fmt::format(
          "  const T red{0} = {1}sum_partials(partials + {0} * partial_stride, parts_red{0}, scratch){2};  "
          "// {3}\n",
          slot, r.node->kind == NodeKind::norm_2 ? "sqrt(" : "", r.node->kind == NodeKind::norm_2 ? ")" : "",
          infix(r.node));
    }
    for (int slot : st.reductions) o << fmt::format("  T acc{} = T(0);\n", slot);
    if (d_.opencl) {
      // The same trip count for the whole work-group (group_sum has barriers): the loop runs over
      // the work-group's first row; rows past the end do no work.
      o << "  const int lane = (int)get_local_id(0) % G;\n";
      o << "  const long step = (long)get_num_groups(0) * get_local_size(0) / G;\n";
      o << "  for (long first = (long)get_group_id(0) * get_local_size(0) / G; first < n_rows; first += "
           "step) "
           "{\n";
      o << "    const long row = first + (long)get_local_id(0) / G;\n";
      for (auto& p : products) o << product_code(p);
      o << "    if (lane == 0 && row < n_rows) {\n";
    } else {
      o << "  const int lane = threadIdx.x % G;\n";
      o << "  const unsigned mask = G == 32 ? FULL_MASK : (((1u << G) - 1u) << (threadIdx.x % 32 / G * "
           "G));\n";
      o << "  (void)lane; (void)mask;\n";
      o << "  const long long step = (long long)gridDim.x * blockDim.x / G;\n";
      o << "  for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / G; row < n_rows; row "
           "+= step) {\n";
      for (auto& p : products) o << product_code(p);
      o << "    if (lane == 0) {\n";
    }
    for (int slot : st.reductions) {
      const auto& r = plan_.reductions[slot].node;
      const std::string a = code(r->children[0], "row");
      const std::string b = r->kind == NodeKind::norm_2 ? "" : code(r->children[1], "row");
      if (r->kind == NodeKind::norm_2)
        o << fmt::format("      if (row < len_red{0}) {{ const T e = {1}; acc{0} += e * e; }}\n", slot, a);
      else
        o << fmt::format("      if (row < len_red{0}) acc{0} += {1} * {2};\n", slot, a, b);
    }
    for (int t : st.temporaries)
      o << fmt::format("      if (row < size_tmp{0}) tmp{0}[row] = {1};\n", t,
                       code(plan_.temporaries[t].operand, "row"));
    // Every right-hand side before any store: simultaneous assignment.
    int k = 0;
    for (auto& a : st.vector_assignments) {
      const int target = a.target->index;
      o << fmt::format("      const bool in{0} = row < size_vec{1};\n", k, target);
      o << fmt::format("      const T value{0} = !in{0} ? T(0) :", k);
      if (a.value->shape == Shape::scalar) {
        o << " " << code(a.value, "row");
      } else {
        for (auto& tk : tokens_of(a.value))
          o << "\n          " << (tk.negative ? "- " : "+ ") << code(tk.term, "row");
      }
      o << ";\n";
      ++k;
    }
    k = 0;
    for (auto& a : st.vector_assignments) {
      o << fmt::format("      if (in{0}) vec{1}[row] = value{0};\n", k, a.target->index);
      ++k;
    }
    o << "    }\n  }\n";
    for (int slot : st.reductions)
      o << fmt::format(
          "  {{\n    const T total = block_sum(acc{0}, scratch);\n"
          "    if ({1} == 0) partials[{0} * partial_stride + {2}] = total;\n  }}\n",
          slot, d_.thread, d_.block);
    if (!st.scalar_assignments.empty()) {
      o << "  if (" << d_.block << " == 0 && " << d_.thread << " == 0) {\n";
      for (auto& a : st.scalar_assignments)
        o << fmt::format("    *gscal{} = {};\n", a.target->index, code(a.value, "0"));
      o << "  }\n";
    }
    o << "}\n";
    return o.str();
  }

  const OperationPlan& plan_;
  int group_;
  const Dialect& d_;
  std::map<std::string, std::string> products_;  // structural key -> register name
  std::map<const ExpressionNode*, std::string> modifier_names_;
  std::map<std::string, std::string> modifier_by_body_, modifier_defs_;
};

}  // namespace

std::string generate_cuda_source(const OperationPlan& plan, int group) {
  return Generator(plan, group, cuda_dialect).source();
}

std::string generate_opencl_source(const OperationPlan& plan, int group) {
  return Generator(plan, group, opencl_dialect).source();
}

int group_size_for(const PlanStage& stage, double csr_average_row_nnz, std::size_t rows) {
  if (stage.has_dense_product) return 32;
  if (!stage.has_csr_product) return 1;
  // Short rows (the 5-point stencil, 5 nonzeros): one thread per row up to a few million rows,
  // two beyond (measured G = 1, 2, 4, 8 in the graph path: 1 fastest at 1e5 and 1e6, 2 at 1e7;
  // the 3e6 switch lies between the two measured sizes; docs/linalg.md).
  if (csr_average_row_nnz <= 8) return rows > 3000000 ? 2 : 1;
  if (csr_average_row_nnz <= 16) return 8;
  if (csr_average_row_nnz <= 32) return 16;
  return 32;
}

}  // namespace molaccel::linalg

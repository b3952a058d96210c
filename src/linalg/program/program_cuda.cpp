// Emission of a planned program: one persistent kernel per solve, in the generator's two
// dialects (codegen/codegen.hpp: CUDA for NVRTC, OpenCL C for program_opencl.cpp), in the form a
// KernelShape names (program_cuda.hpp): one block, one thread-block cluster, the tiles of a
// stencil's grid or a grid; each thread's rows in registers for
// the whole solve (the resident kind: an unrolled loop over rows first_row + j * stride, only
// the vectors a product reads stored) or streamed (grid-stride, every vector in memory). A
// segment ends with the sums of its reductions staged together, the barrier (__syncthreads in a
// block; on a grid the block sums to the partials, the arrival counter, the totals gathered by
// every block in the same order; in a cluster the block sums pushed to every block, the cluster
// barrier: program_barriers.cpp), so every thread holds the same bits; the deferred scalar
// statements, the stop tests and the monitors then run in every thread alike. The dialects
// differ in the helper blocks (CUDA: grid_blocks.cuh, program_blocks.cuh, cluster_blocks.cuh; OpenCL's in
// program_opencl.cpp, the streamed grid form only), the load of a value written by another
// block, and the spellings of the Dialect table.
//
// Plain C++ (no CUDA headers): CI compiles the generated source with NVRTC without a GPU.
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "linalg/codegen/codegen.hpp"
#include "linalg/expression_util.hpp"
#include "linalg/program/program_barriers.hpp"
#include "linalg/program/program_cuda.hpp"
#include "linalg/program/program_windows.hpp"

namespace molaccel::linalg::program {

namespace {

// The building blocks (linalg/cuda/grid_blocks.cuh and linalg/cuda/program_blocks.cuh), as text:
// NVRTC compiles the source alone, without includes.
#define MOLACCEL_GRID_BLOCKS(...) #__VA_ARGS__
constexpr const char* kSharedBlocks =
#include "linalg/cuda/grid_blocks.cuh"
    ;
constexpr const char* kProgramBlocks =
#include "linalg/cuda/program_blocks.cuh"
    ;
constexpr const char* kClusterBlocks =
#include "linalg/cuda/cluster_blocks.cuh"
    ;
#undef MOLACCEL_GRID_BLOCKS

// The vectors some product reads (at other rows): the only ones the resident kind stores.
std::set<int> product_operands(const Program& program) {
  std::set<int> out;
  std::function<void(const NodePtr&, bool)> walk = [&](const NodePtr& n, bool in_product) {
    if (n->kind == NodeKind::vector && in_product) out.insert(n->index);
    for (std::size_t c = 0; c < n->children.size(); ++c)
      walk(n->children[c], in_product || (n->kind == NodeKind::matrix_product && c == 1));
  };
  for (const auto* steps : {&program.setup_steps(), &program.loop_steps()})
    for (const auto& step : *steps)
      for (const auto& st : step) walk(st.value(), false);
  return out;
}

// Where each product operand's buffers start in the shared exchange (KernelShape::shared_exchange),
// in buffers of n values: one per operand, two for one renamed in some segment.
std::map<int, std::size_t> exchange_layout(const Program& program, const ProgramPlan& plan,
                                           std::size_t* total = nullptr) {
  std::map<int, std::size_t> base;
  std::size_t next = 0;
  for (int v : product_operands(program)) {
    bool renamed = false;
    for (const Phase* phase : {&plan.setup, &plan.iteration})
      for (const auto& seg : phase->segments) renamed = renamed || seg.renamed.count(v) > 0;
    base[v] = next;
    next += renamed ? 2 : 1;
  }
  if (total) *total = next;
  return base;
}

std::string literal(double v) {
  if (std::isinf(v)) return v > 0 ? "(1.0/0.0)" : "(-1.0/0.0)";
  std::string s = fmt::format("{:.17g}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return "(" + s + ")";
}

class Emitter {
 public:
  Emitter(const Program& program, const ProgramPlan& plan, const Dialect& dialect, std::string helpers,
          KernelShape shape)
      : program_(program),
        plan_(plan),
        d_(dialect),
        helpers_(std::move(helpers)),
        shape_(shape),
        windows_(shape) {
    MOLACCEL_EXPECTS(!d_.opencl || (!shape.block && shape.rows_per_thread == 0),
                     "program emission: OpenCL takes the grid, streaming kernel only");
    MOLACCEL_EXPECTS(shape.rows_per_thread >= 0, "program emission: negative rows per thread");
    MOLACCEL_EXPECTS(shape.diagonals >= 0 && shape.diagonals <= int(shape.offsets.size()),
                     "program emission: diagonals out of range");
    for (std::size_t i = 0; i < program.symbols().size(); ++i)
      if (program.symbols()[i].kind == NodeKind::vector) vector_ordinal_[int(i)] = vectors_++;
    MOLACCEL_EXPECTS(!shape.shared_exchange || (shape.block && shape.rows_per_thread > 0),
                     "program emission: the shared exchange is for one block with its rows in registers");
    MOLACCEL_EXPECTS(!tiled() || (shape.grid_width > 0 && shape.rows_per_thread > 0 &&
                                  !shape.shared_exchange && !d_.opencl && shape.tile_w > 0),
                     "program emission: the tile form takes a constant stencil, rows in registers");
    MOLACCEL_EXPECTS(
        shape.grid_width == 0 || (long long)shape.grid_width * (long long)shape.grid_height < (1LL << 31),
        "program emission: a constant stencil's grid of 2^31 cells or more");
    MOLACCEL_EXPECTS(!clustered() || (shape.rows_per_thread > 0 && !shape.block && !tiled() &&
                                      !shape.shared_exchange && !d_.opencl && shape.cluster_blocks <= 16 &&
                                      shape.threads > 0 && shape.threads <= 512),
                     "program emission: the cluster form takes rows in registers, at most 16 blocks of a "
                     "literal number of threads");
    slots_ = std::max(plan.setup.reductions.size(), plan.iteration.reductions.size());
    published_ = product_operands(program);
    nested_ = nests_products(program);
    if (shape.shared_exchange || clustered()) exchange_ = exchange_layout(program, plan);
  }

  std::string source() {
    const std::string t = program_.type() == ValueType::f32 ? "float" : "double";
    std::string s =
        "// molaccel linalg program " + program_.name() + ": one persistent " +
        (d_.opencl      ? std::string("kernel (OpenCL C).\n")
         : shape_.block ? std::string("kernel in one thread block")
         : clustered()  ? fmt::format("kernel in one cluster of {} thread blocks", shape_.cluster_blocks)
                        : std::string("cooperative kernel")) +
        (d_.opencl ? ""
         : shape_.rows_per_thread > 0
             ? fmt::format(", {} rows per thread in registers.\n", shape_.rows_per_thread)
             : ", rows streamed.\n");
    if (d_.opencl) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    s += "typedef " + t + " T;\n";
    s += helpers_;
    const std::string g = d_.global, r = d_.restrict_, i64 = d_.int64;
    s += fmt::format(
        "\n{0} {1}({2}const int* {3} row_ptr, {2}const int* {3} col_idx, {2}const T* {3} values,\n"
        "    {4} n, {2}T* vectors, {2}double* scalars, {2}double* partials, {5},\n"
        "    {2}double* monitors, {2}{4}* outcome, int max_iterations) {{\n",
        d_.opencl ? std::string(d_.kernel)
                  : fmt::format("extern \"C\" __global__ void __launch_bounds__({})", shape_.max_threads()),
        kernel_name(program_), g, r, i64,
        d_.opencl ? "volatile __global int* counter" : "unsigned long long* counter");
    if (d_.opencl)
      s += fmt::format("  __local double scratch[{}];  // block sums (mp_block_sums)\n",
                       272 * max_segment_reductions());
    if (clustered()) {  // the block's rows mp_first .. mp_first + RB, strided by the block
      s += fmt::format("  const long long mp_first = (long long)blockIdx.x * {};\n", shape_.cluster_rows());
      s += "  const long long first_row = mp_first + threadIdx.x;\n";
      s += fmt::format("  const long long row_stride = {};\n", shape_.threads);
    } else {
      s += fmt::format("  const {0} first_row = ({0}){1} * {2} + {3};\n", i64, d_.block, d_.block_size,
                       d_.thread);
      s += fmt::format("  const {0} row_stride = ({0}){1} * {2};\n", i64, d_.blocks, d_.block_size);
    }
    s += fmt::format("  const bool leader = {} == 0 && {} == 0;\n", d_.block, d_.thread);
    if (tiled()) {
      // The block's tile (rows mp_i0.., columns mp_j0..; the last ones smaller) and its thread's cells.
      const int tiles_j = (shape_.grid_width + shape_.tile_w - 1) / shape_.tile_w;
      s += fmt::format(
          "  const int mp_i0 = (int)(blockIdx.x / {0}) * {1}, mp_j0 = (int)(blockIdx.x % {0}) * {2};\n"
          "  const int mp_ti = {3} - mp_i0 < {1} ? {3} - mp_i0 : {1}, mp_tj = {4} - mp_j0 < {2} ? {4} - "
          "mp_j0 : "
          "{2};\n"
          "  long long mp_row[{5}];\n"
          "  for (int j = 0; j < {5}; ++j) {{\n"
          "    const int o = j * (int)blockDim.x + (int)threadIdx.x;\n"
          "    mp_row[j] = o < mp_ti * mp_tj ? (long long)(mp_i0 + o / mp_tj) * {4} + mp_j0 + o % mp_tj : "
          "-1;\n"
          "  }}\n",
          tiles_j, shape_.tile_h, shape_.tile_w, shape_.grid_height, shape_.grid_width,
          shape_.rows_per_thread);
    }
    const std::size_t windows_at = s.size();  // tile form: the windows' arrays, known after the segments
    s += fmt::format("  const {} slots = {};\n", i64, std::max<std::size_t>(1, slots_));
    if (!d_.opencl) {
      // Staged warp sums and (grid) the totals, two halves alternating per barrier.
      s += "  int epoch = 0;\n";
      s += fmt::format("  __shared__ double mp_part[{}];\n", 2 * 32 * max_segment_reductions());
      if (clustered())
        s += fmt::format("  __shared__ double mp_pushed[{}];  // [half][slot][block]\n",
                         2 * 16 * max_segment_reductions());
      else if (!shape_.block)
        s += fmt::format("  __shared__ double mp_tot[{}];\n", 2 * max_segment_reductions());
      if (exchanged())
        s += fmt::format("  extern __shared__ T mp_exchange[];  // exchange_buffers() x {}\n",
                         exchange_stride());
    }
    for (std::size_t i = 0; i < program_.symbols().size(); ++i) {
      const auto kind = program_.symbols()[i].kind;
      if (kind == NodeKind::device_scalar) s += fmt::format("  double s{0} = scalars[{0}];\n", i);
    }
    if (resident()) s += resident_rows("load");
    if (exchanged()) {
      // The product operands' first buffers in shared memory, from the registers. In a cluster
      // the barrier also makes sure every block has started before any reads another's memory.
      std::string body;
      for (const auto& [v, base] : exchange_)
        body += fmt::format("      mp_exchange[{} * {} + {}] = rv{}[j];\n", base, exchange_stride(),
                            local_row(), v);
      s += (body.empty() ? std::string() : rows_loop(body, "  ")) +
           (clustered() ? "  mp_cluster_barrier();\n" : "  __syncthreads();\n");
    }
    s += "  // ---- setup ----\n";
    for (std::size_t k = 0; k < plan_.setup.segments.size(); ++k) {
      at_ = {false, k};
      s += segment(plan_.setup, plan_.setup.segments[k], program_.setup_steps(), fmt::format("{}", k));
    }
    s += fmt::format("  {0} it = 0;\n  {0} status = 0;\n  for (;; ++it) {{\n", i64);
    const std::size_t m = program_.monitors().size();
    for (std::size_t i = 0; i < m; ++i)
      s += fmt::format("    if (leader) monitors[it * {} + {}] = {};\n", m, i,
                       scalar_expr(program_.monitors()[i].node()));
    for (std::size_t i = 0; i < program_.stop_tests().size(); ++i)
      s += fmt::format("    if (status == 0 && ({}) != 0.0) status = {};\n",
                       scalar_expr(program_.stop_tests()[i].condition.node()), i + 1);
    s += "    if (status == 0 && it >= max_iterations) status = -1;\n    if (status != 0) break;\n";
    for (std::size_t k = 0; k < plan_.iteration.segments.size(); ++k) {
      at_ = {true, k};
      s += segment(plan_.iteration, plan_.iteration.segments[k], program_.loop_steps(),
                   fmt::format("({} + it * {} + {})", plan_.setup.segments.size(),
                               plan_.iteration.segments.size(), k));
    }
    s += "  }\n";
    at_ = {true, 0};  // after the loop: `it` whole iterations done
    if (resident()) s += resident_rows("store");
    s += "  if (leader) {\n    outcome[0] = it;\n    outcome[1] = status;\n";
    for (std::size_t i = 0; i < program_.symbols().size(); ++i) {
      const auto kind = program_.symbols()[i].kind;
      if (kind == NodeKind::device_scalar) s += fmt::format("    scalars[{0}] = s{0};\n", i);
      if (kind == NodeKind::vector)
        s += fmt::format("    outcome[2 + {}] = {};\n", vector_ordinal_.at(int(i)), parity(int(i)));
    }
    s += "  }\n";
    // No block of a cluster leaves while another may still read its shared memory.
    if (clustered()) s += "  mp_cluster_barrier();\n";
    s += "}\n";
    if (tiled()) s.insert(windows_at, windows_.declarations());
    return s;
  }

 private:
  bool resident() const { return shape_.rows_per_thread > 0; }
  bool tiled() const { return shape_.tile_h > 0; }
  bool clustered() const { return shape_.cluster_blocks > 0; }
  // The product operands in shared memory: one block's n rows, or a cluster block's RB rows.
  bool exchanged() const { return shape_.shared_exchange || clustered(); }
  std::string exchange_stride() const {
    return clustered() ? std::to_string(shape_.cluster_rows()) : std::string("n");
  }
  std::string local_row() const { return clustered() ? "(row - mp_first)" : "row"; }

  // The resident kind's loop over a thread's rows (unrolled: the arrays stay in registers).
  std::string rows_loop(const std::string& body, const std::string& indent) const {
    if (tiled())
      return fmt::format(
          "{0}#pragma unroll\n{0}for (int j = 0; j < {1}; ++j) {{\n{0}  const long long row = "
          "mp_row[j];\n{0}  if "
          "(row >= 0) {{\n{2}{0}  }}\n{0}}}\n",
          indent, shape_.rows_per_thread, body);
    return fmt::format(
        "{0}#pragma unroll\n{0}for (int j = 0; j < {1}; ++j) {{\n{0}  const {2} row = first_row + j * "
        "row_stride;\n{0}  if (row < n) {{\n{3}{0}  }}\n{0}}}\n",
        indent, shape_.rows_per_thread, d_.int64, body);
  }

  // The resident kind's registers: loaded from the first buffers before the setup ("load"),
  // stored to each vector's current buffer after the loop ("store").
  std::string resident_rows(const std::string& what) const {
    std::string out, body;
    for (const auto& [v, o] : vector_ordinal_) {
      if (what == "load") out += fmt::format("  T rv{}[{}] = {{}};\n", v, shape_.rows_per_thread);
      const std::string at =
          fmt::format("vectors[(2LL * {} + {}) * n + row]", o, what == "load" ? "0" : parity(v));
      body += what == "load" ? fmt::format("      rv{}[j] = {};\n", v, at)
                             : fmt::format("      {} = rv{}[j];\n", at, v);
    }
    for (int k = 0; what == "load" && shape_.grid_width == 0 && k < shape_.diagonals; ++k) {  // the values
      out += fmt::format("  T av{}[{}] = {{}};\n", k, shape_.rows_per_thread);
      body += fmt::format("      av{0}[j] = values[{0}LL * n + row];\n", k);
    }
    return out + rows_loop(body, "  ");
  }

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
    // By diagonals: `col` is row + `shift` (the offsets along the path of products to it), on a
    // stencil's grid (i + da, j + db) from the row's cell (i, j) = (mp_i, mp_j).
    long long shift = 0, da = 0, db = 0;
    int window = 0;                // tile form: > 0 while evaluating a cell of the window that many hops out
    std::string* hoist = nullptr;  // the row's loads at other rows (diagonals)
    std::map<std::string, std::string>* far = nullptr;  // buffer@shift -> its hoisted value
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
    auto at = [&](const std::string& col) {
      if (clustered())  // the block that owns the row, through distributed shared memory
        return fmt::format("(double)*mp_map({0} + ({1}) % {2}, (unsigned)(({1}) / {2}))", buffer, col,
                           shape_.cluster_rows());
      return shape_.block ? fmt::format("(double){}[{}]", buffer, col)
                          : fmt::format("(double){}({} + {})", load(), buffer, col);
    };
    // By diagonals, rows in registers: a product's operand at its own row (shift 0, any depth) is
    // the register, which holds the value of the last barrier unless an earlier step of the
    // segment wrote the (renamed) vector; no load from shared or global memory.
    if (c.other_row && resident() && shape_.diagonals > 0 && c.shift == 0 && c.window == 0 &&
        !(c.written_renamed && c.written_renamed->count(v)))
      return fmt::format("(double)rv{}[j]", v);
    if (c.other_row && shape_.diagonals > 0 && c.hoist && nested_) {
      // Products nested, by diagonals: every other row is row + a constant, and each buffer's
      // value there is loaded once per row, ahead of the arithmetic (a product nested in a
      // product reaches a cell along several paths), guarded by the cell's own bounds (a path
      // that reaches it checks its hops).
      const std::string key = fmt::format("{}@{}", buffer, c.shift);
      if (auto it = c.far->find(key); it != c.far->end()) return it->second;
      const std::string name = fmt::format("f{}", temp_++);
      *c.hoist += fmt::format("      const double {} = {} ? {} : 0.0;\n", name, cell_inside(c), at(c.col));
      (*c.far)[key] = name;
      return name;
    }
    if (c.other_row) return at(c.col);
    if (resident()) return fmt::format("(double)rv{}[j]", v);
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
        // At this row, or (nested) at another row `c.col` where an outer product reads the operand.
        const std::string name = fmt::format("pr{}", temp_++), at = c.other_row ? c.col : std::string("row");
        Context other = c;
        other.other_row = true;
        if (shape_.diagonals == 0) {
          other.col = name + "_c";
          std::string inner_pre;
          const std::string operand = expr(n->children[1], other, inner_pre);
          pre += fmt::format(
              "      double {0} = 0.0;\n      for (int {0}_k = row_ptr[{3}]; {0}_k < row_ptr[{3} + 1]; "
              "++{0}_k) {{\n"
              "        const int {0}_c = col_idx[{0}_k];\n{1}        {0} += (double)values[{0}_k] * {2};\n   "
              "  "
              " }}\n",
              name, inner_pre, operand, at);
          return name;
        }
        // By diagonals: the entries in offset order, the NaN padding skipped; a constant stencil:
        // the coefficients, the cells outside the grid skipped.
        pre += fmt::format("      double {} = 0.0;\n", name);
        if (tiled()) {  // the operand from its window in shared memory
          const int depth = c.window + 1;
          const int w = window_of(n->children[1], depth, c);
          for (int k = 0; k < shape_.diagonals; ++k) {
            const auto kk = std::size_t(k);
            const int a = shape_.grid_a[kk], b = shape_.grid_b[kk];
            Context at_k = c;
            at_k.da = a;
            at_k.db = b;
            // The operand's cell (row, column) in window `depth`: this cell's, one hop (up, left)
            // further in.
            const int up = windows_.up(), left = windows_.left();
            const std::string cell =
                c.window > 0 ? TileWindows::read(w, fmt::format("mp_y + {}", up + a),
                                                 fmt::format("mp_x + {}", left + b))
                             : TileWindows::read(w, fmt::format("(int)(mp_i - mp_i0) + {}", up + a),
                                                 fmt::format("(int)(mp_j - mp_j0) + {}", left + b));
            pre += fmt::format("      if ({}) {} += (double)(T){} * {};\n", cell_inside(at_k, c.window > 0),
                               name, literal(shape_.coef[kk]), cell);
          }
          return name;
        }
        for (int k = 0; k < shape_.diagonals; ++k) {
          const auto kk = std::size_t(k);
          other.shift = c.shift + shape_.offsets[kk];
          other.col = fmt::format("(row + ({}))", other.shift);  // at any depth, from this row
          if (shape_.grid_width > 0) {
            other.da = c.da + shape_.grid_a[kk];
            other.db = c.db + shape_.grid_b[kk];
            std::string inner_pre;
            const std::string operand = expr(n->children[1], other, inner_pre);
            pre += fmt::format("      if ({}) {{\n{}        {} += (double)(T){} * {};\n      }}\n",
                               cell_inside(other), inner_pre, name, literal(shape_.coef[kk]), operand);
            continue;
          }
          std::string inner_pre;
          const std::string operand = expr(n->children[1], other, inner_pre);
          const std::string value = resident() && !c.other_row
                                        ? fmt::format("av{}[j]", k)
                                        : fmt::format("values[{}{} * n + {}]", k, d_.int64_suffix, at);
          pre += fmt::format(
              "      {{\n        const T {0}_a = {1};\n        if ({0}_a == {0}_a) {{\n{2}          {0} += "
              "(double){0}_a * {3};\n        }}\n      }}\n",
              name, value, inner_pre, operand);
        }
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

  // Tile form: the window `depth` hops around the tile holding `operand` (read at other rows, the
  // scalars as `c` names them), filled before the segment's rows (program_windows.hpp).
  int window_of(const NodePtr& operand, int depth, const Context& c) {
    MOLACCEL_EXPECTS(depth <= 2, "program emission: products nested more than once");
    Context w = c;
    w.other_row = true;
    w.col = "mp_r";
    w.hoist = nullptr;
    w.far = nullptr;
    w.row_values = nullptr;
    w.window = depth;
    w.da = w.db = 0;
    std::string pre;
    const std::string value = expr(operand, w, pre);
    return windows_.add(depth, pre, value);
  }

  // By diagonals: whether the cell `c` reaches (row + c.shift) is a row of the matrix. On a
  // stencil's grid (i + da, j + db) inside the grid (only the bounds a shift can cross are tested;
  // the row's own cell is inside), from the row's cell (mp_i, mp_j) or, `window_cell`, from the
  // window cell being filled (mp_gi, mp_gj); else 0 <= row + shift < n.
  std::string cell_inside(const Context& c, bool window_cell = false) {
    std::string out;
    auto bound = [&](const char* at, long long by, int size) {
      if (by == 0) return;
      out += fmt::format("{}{} + ({}) {} {}", out.empty() ? "" : " && ", at, by, by < 0 ? ">=" : "<",
                         by < 0 ? 0 : size);
    };
    if (shape_.grid_width > 0) {
      grid_index_ = grid_index_ || !window_cell;
      bound(window_cell ? "mp_gi" : "mp_i", c.da, shape_.grid_height);
      bound(window_cell ? "mp_gj" : "mp_j", c.db, shape_.grid_width);
    } else if (c.shift != 0) {
      out = fmt::format("row + ({0}) >= 0 && row + ({0}) < n", c.shift);
    }
    return out.empty() ? "true" : "(" + out + ")";
  }

  // Which of a vector's two buffers is its front at the current segment's start (`at_`): the
  // renamings (swaps at barriers) so far, from the plan: a constant in the setup, an expression
  // of `it` in the loop. Not a variable toggled between barriers: PoCL's kernel compiler
  // miscompiled such a variable inside the loop (pipelined BiCGStab read stale buffers), as it
  // did the barrier counter (below).
  std::string parity(int v) const {
    auto flips = [&](const Phase& phase, std::size_t segments) {
      std::size_t n = 0;
      for (std::size_t k = 0; k < segments; ++k) n += phase.segments[k].renamed.count(v);
      return n;
    };
    const std::size_t setup = flips(plan_.setup, at_.loop ? plan_.setup.segments.size() : at_.segment);
    if (!at_.loop) return std::to_string(setup & 1);
    const std::size_t per_iteration = flips(plan_.iteration, plan_.iteration.segments.size());
    const std::size_t before = flips(plan_.iteration, at_.segment);
    if (per_iteration % 2 == 0) return std::to_string((setup + before) & 1);
    return fmt::format("(int)(({} + it + {}) & 1)", setup, before);
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
      const std::string par = parity(v);
      if (auto e = exchange_.find(v); e != exchange_.end()) {  // in shared memory
        head += fmt::format("    T* v{0}_f = mp_exchange + ({1} + {2}) * {3};\n", v, e->second, par,
                            exchange_stride());
        if (seg.renamed.count(v))
          head += fmt::format("    T* v{0}_b = mp_exchange + ({1} + 1 - {2}) * {3};\n", v, e->second, par,
                              exchange_stride());
        continue;
      }
      head += fmt::format("    {2}T* v{0}_f = vectors + (2{3} * {1} + {4}) * n;\n", v, o, d_.global,
                          d_.int64_suffix, par);
      if (seg.renamed.count(v))
        head += fmt::format("    {2}T* v{0}_b = vectors + (2{3} * {1} + 1 - {4}) * n;\n", v, o, d_.global,
                            d_.int64_suffix, par);
    }
    for (int slot : seg.reductions) head += fmt::format("    double acc{} = 0.0;\n", slot);
    std::map<int, std::string> names;  // scalar -> its current in-place value
    std::set<int> written;
    std::map<std::string, std::string> row_values, far;
    std::string row_code, hoisted;
    grid_index_ = false;
    windows_.clear();  // tile form
    for (const auto& item : seg.body) {
      const auto& step = steps[std::size_t(item.step)];
      Context c;
      c.row_values = &row_values;
      c.row_wise = true;
      c.renamed = &seg.renamed;
      c.written_renamed = &written;
      c.scalar_names = &names;
      c.hoist = &hoisted;
      c.far = &far;
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
          stores += fmt::format("      const T {} = (T)({});\n", kept, combined);
          if (resident()) stores += fmt::format("      rv{}[j] = {};\n", t, kept);
          if (!resident() || published_.count(t))
            stores +=
                fmt::format("      {}[{}] = {};\n", buffer, exchange_.count(t) ? local_row() : "row", kept);
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
    if (grid_index_)  // 32-bit: the grid's cells number under 2^31 (the constructor checks)
      hoisted = fmt::format("      const int mp_i = (int)row / {0}, mp_j = (int)row - mp_i * {0};\n",
                            shape_.grid_width) +
                hoisted;
    row_code = hoisted + row_code;
    if (!windows_.empty())  // after every thread has read the last segment's windows
      loop += "    __syncthreads();\n" + windows_.resolve(row_code);
    if (resident())
      loop += rows_loop(row_code, "    ");
    else
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
    tail += d_.opencl ? opencl_barrier(seg, id, max_segment_reductions(), half)
                      : cuda_barrier(seg, id, max_segment_reductions(), shape_, half);
    std::map<const ExpressionNode*, std::string> totals;
    if (!d_.opencl) tail += "    ++epoch;\n";
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
  KernelShape shape_;
  std::set<int> published_;
  std::map<int, std::size_t> exchange_;  // shared exchange: operand -> first buffer
  std::map<int, int> vector_ordinal_;
  int vectors_ = 0;
  std::size_t slots_ = 0;
  int temp_ = 0, segment_id_ = 0;
  bool grid_index_ = false;  // the segment's rows use their grid cell (mp_i, mp_j)
  bool nested_ = false;      // the program nests products
  TileWindows windows_;      // tile form: the segment's windows in shared memory
  struct {
    bool loop = false;
    std::size_t segment = 0;
  } at_;  // the segment being emitted (parity)
};

}  // namespace

std::string kernel_name(const Program& program) {
  std::string out = "molaccel_program_";
  for (char ch : program.name()) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

std::string generate_program(const Program& program, const ProgramPlan& plan, const Dialect& dialect,
                             std::string helpers, KernelShape shape) {
  return Emitter(program, plan, dialect, std::move(helpers), shape).source();
}

std::size_t exchange_buffers(const Program& program, const ProgramPlan& plan) {
  std::size_t total = 0;
  exchange_layout(program, plan, &total);
  return total;
}

std::string program_cuda_blocks() {
  return std::string("// linalg/cuda/grid_blocks.cuh\n") + kSharedBlocks +
         "\n// linalg/cuda/program_blocks.cuh\n" + kProgramBlocks + "\n";
}

std::string generate_program_cuda(const Program& program, const ProgramPlan& plan, KernelShape shape) {
  std::string blocks = program_cuda_blocks();
  if (shape.cluster_blocks > 0)
    blocks += std::string("// linalg/cuda/cluster_blocks.cuh\n") + kClusterBlocks + "\n";
  return generate_program(program, plan, cuda_dialect, std::move(blocks), shape);
}

}  // namespace molaccel::linalg::program

namespace molaccel::linalg {
std::string program_cuda_source(const Program& program) {
  return program::generate_program_cuda(program, program::plan_program(program));
}
}  // namespace molaccel::linalg

// custom_operation: plans the statements once, then runs them on the operands' device.
#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>

#include "linalg/backend.hpp"
#include "linalg/plan.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

struct custom_operation::state {
  std::shared_ptr<gpu::operation_state> gpu;  // compiled programs + workspace (lazily)
  std::string cpu_variant;
  // Matrix targets: the operation runs as a vector operation over each matrix's padded storage
  // (rows x leading dimension elements); these operands are matrices, `written` ones targets.
  std::vector<int> matrix_operands, written_matrices;
};

namespace {

[[noreturn]] void fail_matrix(const std::string& message) {
  throw Error("linalg operation: " + message, __FILE__, __LINE__);
}

// Dense matrices as vector leaves (same operand number), matrix shapes as vector shapes.
node_ptr matrices_as_vectors(const node_ptr& n) {
  auto copy = std::make_shared<expression_node>(*n);
  if (copy->shape == shape::matrix) copy->shape = shape::vector;
  if (copy->kind == node_kind::dense_matrix) copy->kind = node_kind::vector;
  for (auto& c : copy->children) c = matrices_as_vectors(c);
  return copy;
}

// An operation with a matrix target is element-wise over matrices of one shape: every target is
// a dense matrix and the right-hand sides read dense matrices, scalars and constants only.
// Returns the statements rewritten over vectors (empty when no target is a matrix).
std::vector<statement> matrix_operation(const std::vector<statement>& statements, std::vector<int>& matrices,
                                        std::vector<int>& written) {
  bool any = false;
  for (auto& s : statements) any = any || s.target()->kind == node_kind::dense_matrix;
  if (!any) return {};
  std::function<void(const node_ptr&)> check = [&](const node_ptr& n) {
    switch (n->kind) {
      case node_kind::vector:
      case node_kind::temporary:
        fail_matrix(
            "an operation with a matrix target cannot read vectors (element-wise over matrices only)");
      case node_kind::csr_matrix:
      case node_kind::matrix_product:
        fail_matrix("an operation with a matrix target cannot contain prod()");
      case node_kind::inner_product:
      case node_kind::norm_2:
        fail_matrix("an operation with a matrix target cannot contain inner products or norms");
      case node_kind::dense_matrix:
        if (std::find(matrices.begin(), matrices.end(), n->index) == matrices.end())
          matrices.push_back(n->index);
        break;
      default:
        break;
    }
    for (auto& c : n->children) check(c);
  };
  std::vector<statement> out;
  for (auto& s : statements) {
    if (s.target()->kind != node_kind::dense_matrix)
      fail_matrix("an operation with a matrix target can only assign matrices (split it)");
    check(s.target());
    check(s.value());
    written.push_back(s.target()->index);
    out.emplace_back(matrices_as_vectors(s.target()), s.op(), matrices_as_vectors(s.value()));
  }
  return out;
}

}  // namespace

custom_operation::custom_operation(std::vector<statement> statements) : state_(std::make_shared<state>()) {
  std::vector<statement> as_vectors =
      matrix_operation(statements, state_->matrix_operands, state_->written_matrices);
  plan_ =
      std::make_unique<operation_plan>(make_plan(as_vectors.empty() ? std::move(statements) : as_vectors));
}
custom_operation::~custom_operation() = default;
custom_operation::custom_operation(custom_operation&&) noexcept = default;
custom_operation& custom_operation::operator=(custom_operation&&) noexcept = default;

void custom_operation::run(const std::vector<argument>& args) {
  if (!state_->matrix_operands.empty()) {
    // Every matrix has the first one's shape (hence its leading dimension); each becomes a
    // vector over its padded storage. The padding (zero) is computed too and zeroed again below.
    std::vector<argument> flat = args;
    const argument* first = nullptr;
    for (int i : state_->matrix_operands) {
      if (static_cast<std::size_t>(i) >= args.size() || args[i].what != argument::kind::dense_matrix)
        fail_matrix(fmt::format("{}: operand {} must be a dense matrix", plan_->name, i));
      const argument& m = args[i];
      if (!first) first = &m;
      if (m.rows != first->rows || m.cols != first->cols)
        fail_matrix(fmt::format("{}: matrices of shapes {}x{} and {}x{} in one element-wise operation",
                                plan_->name, first->rows, first->cols, m.rows, m.cols));
      flat[i].what = argument::kind::vector;
      flat[i].rows = m.rows * m.ld;
      flat[i].cols = 1;
    }
    const bound_shapes shapes = bind_arguments(*plan_, flat);
    if (shapes.where.on_gpu()) {
#ifdef MOLACCEL_HAVE_CUDA
      gpu::execute(*plan_, flat, shapes, state_->gpu);
      if (first->ld != first->cols)
        for (int i : state_->written_matrices)
          gpu::zero_columns(shapes.where.device, args[i].data->data(), args[i].rows, args[i].ld, args[i].cols,
                            size_of(args[i].type));
#else
      MOLACCEL_THROW(NotCompiled, "linalg GPU operations (this build has no CUDA)");
#endif
    } else {
      state_->cpu_variant = cpu_execute(*plan_, flat, shapes);
      if (first->ld != first->cols)
        for (int i : state_->written_matrices) {
          char* base = static_cast<char*>(args[i].data->data());
          const std::size_t elem = size_of(args[i].type);
          for (std::size_t r = 0; r < args[i].rows; ++r)
            std::memset(base + (r * args[i].ld + args[i].cols) * elem, 0, (args[i].ld - args[i].cols) * elem);
        }
    }
    return;
  }
  const bound_shapes shapes = bind_arguments(*plan_, args);
  if (shapes.where.on_gpu()) {
#ifdef MOLACCEL_HAVE_CUDA
    gpu::execute(*plan_, args, shapes, state_->gpu);
#else
    MOLACCEL_THROW(NotCompiled, "linalg GPU operations (this build has no CUDA)");
#endif
  } else {
    state_->cpu_variant = cpu_execute(*plan_, args, shapes);
  }
}

const std::string& custom_operation::name() const {
  return plan_->name;
}
const operation_plan& custom_operation::plan() const {
  return *plan_;
}
std::string custom_operation::last_cpu_variant() const {
  return state_->cpu_variant;
}

std::string custom_operation::cuda_source() const {
  // Products in the generated source assume the dense group size; run() regenerates per group.
  bool dense = false, csr = false;
  for (auto& st : plan_->stages) {
    dense = dense || st.has_dense_product;
    csr = csr || st.has_csr_product;
  }
  return generate_cuda_source(*plan_, dense ? 32 : csr ? 4 : 1);
}

std::vector<std::string> custom_operation::kernel_names() const {
  std::vector<std::string> names;
  for (auto& st : plan_->stages) names.push_back(st.kernel_name);
  return names;
}

int custom_operation::kernels_per_run() const {
  return static_cast<int>(plan_->stages.size());
}

}  // namespace molaccel::linalg

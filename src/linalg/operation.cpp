// CustomOperation: plans the statements once, then runs them on the operands' device.
#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>

#include "linalg/backend.hpp"
#include "linalg/plan.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

struct CustomOperation::state {
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
NodePtr matrices_as_vectors(const NodePtr& n) {
  auto copy = std::make_shared<ExpressionNode>(*n);
  if (copy->shape == Shape::matrix) copy->shape = Shape::vector;
  if (copy->kind == NodeKind::dense_matrix) copy->kind = NodeKind::vector;
  for (auto& c : copy->children) c = matrices_as_vectors(c);
  return copy;
}

// An operation with a matrix target is element-wise over matrices of one shape: every target is
// a dense matrix and the right-hand sides read dense matrices, scalars and constants only.
// Returns the statements rewritten over vectors (empty when no target is a matrix).
std::vector<Statement> matrix_operation(const std::vector<Statement>& statements, std::vector<int>& matrices,
                                        std::vector<int>& written) {
  bool any = false;
  for (auto& s : statements) any = any || s.target()->kind == NodeKind::dense_matrix;
  if (!any) return {};
  std::function<void(const NodePtr&)> check = [&](const NodePtr& n) {
    switch (n->kind) {
      case NodeKind::vector:
      case NodeKind::temporary:
        fail_matrix(
            "an operation with a matrix target cannot read vectors (element-wise over matrices only)");
      case NodeKind::csr_matrix:
      case NodeKind::matrix_product:
        fail_matrix("an operation with a matrix target cannot contain prod()");
      case NodeKind::inner_product:
      case NodeKind::norm_2:
        fail_matrix("an operation with a matrix target cannot contain inner products or norms");
      case NodeKind::dense_matrix:
        if (std::find(matrices.begin(), matrices.end(), n->index) == matrices.end())
          matrices.push_back(n->index);
        break;
      default:
        break;
    }
    for (auto& c : n->children) check(c);
  };
  std::vector<Statement> out;
  for (auto& s : statements) {
    if (s.target()->kind != NodeKind::dense_matrix)
      fail_matrix("an operation with a matrix target can only assign matrices (split it)");
    check(s.target());
    check(s.value());
    written.push_back(s.target()->index);
    out.emplace_back(matrices_as_vectors(s.target()), s.op(), matrices_as_vectors(s.value()));
  }
  return out;
}

}  // namespace

CustomOperation::CustomOperation(std::vector<Statement> statements) : state_(std::make_shared<state>()) {
  std::vector<Statement> as_vectors =
      matrix_operation(statements, state_->matrix_operands, state_->written_matrices);
  plan_ = std::make_unique<OperationPlan>(make_plan(as_vectors.empty() ? std::move(statements) : as_vectors));
}
CustomOperation::~CustomOperation() = default;
CustomOperation::CustomOperation(CustomOperation&&) noexcept = default;
CustomOperation& CustomOperation::operator=(CustomOperation&&) noexcept = default;

void CustomOperation::run(const std::vector<Argument>& args) {
  if (!state_->matrix_operands.empty()) {
    // Every matrix has the first one's shape (hence its leading dimension); each becomes a
    // vector over its padded storage. The padding (zero) is computed too and zeroed again below.
    std::vector<Argument> flat = args;
    const Argument* first = nullptr;
    for (int i : state_->matrix_operands) {
      if (static_cast<std::size_t>(i) >= args.size() || args[i].what != Argument::Kind::dense_matrix)
        fail_matrix(fmt::format("{}: operand {} must be a dense matrix", plan_->name, i));
      const Argument& m = args[i];
      if (!first) first = &m;
      if (m.rows != first->rows || m.cols != first->cols)
        fail_matrix(fmt::format("{}: matrices of shapes {}x{} and {}x{} in one element-wise operation",
                                plan_->name, first->rows, first->cols, m.rows, m.cols));
      flat[i].what = Argument::Kind::vector;
      flat[i].rows = m.rows * m.ld;
      flat[i].cols = 1;
    }
    const BoundShapes shapes = bind_arguments(*plan_, flat);
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
  const BoundShapes shapes = bind_arguments(*plan_, args);
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

const std::string& CustomOperation::name() const {
  return plan_->name;
}
const OperationPlan& CustomOperation::plan() const {
  return *plan_;
}
std::string CustomOperation::last_cpu_variant() const {
  return state_->cpu_variant;
}

std::string CustomOperation::cuda_source() const {
  // Products in the generated source assume the dense group size; run() regenerates per group.
  bool dense = false, csr = false;
  for (auto& st : plan_->stages) {
    dense = dense || st.has_dense_product;
    csr = csr || st.has_csr_product;
  }
  return generate_cuda_source(*plan_, dense ? 32 : csr ? 4 : 1);
}

std::vector<std::string> CustomOperation::kernel_names() const {
  std::vector<std::string> names;
  for (auto& st : plan_->stages) names.push_back(st.kernel_name);
  return names;
}

int CustomOperation::kernels_per_run() const {
  return static_cast<int>(plan_->stages.size());
}

}  // namespace molaccel::linalg

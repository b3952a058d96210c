// custom_operation: plans the statements once, then runs them on the operands' device.
#include <mutex>

#include "linalg/backend.hpp"
#include "linalg/plan.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

struct custom_operation::state {
  std::shared_ptr<gpu::operation_state> gpu;  // compiled programs + workspace (lazily)
  std::string cpu_variant;
};

custom_operation::custom_operation(std::vector<statement> statements)
    : plan_(std::make_unique<operation_plan>(make_plan(std::move(statements)))),
      state_(std::make_shared<state>()) {}
custom_operation::~custom_operation() = default;
custom_operation::custom_operation(custom_operation&&) noexcept = default;
custom_operation& custom_operation::operator=(custom_operation&&) noexcept = default;

void custom_operation::run(const std::vector<argument>& args) {
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

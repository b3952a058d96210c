// OpenCL backend of the generator (internal): runs the OpenCL C dialect of a plan's kernels on
// operands in OpenCL buffers. Compiled only with OpenCL (MOLACCEL_OPENCL).
#pragma once

#include <map>
#include <vector>

#include "linalg/plan.hpp"
#include "runtime/opencl/opencl.hpp"

namespace molaccel::linalg::cl {

namespace rt = ::molaccel::opencl;

// A run-time operand in OpenCL memory, in the plan's operand order.
struct Operand {
  NodeKind kind = NodeKind::vector;  // vector, dense_matrix, csr_matrix, host_scalar, device_scalar
  cl_mem data = nullptr;             // vector, matrix values, device scalar's buffer
  std::size_t offset = 0;            // device scalar: element index in `data`
  cl_mem row_ptr = nullptr, col_idx = nullptr;  // CSR
  std::size_t rows = 0, cols = 0, ld = 0, nnz = 0;
  double host_value = 0;
};

// Work-items per work-group of every generated OpenCL kernel (reqd_work_group_size).
inline constexpr int work_group = 256;

// One operation's programs (per row-group size) and workspace on one device.
class Executor {
 public:
  Executor(const OperationPlan& plan, rt::Device& device);
  // Enqueues the stages on the device's in-order queue (returns before they finish).
  void run(const std::vector<Operand>& args);
  const OperationPlan& plan() const { return plan_; }

 private:
  const rt::Program& program_for(int group);
  const OperationPlan& plan_;
  rt::Device& device_;
  std::map<int, rt::Program> programs_;
  rt::Buffer partials_;
  std::vector<rt::Buffer> temporaries_;
  int reduction_groups_ = 64, max_groups_ = 512;
};

}  // namespace molaccel::linalg::cl

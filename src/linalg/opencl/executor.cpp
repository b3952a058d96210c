// OpenCL backend of the generator: geometry, workspace and launches of the generated OpenCL C
// kernels (the CUDA backend's structure: reduction stages leave per-work-group partial sums that
// the consuming stage adds up in its prologue).
#include "linalg/opencl/executor.hpp"

#include <algorithm>

#include "linalg/backend.hpp"
#include "linalg/codegen/codegen.hpp"

namespace molaccel::linalg::cl {

Executor::Executor(const OperationPlan& plan, rt::Device& device) : plan_(plan), device_(device) {
  if (plan.type == ValueType::f64) rt::require_fp64(device.info, "a double-precision operation");
  if (device.info.max_work_group < static_cast<std::size_t>(work_group))
    throw Error(fmt::format("OpenCL device {} ({}) runs at most {} work-items per work-group; molaccel's "
                            "kernels need {}",
                            device.info.index, device.info.name, device.info.max_work_group, work_group),
                __FILE__, __LINE__);
  // As on CUDA: a few work-groups per compute unit in reduction stages, more elsewhere.
  const int units = std::max(1, device.info.compute_units);
  reduction_groups_ = 4 * units;
  max_groups_ = 8 * units;
}

const rt::Program& Executor::program_for(int group) {
  auto it = programs_.find(group);
  if (it != programs_.end()) return it->second;
  rt::BuildRequest request;
  request.source = generate_opencl_source(plan_, group);
  request.program_name = fmt::format("{}_g{}.cl", plan_.name.substr(0, 60), group);
  for (auto& st : plan_.stages) request.kernel_names.push_back(st.kernel_name);
  request.needs_fp64 = plan_.type == ValueType::f64;
  return programs_.emplace(group, rt::default_binary_cache().build(device_, request)).first->second;
}

namespace {

// Kernel arguments in the order of the generator's parameter list.
class Arguments {
 public:
  Arguments(cl_kernel k, ValueType type) : kernel_(k), type_(type) {}
  void buffer(cl_mem m) { set(sizeof m, &m); }
  void integer(std::size_t v) {
    const cl_long l = static_cast<cl_long>(v);
    set(sizeof l, &l);
  }
  void real(double v) {
    if (type_ == ValueType::f64) {
      set(sizeof v, &v);
    } else {
      const float f = static_cast<float>(v);
      set(sizeof f, &f);
    }
  }

 private:
  void set(std::size_t bytes, const void* value) {
    MOLACCEL_CL_TRY(rt::api()->SetKernelArg(kernel_, index_, bytes, value), "clSetKernelArg");
    ++index_;
  }
  cl_kernel kernel_;
  ValueType type_;
  cl_uint index_ = 0;
};

}  // namespace

void Executor::run(const std::vector<Operand>& args) {
  if (args.size() != plan_.operands.size())
    throw Error(fmt::format("linalg operation {} takes {} operands, got {}", plan_.name,
                            plan_.operands.size(), args.size()),
                __FILE__, __LINE__);
  // Shapes through the planner's length rules (the same checks as the other backends).
  std::vector<Argument> shape_args;
  double csr_nnz = 0, csr_rows = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != plan_.operands[i].kind)
      throw Error(fmt::format("linalg operation {}: operand {} has the wrong kind", plan_.name, i), __FILE__,
                  __LINE__);
    Argument a(0.0);
    a.rows = args[i].rows;
    a.cols = args[i].cols;
    shape_args.push_back(a);
    if (args[i].kind == NodeKind::csr_matrix) {
      csr_nnz += static_cast<double>(args[i].nnz);
      csr_rows += static_cast<double>(args[i].rows);
    }
  }
  std::vector<std::size_t> reduction_length, temporary_length, stage_rows;
  for (auto& r : plan_.reductions) {
    reduction_length.push_back(vector_length(plan_, r.node->children[0], shape_args));
    if (r.node->kind == NodeKind::inner_product &&
        vector_length(plan_, r.node->children[1], shape_args) != reduction_length.back())
      throw Error(fmt::format("linalg: inner_prod of vectors of lengths {} and {}", reduction_length.back(),
                              vector_length(plan_, r.node->children[1], shape_args)),
                  __FILE__, __LINE__);
  }
  for (auto& t : plan_.temporaries) temporary_length.push_back(vector_length(plan_, t.operand, shape_args));
  std::size_t most_rows = 0;
  for (auto& st : plan_.stages) {
    std::size_t rows = 0;
    for (int slot : st.reductions) rows = std::max(rows, reduction_length[slot]);
    for (int t : st.temporaries) rows = std::max(rows, temporary_length[t]);
    for (auto& a : st.vector_assignments) {
      const std::size_t target = args[a.target->index].rows;
      const std::size_t value =
          a.value->shape == Shape::vector ? vector_length(plan_, a.value, shape_args) : target;
      if (value != target)
        throw Error(fmt::format("linalg: assigning a vector of length {} to one of length {}", value, target),
                    __FILE__, __LINE__);
      rows = std::max(rows, target);
    }
    stage_rows.push_back(rows);
    most_rows = std::max(most_rows, rows);
  }
  bool dense = false, csr = false;
  for (auto& st : plan_.stages) {
    dense = dense || st.has_dense_product;
    csr = csr || st.has_csr_product;
  }
  PlanStage probe;
  probe.has_dense_product = dense;
  probe.has_csr_product = csr;
  const int group = group_size_for(probe, csr_rows > 0 ? csr_nnz / csr_rows : 0, most_rows);
  const rt::Program& program = program_for(group);

  const std::size_t elem = size_of(plan_.type);
  const std::size_t stride = static_cast<std::size_t>(reduction_groups_);
  const std::size_t partial_bytes = std::max<std::size_t>(1, plan_.reductions.size()) * stride * elem;
  if (partials_.bytes() < partial_bytes) partials_ = rt::Buffer(device_, partial_bytes);
  temporaries_.resize(plan_.temporaries.size());
  for (std::size_t t = 0; t < plan_.temporaries.size(); ++t)
    if (temporaries_[t].bytes() < std::max<std::size_t>(1, temporary_length[t] * elem))
      temporaries_[t] = rt::Buffer(device_, std::max<std::size_t>(1, temporary_length[t] * elem));

  std::vector<std::size_t> groups(plan_.stages.size());
  std::vector<std::size_t> parts(plan_.reductions.size(), 0);
  for (std::size_t s = 0; s < plan_.stages.size(); ++s) {
    const auto& st = plan_.stages[s];
    const int g = st.has_dense_product || st.has_csr_product ? group : 1;
    const std::size_t rows_per_group = static_cast<std::size_t>(work_group / g);
    const std::size_t wanted = (stage_rows[s] + rows_per_group - 1) / rows_per_group;
    const int cap = st.what == PlanStage::Kind::reduction ? reduction_groups_ : max_groups_;
    groups[s] = std::clamp<std::size_t>(wanted, 1, static_cast<std::size_t>(cap));
    for (int slot : st.reductions) parts[slot] = groups[s];
  }

  for (std::size_t s = 0; s < plan_.stages.size(); ++s) {
    cl_kernel k = program.kernel(plan_.stages[s].kernel_name);
    Arguments p(k, plan_.type);
    for (std::size_t i = 0; i < plan_.operands.size(); ++i) {
      const auto& a = args[i];
      switch (plan_.operands[i].kind) {
        case NodeKind::vector:
          p.buffer(a.data);
          p.integer(a.rows);
          break;
        case NodeKind::dense_matrix:
          p.buffer(a.data);
          p.integer(a.rows);
          p.integer(a.cols);
          p.integer(a.ld);
          break;
        case NodeKind::csr_matrix:
          p.buffer(a.row_ptr);
          p.buffer(a.col_idx);
          p.buffer(a.data);
          p.integer(a.rows);
          p.integer(a.cols);
          break;
        case NodeKind::host_scalar:
          p.real(a.host_value);
          break;
        case NodeKind::device_scalar:
          p.buffer(a.data);
          p.integer(a.offset);
          break;
        default:
          break;
      }
    }
    for (std::size_t t = 0; t < plan_.temporaries.size(); ++t) {
      p.buffer(temporaries_[t].get());
      p.integer(temporary_length[t]);
    }
    for (std::size_t r = 0; r < plan_.reductions.size(); ++r) {
      p.integer(reduction_length[r]);
      p.integer(parts[r]);
    }
    p.buffer(partials_.get());
    p.integer(stride);
    p.integer(stage_rows[s]);
    const std::size_t global = groups[s] * static_cast<std::size_t>(work_group);
    const std::size_t local = static_cast<std::size_t>(work_group);
    MOLACCEL_CL_TRY(
        rt::api()->EnqueueNDRangeKernel(device_.queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr),
        "clEnqueueNDRangeKernel " + plan_.stages[s].kernel_name);
  }
}

}  // namespace molaccel::linalg::cl

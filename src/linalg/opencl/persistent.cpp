// The persistent OpenCL solver: buffers, one launch of the program's kernel, results.
#include "linalg/opencl/persistent.hpp"

#include <algorithm>
#include <cmath>

#include "linalg/backend.hpp"
#include "linalg/opencl/executor.hpp"
#include "linalg/program/program_buffers.hpp"
#include "linalg/program/program_cuda.hpp"
#include "linalg/program/program_solve.hpp"

namespace molaccel::linalg::cl {

namespace {

std::size_t groups_for_rows(std::size_t n) {
  return std::max<std::size_t>(1, (n + std::size_t(work_group) - 1) / std::size_t(work_group));
}

template <class V>
rt::Buffer upload_vector(rt::Device& d, const std::vector<V>& v) {
  rt::Buffer b(d, std::max<std::size_t>(1, v.size()) * sizeof(V));
  b.write(v.data(), v.size() * sizeof(V));
  return b;
}

template <class T>
ProgramResult run_typed(rt::Device& d, const Program& program, const program::ProgramPlan& plan,
                        const ProgramInputs& inputs, int groups) {
  if (!inputs.matrix)
    throw Error("linalg program " + program.name() + ": the OpenCL run needs the matrix", __FILE__, __LINE__);
  const HostCsr<double>& a = *inputs.matrix;
  if (a.rows != a.cols)
    throw Error("linalg program " + program.name() + ": the matrix is not square", __FILE__, __LINE__);
  MOLACCEL_EXPECTS(groups >= 1, "linalg program: at least one work-group");
  const std::size_t n = a.rows;

  rt::BuildRequest request;
  request.source = program::generate_program_opencl(program, plan);
  request.program_name = program::kernel_name(program) + ".cl";
  request.kernel_names = {program::kernel_name(program)};
  request.needs_fp64 = true;  // scalars and sums in double
  const rt::Program built = rt::default_binary_cache().build(d, request);
  cl_kernel kernel = built.kernel(request.kernel_names[0]);

  const auto packed = program::pack_inputs<T>(program, inputs, n);
  const std::vector<int>& vector_symbols = packed.vector_symbols;
  const std::vector<T>& host_vectors = packed.vectors;
  const std::vector<double>& host_scalars = packed.scalars;
  const std::size_t slots =
      std::max<std::size_t>(1, std::max(plan.setup.reductions.size(), plan.iteration.reductions.size()));
  const std::size_t monitors = program.monitors().size();
  const std::size_t max_it = std::size_t(std::max(0, inputs.max_iterations));
  const std::vector<T> values(a.values.begin(), a.values.end());

  rt::Buffer row_ptr = upload_vector(d, a.row_ptr), col_idx = upload_vector(d, a.col_idx),
             d_values = upload_vector(d, values), d_vectors = upload_vector(d, host_vectors),
             d_scalars = upload_vector(d, host_scalars);
  // Zero-filled on creation: the partials, the barrier's two words, the monitors, the outcome.
  rt::Buffer d_partials(d, 2 * slots * std::size_t(groups) * sizeof(double)),
      d_counter(d, 2 * sizeof(cl_int)),
      d_monitors(d, std::max<std::size_t>(1, (max_it + 1) * monitors) * sizeof(double)),
      d_outcome(d, (2 + vector_symbols.size()) * sizeof(cl_long));

  cl_uint index = 0;
  auto arg = [&](std::size_t bytes, const void* value) {
    MOLACCEL_CL_TRY(rt::api()->SetKernelArg(kernel, index++, bytes, value), "clSetKernelArg");
  };
  const cl_mem mems[] = {row_ptr.get(), col_idx.get(), d_values.get()};
  for (const cl_mem& m : mems) arg(sizeof m, &m);
  const cl_long rows = cl_long(n);
  arg(sizeof rows, &rows);
  for (const rt::Buffer* b : {&d_vectors, &d_scalars, &d_partials, &d_counter, &d_monitors, &d_outcome}) {
    const cl_mem m = b->get();
    arg(sizeof m, &m);
  }
  const cl_int cap = inputs.max_iterations;
  arg(sizeof cap, &cap);
  MOLACCEL_CL_TRY(rt::api()->Finish(d.queue), "clFinish");

  const std::size_t global = std::size_t(groups) * std::size_t(work_group), local = std::size_t(work_group);
  const double start = now_seconds();
  MOLACCEL_CL_TRY(
      rt::api()->EnqueueNDRangeKernel(d.queue, kernel, 1, nullptr, &global, &local, 0, nullptr, nullptr),
      "clEnqueueNDRangeKernel " + request.kernel_names[0]);
  MOLACCEL_CL_TRY(rt::api()->Finish(d.queue), "clFinish");
  const double seconds = now_seconds() - start;

  std::vector<cl_long> outcome(2 + vector_symbols.size());
  d_outcome.read(outcome.data(), outcome.size() * sizeof(cl_long));
  std::vector<T> got_vectors(host_vectors.size());
  d_vectors.read(got_vectors.data(), got_vectors.size() * sizeof(T));
  std::vector<double> got_scalars(host_scalars.size()),
      got_monitors(std::max<std::size_t>(1, (max_it + 1) * monitors));
  d_scalars.read(got_scalars.data(), got_scalars.size() * sizeof(double));
  d_monitors.read(got_monitors.data(), got_monitors.size() * sizeof(double));

  return program::unpack_result(program, plan, vector_symbols, n, outcome, got_vectors, got_scalars,
                                got_monitors, groups, seconds);
}

}  // namespace

int persistent_groups(const OpenClDeviceInfo& info, std::size_t n) {
  if (!info.gpu || !info.fp64 || info.compute_units < 1) return 0;
  if (n > 4 * std::size_t(work_group) * std::size_t(info.compute_units)) return 0;
  return forced_persistent_groups(info, n);
}

int forced_persistent_groups(const OpenClDeviceInfo& info, std::size_t n) {
  if (!info.gpu) return 1;
  return int(std::min<std::size_t>(groups_for_rows(n), std::size_t(std::max(1, info.compute_units))));
}

ProgramResult run_program(rt::Device& device, const Program& program, const ProgramInputs& inputs,
                          int groups) {
  rt::require_fp64(device.info, "the persistent solver kernel (scalars and sums in double)");
  const auto plan = program::plan_program(program);
  return program.type() == ValueType::f32 ? run_typed<float>(device, program, plan, inputs, groups)
                                          : run_typed<double>(device, program, plan, inputs, groups);
}

SolverResult solve_persistent(rt::Device& device, const HostCsr<double>& a, std::span<const double> b,
                              const SolverOptions& options, int groups) {
  if (options.preconditioner != Preconditioner::none)
    throw InputError("--launch", 0,
                     "the persistent OpenCL solver has no preconditioner (use --precond none, or "
                     "--launch graph for the host loop)");
  const auto inputs = program_inputs(a, b, options);
  if (!inputs) return zero_rhs_result(a.rows);
  const ProgramResult run = run_program(device, program_of(options), *inputs, groups);
  const int barriers = run.barriers_per_iteration;
  SolverResult result = solver_result(run);
  result.kernels_per_iteration = 1;  // at most (as a CUDA generated kernel): one launch per solve
  result.host_checks = 1;
  result.backend =
      fmt::format("opencl:{} ({}) persistent ({} work-groups of {}, {} grid barriers per iteration)",
                  device.info.index, device.info.name, groups, work_group, barriers);
  return result;
}

}  // namespace molaccel::linalg::cl

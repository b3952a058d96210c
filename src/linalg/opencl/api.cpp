// linalg on OpenCL: one operation on host operands, and CG / BiCGStab either as one persistent
// kernel (persistent.cpp: small systems on a GPU) or as a host loop over the solvers' generated
// operations (the plans of solver_plans(); the CUDA graph path's batches of iterations without
// the graph).
#include <cmath>

#include "linalg/backend.hpp"
#include "linalg/codegen/codegen.hpp"
#include "linalg/opencl/executor.hpp"
#include "linalg/opencl/persistent.hpp"
#include "linalg/program/program_solve.hpp"
#include "molaccel/opencl.hpp"

namespace molaccel::linalg::opencl {

namespace {

namespace rt = ::molaccel::opencl;

// Host doubles as the operation's element type.
rt::Buffer upload(rt::Device& d, ValueType type, std::span<const double> values) {
  rt::Buffer b(d, std::max<std::size_t>(1, values.size()) * size_of(type));
  if (type == ValueType::f64) {
    b.write(values.data(), values.size() * 8);
  } else {
    std::vector<float> f(values.begin(), values.end());
    b.write(f.data(), f.size() * 4);
  }
  return b;
}

void download(const rt::Buffer& b, ValueType type, std::span<double> out, std::size_t first = 0) {
  if (type == ValueType::f64) {
    b.read(out.data(), out.size() * 8, first * 8);
  } else {
    std::vector<float> f(out.size());
    b.read(f.data(), f.size() * 4, first * 4);
    std::copy(f.begin(), f.end(), out.begin());
  }
}

rt::Buffer upload_ints(rt::Device& d, const std::vector<std::int32_t>& v) {
  rt::Buffer b(d, std::max<std::size_t>(1, v.size()) * 4);
  b.write(v.data(), v.size() * 4);
  return b;
}

}  // namespace

std::string source(const CustomOperation& operation, int group) {
  return generate_opencl_source(operation.plan(), group);
}

void execute(const CustomOperation& operation, int device, std::vector<ReferenceOperand>& operands) {
  const OperationPlan& plan = operation.plan();
  if (operands.size() != plan.operands.size())
    throw Error(fmt::format("linalg operation {} takes {} operands, got {}", plan.name, plan.operands.size(),
                            operands.size()),
                __FILE__, __LINE__);
  rt::Device& d = rt::device(device);
  cl::Executor executor(plan, d);
  std::vector<rt::Buffer> buffers;  // values (or row_ptr, col_idx, values for CSR) per operand
  std::vector<cl::Operand> args(operands.size());
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const auto& o = operands[i];
    cl::Operand& a = args[i];
    a.kind = plan.operands[i].kind;
    switch (a.kind) {
      case NodeKind::vector:  // also a matrix of an element-wise matrix operation, flattened
        buffers.push_back(upload(d, plan.type, o.values));
        a.data = buffers.back().get();
        a.rows = o.values.size();
        a.cols = 1;
        break;
      case NodeKind::dense_matrix:
        buffers.push_back(upload(d, plan.type, o.values));
        a.data = buffers.back().get();
        a.rows = o.rows;
        a.cols = o.cols;
        a.ld = o.cols;
        MOLACCEL_EXPECTS(o.values.size() == o.rows * o.cols, "opencl::execute: dense matrix size");
        break;
      case NodeKind::csr_matrix:
        MOLACCEL_EXPECTS(o.csr != nullptr, "opencl::execute: CSR operand without a matrix");
        buffers.push_back(upload_ints(d, o.csr->row_ptr));
        a.row_ptr = buffers.back().get();
        buffers.push_back(upload_ints(d, o.csr->col_idx));
        a.col_idx = buffers.back().get();
        buffers.push_back(upload(d, plan.type, o.csr->values));
        a.data = buffers.back().get();
        a.rows = o.csr->rows;
        a.cols = o.csr->cols;
        a.nnz = o.csr->nnz();
        break;
      case NodeKind::host_scalar:
        MOLACCEL_EXPECTS(o.values.size() == 1, "opencl::execute: a scalar has one value");
        a.host_value = o.values[0];
        break;
      case NodeKind::device_scalar:
        MOLACCEL_EXPECTS(o.values.size() == 1, "opencl::execute: a scalar has one value");
        buffers.push_back(upload(d, plan.type, o.values));
        a.data = buffers.back().get();
        a.rows = 1;
        break;
      default:
        break;
    }
  }
  executor.run(args);
  std::size_t b = 0;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const NodeKind k = plan.operands[i].kind;
    if (k == NodeKind::host_scalar) continue;
    const std::size_t index = b;
    b += k == NodeKind::csr_matrix ? 3 : 1;
    if (plan.operands[i].written) download(buffers[index], plan.type, operands[i].values);
  }
}

namespace {

// Slot layout of the history array (as in the solvers): field * slots + slot.

template <class T>
SolverResult solve_typed(rt::Device& d, const HostCsr<double>& host_a, std::span<const double> host_b,
                         const SolverOptions& options) {
  const ValueType type = value_type_of<T>();
  const bool jacobi = options.preconditioner == Preconditioner::jacobi;
  const bool cg = options.solver == Solver::cg;
  const auto plans = solver_plans(type, jacobi);
  // solver_plans' order: bicg_init, bicg_v, bicg_s, bicg_t, bicg_x, bicg_p, cg_init, cg_q, cg_x, cg_p, carry.
  cl::Executor bicg_init(*plans[0], d), bicg_v(*plans[1], d), bicg_s(*plans[2], d), bicg_t(*plans[3], d),
      bicg_x(*plans[4], d), bicg_p(*plans[5], d), cg_init(*plans[6], d), cg_q(*plans[7], d),
      cg_x(*plans[8], d), cg_p(*plans[9], d), carry(*plans[10], d);
  const std::size_t n = host_a.rows;

  SolverResult result;
  double bb = 0;
  for (double v : host_b) bb += v * v;
  if (bb == 0) return zero_rhs_result(n);
  const double threshold = options.tolerance * options.tolerance * bb;

  const std::vector<double> diag = inverse_diagonal(host_a);
  rt::Buffer row_ptr = upload_ints(d, host_a.row_ptr), col_idx = upload_ints(d, host_a.col_idx),
             values = upload(d, type, host_a.values), b = upload(d, type, host_b), dg = upload(d, type, diag);
  const std::size_t bytes = std::max<std::size_t>(1, n) * sizeof(T);
  rt::Buffer x(d, bytes), r(d, bytes), r0(d, bytes), p(d, bytes), v(d, bytes), s(d, bytes), t(d, bytes);
  const int batch = std::max(1, options.batch > 0 ? options.batch : 8);
  const std::size_t slots = std::size_t(batch) + 1;
  rt::Buffer history(d, n_fields * slots * sizeof(T));

  auto vec = [&](const rt::Buffer& buf) {
    cl::Operand o;
    o.data = buf.get();
    o.rows = n;
    o.cols = 1;
    return o;
  };
  cl::Operand a;
  a.kind = NodeKind::csr_matrix;
  a.data = values.get();
  a.row_ptr = row_ptr.get();
  a.col_idx = col_idx.get();
  a.rows = a.cols = n;
  a.nnz = host_a.nnz();
  auto at = [&](HistoryField f, std::size_t slot) {
    cl::Operand o;
    o.kind = NodeKind::device_scalar;
    o.data = history.get();
    o.offset = std::size_t(f) * slots + slot;
    o.rows = 1;
    return o;
  };
  cl::Operand thr;
  thr.kind = NodeKind::host_scalar;
  thr.host_value = static_cast<double>(static_cast<T>(threshold));
  const cl::Operand d_op = vec(dg);
  auto with_d = [&](std::vector<cl::Operand> ops) {
    if (jacobi) ops.push_back(d_op);
    return ops;
  };

  if (cg)
    cg_init.run(with_d({vec(r), vec(p), vec(b), at(f_rho, 0), at(f_rr, 0), at(f_active, 0), thr}));
  else
    bicg_init.run({vec(r), vec(r0), vec(p), vec(b), at(f_rho, 0), at(f_rr, 0), at(f_active, 0), thr});

  auto iteration = [&](std::size_t j) {
    auto cur = [&](HistoryField f) { return at(f, j); };
    auto next = [&](HistoryField f) { return at(f, j + 1); };
    if (cg) {
      cg_q.run({vec(v), a, vec(p)});
      cg_x.run({vec(x), vec(r), vec(p), vec(v), cur(f_rho), cur(f_active), next(f_alpha)});
      cg_p.run(with_d({vec(p), vec(r), cur(f_rho), next(f_alpha), cur(f_active), next(f_rho), next(f_rr),
                       next(f_active), thr}));
    } else {
      bicg_v.run(with_d({vec(v), a, vec(p)}));
      bicg_s.run({vec(s), vec(r), vec(v), vec(r0), cur(f_rho), cur(f_active), next(f_alpha)});
      bicg_t.run(with_d({vec(t), a, vec(s)}));
      bicg_x.run(
          with_d({vec(x), vec(r), vec(s), vec(t), vec(p), next(f_alpha), cur(f_active), next(f_omega)}));
      bicg_p.run({vec(p), vec(r), vec(r0), vec(v), cur(f_rho), next(f_alpha), next(f_omega), cur(f_active),
                  next(f_rho), next(f_rr), next(f_active), thr});
    }
  };
  auto read_history = [&] {
    std::vector<T> h(n_fields * slots);
    history.read(h.data(), h.size() * sizeof(T));
    return h;
  };

  std::vector<T> h = read_history();
  result.residual_history.push_back(std::sqrt(std::max(0.0, double(h[f_rr * slots])) / bb));
  bool active = h[f_active * slots] != T(0);
  result.status = active ? SolverStatus::max_iterations : SolverStatus::converged;
  const double start = now_seconds();
  while (active && result.iterations < options.max_iterations) {
    const int todo = std::min(batch, options.max_iterations - result.iterations);
    for (int j = 0; j < todo; ++j) iteration(std::size_t(j));
    const std::size_t last = std::size_t(todo);
    carry.run({at(f_rho, 0), at(f_alpha, 0), at(f_omega, 0), at(f_rr, 0), at(f_active, 0), at(f_rho, last),
               at(f_alpha, last), at(f_omega, last), at(f_rr, last), at(f_active, last)});
    h = read_history();
    ++result.host_checks;
    for (int j = 0; j < todo && active; ++j)
      active = account_iteration(result, cg, bb, threshold, double(h[f_rr * slots + j + 1]),
                                 double(h[f_alpha * slots + j + 1]), double(h[f_omega * slots + j + 1]),
                                 h[f_active * slots + j + 1] != T(0));
  }
  MOLACCEL_CL_TRY(rt::api()->Finish(d.queue), "clFinish");
  result.seconds = now_seconds() - start;
  result.seconds_per_iteration = result.iterations ? result.seconds / result.iterations : 0;
  result.relative_residual = result.residual_history.back();
  result.x.assign(n, 0.0);
  download(x, type, result.x);
  result.kernels_per_iteration = 0;
  for (const OperationPlan* plan :
       cg ? std::vector<const OperationPlan*>{plans[7], plans[8], plans[9]}
          : std::vector<const OperationPlan*>{plans[1], plans[2], plans[3], plans[4], plans[5]})
    result.kernels_per_iteration += static_cast<int>(plan->stages.size());
  result.backend = fmt::format("opencl:{} ({}) host loop x{}", d.info.index, d.info.name, batch);
  return result;
}

}  // namespace

SolverResult solve(int device, const HostCsr<double>& a, std::span<const double> b,
                   const SolverOptions& options) {
  if (a.rows != a.cols)
    throw Error(fmt::format("solve: the matrix is {} x {}, not square", a.rows, a.cols), __FILE__, __LINE__);
  if (b.size() != a.rows)
    throw Error(
        fmt::format("solve: right-hand side of length {} for a {} x {} matrix", b.size(), a.rows, a.cols),
        __FILE__, __LINE__);
  MOLACCEL_EXPECTS(options.tolerance >= 0 && options.max_iterations >= 0,
                   "solve: bad tolerance or iteration cap");
  rt::Device& d = rt::device(device);
  if (options.precision == Precision::fp64)
    rt::require_fp64(d.info, "a double-precision solve (--precision fp64)");
  // The persistent kernel: --launch generated asks for it; automatic takes it where
  // cl::persistent_groups says so and there is no preconditioner; graph: the host loop.
  if (is_program_solver(options.solver)) {  // programs only: the persistent kernel, at any size
    check_program_solver_options(options);
    const int groups = cl::persistent_groups(d.info, a.rows);
    return cl::solve_persistent(d, a, b, options,
                                groups > 0 ? groups : cl::forced_persistent_groups(d.info, a.rows));
  }
  if (options.launch == Launch::generated)
    return cl::solve_persistent(d, a, b, options, cl::forced_persistent_groups(d.info, a.rows));
  if (options.launch == Launch::automatic && options.preconditioner == Preconditioner::none)
    if (const int groups = cl::persistent_groups(d.info, a.rows); groups > 0)
      return cl::solve_persistent(d, a, b, options, groups);
  return options.precision == Precision::fp32 ? solve_typed<float>(d, a, b, options)
                                              : solve_typed<double>(d, a, b, options);
}

}  // namespace molaccel::linalg::opencl

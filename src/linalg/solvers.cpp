// solve(): on a GPU CG and BiCGStab run as their programs, one generated kernel per solve
// (program/program_solve.cpp), as the pipelined methods do everywhere. Here: CG and BiCGStab
// written once over the expression generator, one CustomOperation per step, which run on the CPU
// backend (fused, vectorised, threaded loops) and on a GPU with Launch::graph (the steps'
// kernels replayed as a CUDA graph per batch of iterations).
//
// Every scalar of an iteration lives in device memory, in a small history array with one slot
// per iteration of a batch (iteration j reads slot j, writes slot j+1), so a batch of
// iterations runs without a host round trip and the host reads all slots with one copy. An
// `active` flag in each slot masks the step sizes once the residual is small enough or the
// recurrence breaks down (rho = 0, omega = 0, (p, Ap) = 0), so iterations after the stop inside
// a batch change nothing and no division by zero ever produces NaN (safe_div gives 0).
#include <algorithm>
#include <cmath>

#include "linalg/backend.hpp"
#include "linalg/program/program_solve.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

std::string_view to_string(SolverStatus s) {
  switch (s) {
    case SolverStatus::converged:
      return "converged";
    case SolverStatus::max_iterations:
      return "iteration limit";
    case SolverStatus::breakdown_rho:
      return "breakdown (rho = 0)";
    case SolverStatus::breakdown_omega:
      return "breakdown (omega = 0)";
    case SolverStatus::breakdown_alpha:
      return "breakdown ((p, Ap) = 0)";
    case SolverStatus::zero_rhs:
      return "zero right-hand side";
  }
  return "?";
}

std::string_view to_string(Solver k) {
  switch (k) {
    case Solver::cg:
      return "cg";
    case Solver::bicgstab:
      return "bicgstab";
    case Solver::pipelined_cg:
      return "pipelined-cg";
    case Solver::pipelined_bicgstab:
      return "pipelined-bicgstab";
  }
  return "?";
}

std::string_view to_string(Launch l) {
  switch (l) {
    case Launch::automatic:
      return "automatic";
    case Launch::graph:
      return "graph";
    case Launch::generated:
      return "generated";
  }
  return "?";
}

std::optional<Launch> launch_from_string(std::string_view name) {
  if (name == "auto") return Launch::automatic;
  if (name == "graph") return Launch::graph;
  if (name == "generated") return Launch::generated;
  return std::nullopt;
}

SolverResult zero_rhs_result(std::size_t n) {
  SolverResult result;
  result.x.assign(n, 0.0);
  result.status = SolverStatus::zero_rhs;
  result.residual_history = {0.0};
  return result;
}

std::vector<double> inverse_diagonal(const HostCsr<double>& a) {
  std::vector<double> d(a.rows, 1.0);
  for (std::size_t r = 0; r < a.rows; ++r)
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k)
      if (static_cast<std::size_t>(a.col_idx[k]) == r && a.values[k] != 0) d[r] = 1.0 / a.values[k];
  return d;
}

bool account_iteration(SolverResult& result, bool cg, double bb, double threshold, double rr_raw,
                       double alpha, double omega, bool still_active) {
  ++result.iterations;
  const double rr = std::max(0.0, rr_raw);
  result.residual_history.push_back(std::sqrt(rr / bb));
  if (still_active) return true;
  if (rr <= threshold)
    result.status = SolverStatus::converged;
  else if (alpha == 0)
    result.status = cg ? SolverStatus::breakdown_alpha : SolverStatus::breakdown_rho;
  else if (!cg && omega == 0)
    result.status = SolverStatus::breakdown_omega;
  else
    result.status = SolverStatus::breakdown_rho;
  return false;
}

namespace {

template <class T>
struct SlotView {
  const Vector<T>& history;
  std::size_t slots;
  Scalar<T> at(HistoryField f, std::size_t slot) const {
    return history.element(std::size_t(f) * slots + slot);
  }
};

// The operations of both solvers, built once per element type and preconditioner.
template <class T>
struct KrylovOperations {
  // Operand numbers are per operation (the paper's SymbolicVector<T, i>).
  SymbolicVector<T, 0> v0;
  SymbolicVector<T, 1> v1;
  SymbolicVector<T, 2> v2;
  SymbolicVector<T, 3> v3;
  SymbolicVector<T, 4> v4;
  SymbolicCsrMatrix<T, 1> a1;

  explicit KrylovOperations(bool jacobi) : jacobi_(jacobi) {
    // ---- BiCGStab (right preconditioned: M = diag(A)^-1) ----
    {  // v = A M p
      SymbolicVector<T, 3> d;
      bicg_v = std::make_unique<CustomOperation>(v0 = prod(a1, precond(v2, d)));
    }
    {  // alpha = rho / (r0, v); s = r - alpha v
      GpuSymbolicScalar<T, 4> rho;
      GpuSymbolicScalar<T, 5> active;
      GpuSymbolicScalar<T, 6> alpha_next;
      auto alpha = active * safe_div(rho, inner_prod(v3, v2));
      bicg_s = std::make_unique<CustomOperation>(v0 = v1 - alpha * v2, alpha_next = alpha);
    }
    {  // t = A M s
      SymbolicVector<T, 3> d;
      bicg_t = std::make_unique<CustomOperation>(v0 = prod(a1, precond(v2, d)));
    }
    {  // omega = (t, s) / (t, t); x += alpha M p + omega M s; r = s - omega t
      GpuSymbolicScalar<T, 5> alpha;
      GpuSymbolicScalar<T, 6> active;
      GpuSymbolicScalar<T, 7> omega_next;
      SymbolicVector<T, 8> d;
      auto omega = active * safe_div(inner_prod(v3, v2), inner_prod(v3, v3));
      bicg_x = std::make_unique<CustomOperation>(v0 = v0 + alpha * precond(v4, d) + omega * precond(v2, d),
                                                 v1 = v2 - omega * v3, omega_next = omega);
    }
    {  // rho' = (r0, r); p = r + (rho'/rho)(alpha/omega)(p - omega v); convergence flag
      GpuSymbolicScalar<T, 4> rho;
      GpuSymbolicScalar<T, 5> alpha;
      GpuSymbolicScalar<T, 6> omega;
      GpuSymbolicScalar<T, 7> active;
      GpuSymbolicScalar<T, 8> rho_next;
      GpuSymbolicScalar<T, 9> rr_next;
      GpuSymbolicScalar<T, 10> active_next;
      CpuSymbolicScalar<T, 11> threshold;
      auto rho_new = inner_prod(v2, v1);
      auto rr = inner_prod(v1, v1);
      bicg_p = std::make_unique<CustomOperation>(
          v0 = v1 + safe_div(rho_new, rho) * safe_div(alpha, omega) * (v0 - omega * v3), rho_next = rho_new,
          rr_next = rr,
          active_next = active * greater(rr, threshold) * nonzero(rho_new) * nonzero(omega) * nonzero(alpha));
    }
    {  // r = r0 = p = b; rho = rr = (b, b)
      GpuSymbolicScalar<T, 4> rho;
      GpuSymbolicScalar<T, 5> rr;
      GpuSymbolicScalar<T, 6> active;
      CpuSymbolicScalar<T, 7> threshold;
      auto bb = inner_prod(v3, v3);
      bicg_init = std::make_unique<CustomOperation>(v0 = v3, v1 = v3, v2 = v3, rho = bb, rr = bb,
                                                    active = greater(bb, threshold));
    }
    // ---- CG (preconditioned with M = diag(A)^-1) ----
    cg_q = std::make_unique<CustomOperation>(v0 = prod(a1, v2));
    {  // alpha = (r, z) / (p, q); x += alpha p; r -= alpha q
      GpuSymbolicScalar<T, 4> rz;
      GpuSymbolicScalar<T, 5> active;
      GpuSymbolicScalar<T, 6> alpha_next;
      auto alpha = active * safe_div(rz, inner_prod(v2, v3));
      cg_x =
          std::make_unique<CustomOperation>(v0 = v0 + alpha * v2, v1 = v1 - alpha * v3, alpha_next = alpha);
    }
    {  // z = M r; rz' = (r, z); p = z + (rz'/rz) p
      GpuSymbolicScalar<T, 2> rz;
      GpuSymbolicScalar<T, 3> alpha;
      GpuSymbolicScalar<T, 4> active;
      GpuSymbolicScalar<T, 5> rz_next;
      GpuSymbolicScalar<T, 6> rr_next;
      GpuSymbolicScalar<T, 7> active_next;
      CpuSymbolicScalar<T, 8> threshold;
      SymbolicVector<T, 9> d;
      auto z = precond(v1, d);
      auto rz_new = inner_prod(v1, z);
      auto rr = inner_prod(v1, v1);
      cg_p = std::make_unique<CustomOperation>(
          v0 = z + safe_div(rz_new, rz) * v0, rz_next = rz_new, rr_next = rr,
          active_next = active * greater(rr, threshold) * nonzero(alpha) * nonzero(rz_new));
    }
    {  // r = b; p = M b; rz = (b, M b); rr = (b, b)
      SymbolicVector<T, 2> b;
      GpuSymbolicScalar<T, 3> rz;
      GpuSymbolicScalar<T, 4> rr;
      GpuSymbolicScalar<T, 5> active;
      CpuSymbolicScalar<T, 6> threshold;
      SymbolicVector<T, 7> d;
      auto bb = inner_prod(b, b);
      cg_init =
          std::make_unique<CustomOperation>(v0 = b, v1 = precond(b, d), rz = inner_prod(b, precond(b, d)),
                                            rr = bb, active = greater(bb, threshold));
    }
    {  // carry the last slot of a batch into slot 0 (5 fields)
      GpuSymbolicScalar<T, 0> d0;
      GpuSymbolicScalar<T, 1> d1;
      GpuSymbolicScalar<T, 2> d2;
      GpuSymbolicScalar<T, 3> d3;
      GpuSymbolicScalar<T, 4> d4;
      GpuSymbolicScalar<T, 5> s0;
      GpuSymbolicScalar<T, 6> s1;
      GpuSymbolicScalar<T, 7> s2;
      GpuSymbolicScalar<T, 8> s3;
      GpuSymbolicScalar<T, 9> s4;
      carry = std::make_unique<CustomOperation>(d0 = s0, d1 = s1, d2 = s2, d3 = s3, d4 = s4);
    }
  }

  Expression precond(const Expression& v, const Expression& d) const {
    return jacobi_ ? element_prod(d, v) : v;
  }

  std::unique_ptr<CustomOperation> bicg_v, bicg_s, bicg_t, bicg_x, bicg_p, bicg_init;
  std::unique_ptr<CustomOperation> cg_q, cg_x, cg_p, cg_init, carry;

 private:
  bool jacobi_;
};

template <class T>
const KrylovOperations<T>& operations_for(bool jacobi) {
  static const KrylovOperations<T> plain(false), preconditioned(true);
  return jacobi ? preconditioned : plain;
}

// Timing, final residual and x on the host: the end of every solve path.
template <class T>
void finish_result(SolverResult& result, const Vector<T>& x, double start) {
  result.seconds = now_seconds() - start;
  result.seconds_per_iteration = result.iterations ? result.seconds / result.iterations : 0;
  result.relative_residual = result.residual_history.back();
  const auto x_host = x.to_host();
  result.x.assign(x_host.begin(), x_host.end());
}

template <class T>
SolverResult solve_on(const Placement& where, const HostCsr<double>& host_a, std::span<const double> host_b,
                      const SolverOptions& options, const std::function<void(int)>& progress) {
  const bool jacobi = options.preconditioner == Preconditioner::jacobi;
  const bool cg = options.solver == Solver::cg;
  const auto& ops = operations_for<T>(jacobi);
  const std::size_t n = host_a.rows;

  SolverResult result;
  double bb = 0;
  for (double v : host_b) bb += v * v;
  if (bb == 0) return zero_rhs_result(n);
  const double threshold = options.tolerance * options.tolerance * bb;

  // Device data, uploaded once.
  CsrMatrix<T> a(where, host_a);
  const auto inverse_diag = inverse_diagonal(host_a);
  std::vector<T> b_t(host_b.begin(), host_b.end()), d_t(inverse_diag.begin(), inverse_diag.end());
  Vector<T> b(where, n), d(where, n), x(where, n), r(where, n), r0(where, n), p(where, n), v(where, n),
      s(where, n), t(where, n);
  b.copy_from_host(b_t);
  d.copy_from_host(d_t);

  const bool gpu = where.on_gpu();
  const int batch = std::max(1, options.batch > 0 ? options.batch : gpu ? 8 : 1);
  const std::size_t slots = std::size_t(batch) + 1;
  Vector<T> history(where, n_fields * slots);
  const SlotView<T> sv{history, slots};
  const T thr = T(threshold);

  // Initialisation into slot 0.
  if (cg && jacobi)
    (*ops.cg_init)(r, p, b, sv.at(f_rho, 0), sv.at(f_rr, 0), sv.at(f_active, 0), thr, d);
  else if (cg)
    (*ops.cg_init)(r, p, b, sv.at(f_rho, 0), sv.at(f_rr, 0), sv.at(f_active, 0), thr);
  else
    (*ops.bicg_init)(r, r0, p, b, sv.at(f_rho, 0), sv.at(f_rr, 0), sv.at(f_active, 0), thr);

  auto iteration = [&](std::size_t j) {
    auto cur = [&](HistoryField f) { return sv.at(f, j); };
    auto next = [&](HistoryField f) { return sv.at(f, j + 1); };
    if (cg) {
      (*ops.cg_q)(v, a, p);
      (*ops.cg_x)(x, r, p, v, cur(f_rho), cur(f_active), next(f_alpha));
      if (jacobi)
        (*ops.cg_p)(p, r, cur(f_rho), next(f_alpha), cur(f_active), next(f_rho), next(f_rr), next(f_active),
                    thr, d);
      else
        (*ops.cg_p)(p, r, cur(f_rho), next(f_alpha), cur(f_active), next(f_rho), next(f_rr), next(f_active),
                    thr);
    } else {
      if (jacobi)
        (*ops.bicg_v)(v, a, p, d);
      else
        (*ops.bicg_v)(v, a, p);
      (*ops.bicg_s)(s, r, v, r0, cur(f_rho), cur(f_active), next(f_alpha));
      if (jacobi)
        (*ops.bicg_t)(t, a, s, d);
      else
        (*ops.bicg_t)(t, a, s);
      if (jacobi)
        (*ops.bicg_x)(x, r, s, t, p, next(f_alpha), cur(f_active), next(f_omega), d);
      else
        (*ops.bicg_x)(x, r, s, t, p, next(f_alpha), cur(f_active), next(f_omega));
      (*ops.bicg_p)(p, r, r0, v, cur(f_rho), next(f_alpha), next(f_omega), cur(f_active), next(f_rho),
                    next(f_rr), next(f_active), thr);
    }
  };
  auto record_batch = [&](int iterations) {
    for (int j = 0; j < iterations; ++j) iteration(std::size_t(j));
    const std::size_t last = std::size_t(iterations);
    (*ops.carry)(sv.at(f_rho, 0), sv.at(f_alpha, 0), sv.at(f_omega, 0), sv.at(f_rr, 0), sv.at(f_active, 0),
                 sv.at(f_rho, last), sv.at(f_alpha, last), sv.at(f_omega, last), sv.at(f_rr, last),
                 sv.at(f_active, last));
  };

  std::vector<T> h = history.to_host();
  result.residual_history.push_back(std::sqrt(std::max(0.0, double(h[f_rr * slots])) / bb));
  bool active = h[f_active * slots] != T(0);
  result.status = active ? SolverStatus::max_iterations : SolverStatus::converged;

#ifdef MOLACCEL_HAVE_CUDA
  // Kernels are compiled and workspaces allocated before capturing and before the clock starts.
  std::unique_ptr<gpu::CapturedWork> captured;
  if (gpu && active) {
    {
      gpu::PrepareOnlyScope prepare;
      record_batch(batch);
    }
    captured = std::make_unique<gpu::CapturedWork>(where.device, [&] { record_batch(batch); });
  }
#endif

  const double start = now_seconds();
  while (active && result.iterations < options.max_iterations) {
    const int todo = std::min(batch, options.max_iterations - result.iterations);
#ifdef MOLACCEL_HAVE_CUDA
    if (captured && todo == batch)
      captured->launch();
    else
      record_batch(todo);
#else
    record_batch(todo);
#endif
    h = history.to_host();
    ++result.host_checks;
    for (int j = 0; j < todo && active; ++j)
      active = account_iteration(result, cg, bb, threshold, double(h[f_rr * slots + j + 1]),
                                 double(h[f_alpha * slots + j + 1]), double(h[f_omega * slots + j + 1]),
                                 h[f_active * slots + j + 1] != T(0));
    if (progress) progress(result.iterations);
  }
  finish_result(result, x, start);
  if (gpu) {
    result.kernels_per_iteration =
        cg ? ops.cg_q->kernels_per_run() + ops.cg_x->kernels_per_run() + ops.cg_p->kernels_per_run()
           : ops.bicg_v->kernels_per_run() + ops.bicg_s->kernels_per_run() + ops.bicg_t->kernels_per_run() +
                 ops.bicg_x->kernels_per_run() + ops.bicg_p->kernels_per_run();
    result.backend = fmt::format("{} graph x{}", where.describe(), batch);
  } else {
    result.backend =
        fmt::format("cpu/{} ({} threads)", cg ? ops.cg_x->last_cpu_variant() : ops.bicg_x->last_cpu_variant(),
                    where.cpu_threads);
  }
  return result;
}

}  // namespace

std::vector<const OperationPlan*> solver_plans(ValueType type, bool jacobi) {
  std::vector<const OperationPlan*> out;
  auto collect = [&](const auto& ops) {
    for (const auto* op : {&ops.bicg_init, &ops.bicg_v, &ops.bicg_s, &ops.bicg_t, &ops.bicg_x, &ops.bicg_p,
                           &ops.cg_init, &ops.cg_q, &ops.cg_x, &ops.cg_p, &ops.carry})
      out.push_back(&(*op)->plan());
  };
  if (type == ValueType::f32)
    collect(operations_for<float>(jacobi));
  else
    collect(operations_for<double>(jacobi));
  return out;
}

SolverResult solve(const Resources& resources, const HostCsr<double>& a, std::span<const double> b,
                   const SolverOptions& options) {
  if (a.rows != a.cols)
    throw Error(fmt::format("solve: the matrix is {} x {}, not square", a.rows, a.cols), __FILE__, __LINE__);
  if (b.size() != a.rows)
    throw Error(
        fmt::format("solve: right-hand side of length {} for a {} x {} matrix", b.size(), a.rows, a.cols),
        __FILE__, __LINE__);
  MOLACCEL_EXPECTS(options.tolerance >= 0 && options.max_iterations >= 0,
                   "solve: bad tolerance or iteration cap");
  check_program_solver_options(options);
  SolverResult result;
  JobOptions job;
  job.name = "solve";
  job.progress_bar = false;
  run_tiles(
      resources, 1,
      [&](WorkerContext& ctx, std::size_t) {
        // Programs: the pipelined methods everywhere, CG and BiCGStab on a GPU (Launch::graph
        // aside) and with Launch::generated on a CPU.
        const bool on_gpu = ctx.worker().kind == WorkerInfo::Kind::gpu;
        const IterationProgress progress(resources, "solve", options.max_iterations);
        if (is_program_solver(options.solver) || options.launch == Launch::generated ||
            (on_gpu && options.launch == Launch::automatic)) {
          result = solve_program_on(ctx.worker(), a, b, options, progress.callback());
          return;
        }
        Placement where;
        if (on_gpu) where.device = ctx.worker().device;
        where.cpu_threads = on_gpu ? 0 : ctx.worker().cpu_threads;
        result = options.precision == Precision::fp32
                     ? solve_on<float>(where, a, b, options, progress.callback())
                     : solve_on<double>(where, a, b, options, progress.callback());
      },
      job);
  return result;
}

}  // namespace molaccel::linalg

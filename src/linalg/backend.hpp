// The backends behind CustomOperation and the containers. CUDA-free: the GPU functions are
// defined in cuda/*.cu and exist only when MOLACCEL_HAVE_CUDA is defined; callers guard them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "linalg/plan.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

// CPU: one fused, threaded, vectorised loop per stage. Returns the SIMD variant that ran.
std::string cpu_execute(const OperationPlan& plan, const std::vector<Argument>& args,
                        const BoundShapes& shapes);

// CUDA source of every stage of `plan`; `group` threads cooperate on one row of a product.
std::string generate_cuda_source(const OperationPlan& plan, int group);
// Threads per row for a stage with products: 32 for dense rows, fewer for short CSR rows.
// rows: of the product's output (0: unknown, counted as small).
int group_size_for(const PlanStage& stage, double csr_average_row_nnz, std::size_t rows = 0);

// Every operation the solvers generate (tests compile them with NVRTC without a GPU).
std::vector<const OperationPlan*> solver_plans(ValueType type, bool jacobi);
// What every solve path shares: the result for b = 0 (x = 0, nothing iterated), and the Jacobi
// preconditioner diag(A)^-1 (1 where a row has no nonzero diagonal entry).
SolverResult zero_rhs_result(std::size_t n);
std::vector<double> inverse_diagonal(const HostCsr<double>& a);
// The solvers' history array (solver_plans' device scalars): field * slots + slot.
enum HistoryField { f_rho = 0, f_alpha = 1, f_omega = 2, f_rr = 3, f_active = 4, n_fields = 5 };
// Accounts one iteration's record (its slot's fields) in `result`; returns whether the iteration
// goes on. Shared by the solve paths over history arrays (CUDA graph, CPU, OpenCL).
bool account_iteration(SolverResult& result, bool cg, double bb, double threshold, double rr_raw,
                       double alpha, double omega, bool still_active);

namespace gpu {
struct operation_state;  // compiled programs and workspace of one operation on one device

void* allocate(int device, std::size_t bytes);  // zero-filled
void release(int device, void* ptr) noexcept;
void upload(int device, void* dst, const void* src, std::size_t bytes);
void download(int device, void* dst, const void* src, std::size_t bytes);  // waits for queued work
void synchronize(int device);
// Zeroes columns [cols, ld) of every row of a row-major rows x ld array (queued, asynchronous).
void zero_columns(int device, void* data, std::size_t rows, std::size_t ld, std::size_t cols,
                  std::size_t element_size);

void execute(const OperationPlan& plan, const std::vector<Argument>& args, const BoundShapes& shapes,
             std::shared_ptr<operation_state>& state);
int launches(const OperationPlan& plan);

// While alive on this thread, GPU operations compile and allocate but launch nothing (so a
// solver can prepare every kernel before capturing its iteration in a CUDA graph).
class PrepareOnlyScope {
 public:
  PrepareOnlyScope();
  ~PrepareOnlyScope();
};

// A CUDA graph recorded from the linalg operations that `record` issues on `device`.
class CapturedWork {
 public:
  CapturedWork(int device, const std::function<void()>& record);
  ~CapturedWork();
  CapturedWork(const CapturedWork&) = delete;
  CapturedWork& operator=(const CapturedWork&) = delete;
  void launch();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace gpu

}  // namespace molaccel::linalg

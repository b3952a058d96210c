// Dense matrices as assignment targets on the CPU backend against the reference.
#include "linalg/matrix_cases.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg::testing {
namespace {

placement host(int threads) {
  placement p;
  p.cpu_threads = threads;
  return p;
}

TEST(LinalgMatrixTargets, CpuDouble) {
  check_all_matrix_cases<double>(host(2));
}

TEST(LinalgMatrixTargets, CpuFloat) {
  check_all_matrix_cases<float>(host(2));
}

TEST(LinalgMatrixTargets, Errors) {
  check_matrix_errors<double>(host(1));
}

TEST(LinalgMatrixTargets, GeneratedKernelIndexesThePaddedStorage) {
  symbolic_matrix<double, 0> A;
  symbolic_matrix<double, 1> B;
  cpu_symbolic_scalar<double, 2> alpha;
  custom_operation op(A = alpha * B + A);
  EXPECT_EQ(op.kernels_per_run(), 1);
  EXPECT_NE(op.cuda_source().find("vec0[row]"), std::string::npos) << op.cuda_source();
}

}  // namespace
}  // namespace molaccel::linalg::testing

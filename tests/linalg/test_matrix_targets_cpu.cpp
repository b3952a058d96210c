// Dense matrices as assignment targets on the CPU backend against the reference.
#include "linalg/matrix_cases.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg::testing {
namespace {

Placement host(int threads) {
  Placement p;
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
  SymbolicMatrix<double, 0> A;
  SymbolicMatrix<double, 1> B;
  CpuSymbolicScalar<double, 2> alpha;
  CustomOperation op(A = alpha * B + A);
  EXPECT_EQ(op.kernels_per_run(), 1);
  EXPECT_NE(op.cuda_source().find("vec0[row]"), std::string::npos) << op.cuda_source();
}

}  // namespace
}  // namespace molaccel::linalg::testing

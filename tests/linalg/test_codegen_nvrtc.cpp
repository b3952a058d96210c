// NVRTC compiles every generated kernel (no GPU needed: runs in CI).
#include "linalg/backend.hpp"
#include "linalg/case_harness.hpp"
#include "linalg/matrix_cases.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg::testing {
namespace {

template <class T>
void compile_all() {
  for (const auto& tc : expression_cases<T>()) {
    CustomOperation op(tc.statements);
    // The group size only changes stages with products: 32 for dense rows, 4 for CSR rows.
    const bool dense = tc.name.find("dense") != std::string::npos;
    for (int group : {dense ? 32 : 4}) {
      JitRequest request;
      request.source = generate_cuda_source(op.plan(), group);
      request.program_name = op.name().substr(0, 60) + ".cu";
      request.kernel_names = op.kernel_names();
      request.arch = "sm_90";
      SCOPED_TRACE(tc.name);
      EXPECT_NO_THROW({
        try {
          const auto program = default_jit_cache().compile(request);
          EXPECT_FALSE(program.cubin.empty());
        } catch (const NvrtcError& e) {
          ADD_FAILURE() << e.what() << "\n" << e.log() << "\n" << request.source;
          throw;
        }
      });
    }
  }
}

TEST(LinalgCodegen, NvrtcCompilesEveryGeneratedKernelDouble) {
  MOLACCEL_REQUIRE_NVRTC();
  compile_all<double>();
}

TEST(LinalgCodegen, NvrtcCompilesEveryGeneratedKernelFloat) {
  MOLACCEL_REQUIRE_NVRTC();
  compile_all<float>();
}

TEST(LinalgCodegen, NvrtcCompilesMatrixTargetKernels) {
  MOLACCEL_REQUIRE_NVRTC();
  auto compile = [](const auto& cases) {
    for (const auto& tc : cases) {
      CustomOperation op(tc.statements);
      JitRequest request;
      request.source = op.cuda_source();
      request.program_name = op.name().substr(0, 60) + ".cu";
      request.kernel_names = op.kernel_names();
      request.arch = "sm_90";
      SCOPED_TRACE(tc.name);
      try {
        EXPECT_FALSE(default_jit_cache().compile(request).cubin.empty());
      } catch (const NvrtcError& e) {
        ADD_FAILURE() << e.what() << "\n" << e.log() << "\n" << request.source;
      }
    }
  };
  compile(matrix_cases<double>());
  compile(matrix_cases<float>());
}

TEST(LinalgCodegen, NvrtcCompilesEverySolverKernel) {
  MOLACCEL_REQUIRE_NVRTC();
  for (auto type : {ValueType::f32, ValueType::f64})
    for (bool jacobi : {false, true}) {
      const auto plans = solver_plans(type, jacobi);
      for (const auto* plan : plans) {
        JitRequest request;
        request.source = generate_cuda_source(*plan, 4);
        request.program_name = plan->name.substr(0, 60) + ".cu";
        for (auto& st : plan->stages) request.kernel_names.push_back(st.kernel_name);
        request.arch = "sm_90";
        try {
          EXPECT_FALSE(default_jit_cache().compile(request).cubin.empty());
        } catch (const NvrtcError& e) {
          ADD_FAILURE() << e.what() << "\n" << e.log();
        }
      }
    }
}

TEST(LinalgCodegen, ReadableSourceForThePaperBlas1Example) {
  SymbolicVector<double, 0> x;
  GpuSymbolicScalar<double, 1> alpha;
  GpuSymbolicScalar<double, 2> beta;
  SymbolicVector<double, 3> y;
  SymbolicVector<double, 4> z;
  CustomOperation op(x += (alpha + beta) * x - (y - F(G(z))));
  EXPECT_EQ(op.kernels_per_run(), 1);  // one fused kernel
  const std::string src = op.cuda_source();
  EXPECT_NE(src.find("__device__ __forceinline__ T modifier_F(T X) { return (T(1.0) / (T(1.0) + X)); }"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("vec0_pluseq_"), std::string::npos);
}

}  // namespace
}  // namespace molaccel::linalg::testing

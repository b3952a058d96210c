// h and i shells (l = 5, 6) on the GPU: the generic kernel, the JIT kernel (default and other
// bricks) and the basis-matrix path (many orbitals, density) against the reference.
#include "high_l_util.hpp"
#include "orbital/evaluate_on_pool.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

// fp32 with ex2.approx: the budget of test_cuda.cpp (2e-5 of the largest value); a convention or
// indexing error is O(1).
constexpr double kFp32Tolerance = 2e-5;

TEST(OrbitalCudaHighL, KernelsMatchReference) {
  MOLACCEL_REQUIRE_GPU();
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  o.cpu_threads = 2;
  const auto resources = Resources::create(o);
  for (bool pure : {true, false}) {
    Wavefunction wfn = test::high_l_basis(pure);
    test::add_orthonormal_orbitals(wfn, 8, pure ? 11u : 12u);
    GridSpec grid = automatic_grid(wfn, 2.5, 0.3);
    grid.counts[2] = 131;  // past a 128-thread block, odd remainder
    const std::vector<OrbitalRef> one{{Spin::alpha, 2}};
    const auto expected = reference::evaluate_orbitals(wfn, grid, one, 0);
    for (const char* brick : {"default", "4x8x8/2", "1x16x8", ""}) {  // "" = the generic kernel
      const std::string b = brick;
      EvaluateOptions options;
      options.backend = b.empty() ? Backend::cuda_generic : Backend::cuda_jit;
      std::vector<float> got(expected.size());
      if (b == "default" || b.empty()) {
        got = evaluate_orbitals(resources, wfn, grid, one, options);
      } else {
        detail::Tuning tuning = detail::tuning_for(0, {one.size(), false});
        tuning.jit_brick = detail::parse_cull_layout(brick);
        detail::evaluate_orbitals_tuned(resources, wfn, grid, one, got.data(), got.size(), options, tuning);
      }
      EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance)
          << (pure ? "pure " : "Cartesian ") << (b.empty() ? "generic" : brick);
    }
    std::vector<OrbitalRef> many;
    for (std::size_t k = 0; k < 8; ++k) many.push_back({Spin::alpha, k});
    EvaluateOptions options;
    options.backend = Backend::cuda_generic;
    EXPECT_LT(test::relative_max_error(evaluate_orbitals(resources, wfn, grid, many, options),
                                       reference::evaluate_orbitals(wfn, grid, many, 0)),
              kFp32Tolerance);
    EXPECT_LT(test::relative_max_error(evaluate_density(resources, wfn, grid, DensityKind::total, options),
                                       reference::evaluate_density(wfn, grid, DensityKind::total, 0)),
              kFp32Tolerance);
  }
}

}  // namespace
}  // namespace molaccel::orbital

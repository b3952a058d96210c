// Orbitals on OpenCL (PoCL's CPU device in CI): the JIT kernel (basis set folded into OpenCL C)
// and the generic kernel against the double-precision reference. Skips where no OpenCL device exists.
#include <gtest/gtest.h>

#include <cstdlib>

#include "molaccel/opencl.hpp"
#include "orbital/jit_source.hpp"
#include "orbital/orbital_test_util.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/reference/reference.hpp"

namespace molaccel::orbital {
namespace {

// The CUDA tests' budget (test_cuda.cpp): fp32 values and exponentials, 2e-5 of the largest value;
// a convention or indexing error is O(1).
constexpr double kFp32Tolerance = 2e-5;

#define MOLACCEL_NEED_OPENCL()                                                                     \
  do {                                                                                             \
    if (opencl_devices().empty()) GTEST_SKIP() << "no OpenCL device: " << opencl_absence_reason(); \
  } while (0)

TEST(OrbitalOpenCl, KernelsMatchReferenceOnRandomBasisSets) {
  MOLACCEL_NEED_OPENCL();
  // Random basis sets with every l up to g, 1-4 atoms; grids whose sizes are no multiple of any
  // work-group size (odd counts, one plane).
  for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    const auto wfn = test::random_wavefunction(seed, 1 + static_cast<int>(seed % 4), 3);
    GridSpec grid = automatic_grid(wfn, 2.0, 0.41);
    grid.counts[2] = 37;
    if (seed == 4) grid.counts[0] = 1;
    const std::vector<OrbitalRef> refs{{Spin::alpha, 0}, {Spin::alpha, 2}};
    const auto expected = reference::evaluate_orbitals(wfn, grid, refs, 0);
    for (Backend backend : {Backend::automatic, Backend::cuda_generic}) {
      EvaluateOptions options;
      options.backend = backend;
      EvaluationInfo info;
      const auto got = evaluate_orbitals_opencl(0, wfn, grid, refs, options, &info);
      ASSERT_EQ(got.size(), expected.size());
      EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance)
          << "seed " << seed << " " << info.backend;
    }
  }
}

TEST(OrbitalOpenCl, BundledWaterMatchesReference) {
  MOLACCEL_NEED_OPENCL();
  const auto wfn = read_wavefunction(test::bundled("h2o_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 2.0, 0.3);
  const std::vector<OrbitalRef> homo{{Spin::alpha, 4}};
  const auto expected = reference::evaluate_orbitals(wfn, grid, homo, 0);
  EvaluationInfo info;
  const auto got = evaluate_orbitals_opencl(0, wfn, grid, homo, {}, &info);
  EXPECT_LT(test::relative_max_error(got, expected), kFp32Tolerance) << info.backend;
  EXPECT_NE(info.backend.find("jit"), std::string::npos);
}

TEST(OrbitalOpenCl, JitSourceIsOpenClC) {
  const auto wfn = test::random_wavefunction(7, 2, 1);
  const auto basis = detail::pack_basis(wfn, 1e-9);
  const auto src = detail::generate_opencl_jit_source(basis, false);
  EXPECT_NE(src.source.find("__kernel"), std::string::npos);
  EXPECT_EQ(src.source.find("__device__"), std::string::npos);
  EXPECT_EQ(src.source.find("double"), std::string::npos);  // float coordinates: no fp64 needed
}

TEST(OrbitalOpenCl, ErrorsAreClear) {
  const auto wfn = test::random_wavefunction(1, 1, 1);
  const GridSpec grid = automatic_grid(wfn, 1.0, 0.5);
  EvaluateOptions cpu;
  cpu.backend = Backend::cpu;
  EXPECT_THROW(evaluate_orbitals_opencl(0, wfn, grid, {{Spin::alpha, 0}}, cpu), InputError);
  EXPECT_THROW(
      evaluate_orbitals_opencl(static_cast<int>(opencl_devices().size()), wfn, grid, {{Spin::alpha, 0}}),
      Error);
}

int run_cli(const std::string& arguments) {
  const std::string command = std::string(MOLACCEL_CLI_PATH) + " " + arguments + " > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `--device opencl[:N]` on the command line: orbital grid and linalg solve.
TEST(OrbitalOpenCl, CommandLine) {
  MOLACCEL_NEED_OPENCL();
  molaccel::testing::TempDir dir;
  const std::string input = "'" + test::bundled("h2o_631gs.molden").string() + "'";
  const std::string out = "'" + (dir / "w.cube").string() + "'";
  ASSERT_EQ(run_cli("orbital grid " + input + " --device opencl --orbital homo --spacing 0.3 -o " + out), 0);
  const Cube opencl = read_cube(dir / "w.cube");
  ASSERT_EQ(run_cli("orbital grid " + input + " --device cpu --orbital homo --spacing 0.3 -o " + out), 0);
  const Cube cpu = read_cube(dir / "w.cube");
  EXPECT_LT(test::relative_max_error(opencl.values, cpu.values), 1e-4);  // two fp32 paths, 2e-5 each
  // No density path on OpenCL, a missing device, a malformed index: errors, nothing written.
  const std::string other = "'" + (dir / "x.cube").string() + "'";
  EXPECT_EQ(run_cli("orbital grid " + input + " --device opencl --density total -o " + other), 1);
  EXPECT_EQ(run_cli("orbital grid " + input + " --device opencl:99 --orbital homo -o " + other), 3);
  EXPECT_EQ(run_cli("orbital grid " + input + " --device opencl:x --orbital homo -o " + other), 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cube"));
  EXPECT_EQ(run_cli("linalg solve --poisson 12 --precision fp32 --tol 1e-5 --device opencl:0"), 0);
  // Only the commands with an OpenCL path take it.
  const std::string smiles = "'" + (molaccel::testing::data_dir() / "lingo" / "demo4096.smi").string() + "'";
  EXPECT_EQ(run_cli("lingo search --device cpu " + smiles + " " + smiles + " -o " + other), 0);
  EXPECT_EQ(run_cli("lingo search --device opencl " + smiles + " " + smiles + " -o " + other), 2);
}

}  // namespace
}  // namespace molaccel::orbital

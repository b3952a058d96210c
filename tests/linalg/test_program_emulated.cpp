// The generated program kernels (program_cuda.cpp), compiled here as C++ and run on emulated
// CUDA threads (program_emulation.hpp) in every form (program_cases.hpp: kEmulatedShapes),
// against the host executor: the emitted logic is checked in CI without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "linalg/program/program_buffers.hpp"
#include "linalg/program/program_plan.hpp"
#include "linalg/program_cases.hpp"
#include "linalg/program_emulation.hpp"

namespace molaccel::linalg::emulation {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#include "program_kernels.inc"
#pragma GCC diagnostic pop
}  // namespace molaccel::linalg::emulation

namespace molaccel::linalg {
namespace {

// The host side of run_program_on_gpu (program_gpu.cpp) over host memory.
// `values`: the matrix's values as the kernel reads them (CSR, or by diagonals).
ProgramResult run_emulated(emulation::EmulatedKernel kernel, const Program& program, const ProgramInputs& in,
                           unsigned blocks, unsigned threads, const std::vector<double>& values) {
  const auto plan = program::plan_program(program);
  const auto& symbols = program.symbols();
  const HostCsr<double>& a = *in.matrix;
  const std::size_t n = a.rows;
  auto packed = program::pack_inputs<double>(program, in, n);  // with the transposed products
  const std::vector<int>& vectors = packed.vector_symbols;
  std::vector<double>&vec = packed.vectors, &scalars = packed.scalars;
  const std::size_t slots =
      std::max<std::size_t>(1, std::max(plan.setup.reductions.size(), plan.iteration.reductions.size()));
  const std::size_t m = program.monitors().size();
  std::vector<double> partials(2 * slots * blocks, 0.0),
      monitors((std::size_t(in.max_iterations) + 1) * m, 0.0);
  std::vector<long long> outcome(2 + vectors.size(), 0);
  unsigned long long counter = 0;
  if (program::exchange_buffers(program, plan) * n > emulation::kExchangeValues)
    throw std::invalid_argument("run_emulated: the shared exchange does not fit the emulation's array");
  emulation::emulate(blocks, threads, [&] {
    kernel(a.row_ptr.data(), a.col_idx.data(), values.data(), static_cast<long long>(n), vec.data(),
           scalars.data(), partials.data(), &counter, monitors.data(), outcome.data(), in.max_iterations);
  });
  ProgramResult r;
  r.iterations = int(outcome[0]);
  r.status = outcome[1] > 0 ? program.stop_tests()[std::size_t(outcome[1] - 1)].status : "iteration limit";
  for (std::size_t o = 0; o < vectors.size(); ++o) {
    const std::size_t buffer = 2 * o + std::size_t(outcome[2 + o]);
    r.vectors[symbols[std::size_t(vectors[o])].name].assign(vec.begin() + std::ptrdiff_t(buffer * n),
                                                            vec.begin() + std::ptrdiff_t((buffer + 1) * n));
  }
  for (std::size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].kind == NodeKind::device_scalar) r.scalars[symbols[i].name] = scalars[i];
  r.monitor_history.assign(m, {});
  for (std::size_t k = 0; k <= std::size_t(r.iterations); ++k)
    for (std::size_t j = 0; j < m; ++j) r.monitor_history[j].push_back(monitors[k * m + j]);
  return r;
}

// Sums in another order than the host's (per block, then over blocks): 1e-16 relative each,
// amplified by at most a few steps over values in [-1, 1] (random programs) or by the
// iterations (methods: residuals to 1e-6 relative).
void expect_same(const ProgramResult& got, const ProgramResult& host, double tolerance) {
  ASSERT_EQ(got.iterations, host.iterations);
  EXPECT_EQ(got.status, host.status);
  for (const auto& [name, v] : host.vectors)
    for (std::size_t r = 0; r < v.size(); ++r)
      ASSERT_NEAR(got.vectors.at(name)[r], v[r], tolerance * (1 + std::fabs(v[r])))
          << name << "[" << r << "]";
  for (const auto& [name, v] : host.scalars)
    ASSERT_NEAR(got.scalars.at(name), v, tolerance * (1 + std::fabs(v))) << name;
}

// A random program's kernels in `forms` (row[f] the kernel of forms[f]) against the host executor.
template <std::size_t F>
void expect_forms_match(const std::array<testing::EmulatedShape, F>& forms,
                        const emulation::EmulatedKernel* row, const Program& program, const ProgramInputs& in,
                        const std::vector<double>& values, const ProgramResult& host,
                        const std::string& what) {
  for (std::size_t f = 0; f < F; ++f) {
    SCOPED_TRACE(what + ", " + forms[f].name);
    expect_same(run_emulated(row[f], program, in, forms[f].blocks, forms[f].threads, values), host, 1e-12);
  }
}

TEST(LinalgProgramEmulated, RandomProgramsMatchTheHostExecutor) {
  for (int seed = 1; seed <= testing::kEmulatedRandomPrograms; ++seed) {
    std::mt19937_64 rng(std::uint64_t(seed) + 1000);
    const std::size_t n = 1 + rng() % 120;
    int iterations = 0;
    const auto rp = testing::emulated_random_program(seed, iterations);
    const HostCsr<double> a = testing::random_matrix(n, rng);
    const ProgramInputs in = testing::random_inputs(rp->program, a, iterations, rng);
    const auto host = run_program_on_host(rp->program, in);
    expect_forms_match(testing::kEmulatedShapes, emulation::k_random[seed - 1], rp->program, in, a.values,
                       host, fmt::format("seed {} n {}", seed, n));
  }
}

// The product by diagonals: a band with holes (NaN padding) and rows at both ends.
TEST(LinalgProgramEmulated, RandomProgramsByDiagonalsMatchTheHostExecutor) {
  for (int seed = 1; seed <= testing::kEmulatedRandomPrograms; ++seed) {
    std::mt19937_64 rng(std::uint64_t(seed) + 2000);
    const std::size_t n = 1 + rng() % 120;
    int iterations = 0;
    const auto rp = testing::emulated_random_program(seed, iterations);
    const HostCsr<double> a = testing::banded_matrix(n, rng);
    const ProgramInputs in = testing::random_inputs(rp->program, a, iterations, rng);
    const auto host = run_program_on_host(rp->program, in);
    const auto values = testing::diagonal_values(a, testing::kBandOffsets);
    // The same sums as CSR in the same order: only the blocks' order of the reductions differs.
    expect_forms_match(testing::kEmulatedDiagonalShapes, emulation::k_random_dia[seed - 1], rp->program, in,
                       values, host, fmt::format("seed {} n {}, by diagonals", seed, n));
  }
}

void expect_converged_alike(const ProgramResult& got, const ProgramResult& host) {
  EXPECT_EQ(got.status, "converged");
  EXPECT_EQ(got.iterations, host.iterations);
  for (std::size_t k = 0; k < got.monitor_history[0].size() && k < host.monitor_history[0].size(); ++k)
    // + 1e-12: residuals at rounding level (CG ends exactly on this small grid).
    EXPECT_NEAR(got.monitor_history[0][k], host.monitor_history[0][k],
                1e-6 * host.monitor_history[0][k] + 1e-12)
        << k;
}

// The product of a constant stencil (coefficients, the grid's edges): random programs on Poisson
// 10 x 10 over 8.
TEST(LinalgProgramEmulated, RandomProgramsOnAConstantStencilMatchTheHostExecutor) {
  const HostCsr<double> a = testing::stencil_matrix();
  const auto values = testing::diagonal_values(a, std::array<int, 5>{-10, -1, 0, 1, 10});  // not read
  for (int seed = 1; seed <= testing::kEmulatedRandomPrograms; ++seed) {
    std::mt19937_64 rng(std::uint64_t(seed) + 3000);
    int iterations = 0;
    const auto rp = testing::emulated_random_program(seed, iterations);
    const ProgramInputs in = testing::random_inputs(rp->program, a, iterations, rng);
    const auto host = run_program_on_host(rp->program, in);
    const std::string what = fmt::format("seed {}, constant stencil", seed);
    expect_forms_match(testing::kEmulatedDiagonalShapes, emulation::k_random_const[seed - 1], rp->program, in,
                       values, host, what);
    expect_forms_match(testing::kEmulatedTileShapes, emulation::k_random_tile[seed - 1], rp->program, in,
                       values, host, what);
  }
}

// CSR and by diagonals on Poisson 12 x 12 with an uneven diagonal (Jacobi scales its rows
// unevenly), as a constant stencil and in the tile form on Poisson itself.
TEST(LinalgProgramEmulated, MethodsMatchTheHostExecutor) {
  const auto a = poisson_2d(12), uneven = testing::uneven_diagonal(a);
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0)),
                            bu = multiply(uneven, std::vector<double>(a.rows, 1.0));
  const ProgramInputs in = testing::method_inputs(a, b, 1e-8, 500),
                      in_u = testing::method_inputs(uneven, bu, 1e-8, 500);
  const auto methods = testing::emulated_methods();
  for (std::size_t m = 0; m < methods.size(); ++m) {
    const auto host = run_program_on_host(methods[m], in), host_u = run_program_on_host(methods[m], in_u);
    for (std::size_t f = 0; f < testing::kEmulatedShapes.size(); ++f) {
      const auto& form = testing::kEmulatedShapes[f];
      SCOPED_TRACE(methods[m].name() + ", " + form.name);
      expect_converged_alike(run_emulated(emulation::k_methods[f][m], methods[m], in_u, form.blocks,
                                          form.threads, uneven.values),
                             host_u);
    }
    const auto values = testing::diagonal_values(a, testing::kPoisson12Offsets),
               values_u = testing::diagonal_values(uneven, testing::kPoisson12Offsets);
    for (std::size_t f = 0; f < testing::kEmulatedDiagonalShapes.size(); ++f) {
      const auto& form = testing::kEmulatedDiagonalShapes[f];
      SCOPED_TRACE(methods[m].name() + ", " + form.name + ", by diagonals");
      expect_converged_alike(
          run_emulated(emulation::k_methods_dia[f][m], methods[m], in_u, form.blocks, form.threads, values_u),
          host_u);
      SCOPED_TRACE("constant stencil");
      expect_converged_alike(
          run_emulated(emulation::k_methods_const[f][m], methods[m], in, form.blocks, form.threads, values),
          host);
    }
    for (std::size_t f = 0; f < testing::kEmulatedTileShapes.size(); ++f) {
      const auto& form = testing::kEmulatedTileShapes[f];
      SCOPED_TRACE(methods[m].name() + ", " + form.name + ", constant stencil");
      expect_converged_alike(
          run_emulated(emulation::k_methods_tile[f][m], methods[m], in, form.blocks, form.threads, values),
          host);
    }
  }
}

}  // namespace
}  // namespace molaccel::linalg

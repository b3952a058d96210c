// The generated OpenCL C kernels, run on an OpenCL device (PoCL's CPU device in CI), against the
// loop-per-operation reference: every expression case of the CUDA and CPU tests, the solvers,
// the binary cache and the fp64 check. Skips (with the reason) where no OpenCL device exists.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "linalg/case_harness.hpp"
#include "linalg/opencl/executor.hpp"
#include "runtime/opencl/opencl.hpp"

namespace molaccel::linalg::testing {
namespace {

#define MOLACCEL_NEED_OPENCL()                                                                     \
  do {                                                                                             \
    if (opencl_devices().empty()) GTEST_SKIP() << "no OpenCL device: " << opencl_absence_reason(); \
  } while (0)

// Runs `tc` through opencl::execute and the reference on the same random operands.
template <class T>
void check_opencl_case(const TestCase& tc, std::size_t n, std::uint64_t seed) {
  SCOPED_TRACE(fmt::format("{} n={} {} on opencl:0", tc.name, n, to_string(value_type_of<T>())));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(0.5, 1.5);
  const std::size_t k = tc.operands.size();
  std::vector<ReferenceOperand> ref(k);
  std::vector<HostCsr<double>> csr(k);
  for (std::size_t i = 0; i < k; ++i) {
    auto fill = [&](std::size_t count) {
      std::vector<double> v(count);
      for (auto& e : v) e = double(T(value(rng)));  // representable in T: same inputs for both sides
      return v;
    };
    switch (tc.operands[i]) {
      case OperandKind::vec:
        ref[i].values = fill(n);
        break;
      case OperandKind::dense:
        ref[i].values = fill(n * n);
        for (auto& e : ref[i].values) e = double(T(e / double(n)));
        ref[i].rows = ref[i].cols = n;
        break;
      case OperandKind::csr:
        csr[i] = random_csr(n, rng);
        for (auto& e : csr[i].values) e = double(T(e));
        ref[i].csr = &csr[i];
        break;
      case OperandKind::host_scalar:
      case OperandKind::device_scalar:
        ref[i].values = fill(1);
        break;
    }
  }
  std::vector<ReferenceOperand> got = ref;
  CustomOperation op(tc.statements);
  opencl::execute(op, 0, got);
  reference_execute(tc.statements, ref);
  // The CUDA tests' tolerance (case_harness.hpp): a few roundings per element plus the summation
  // error of inner products and products, growing like log2(n) levels of tree sums (work-group
  // sums here) and n/32 sequential terms of a dense row, relative to the result's magnitude.
  const double eps = std::numeric_limits<T>::epsilon();
  const double depth =
      1.0 + std::log2(double(n) + 1.0) + double(n) / 32.0 * (tc.name.find("dense") != std::string::npos);
  for (const auto& s : tc.statements) {
    const int t = s.target()->index;
    double scale = 1.0;
    for (double e : ref[t].values) scale = std::max(scale, std::fabs(e));
    const double tol = 64.0 * eps * depth * scale;
    ASSERT_EQ(got[t].values.size(), ref[t].values.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got[t].values.size(); ++i)
      if (!(std::fabs(got[t].values[i] - ref[t].values[i]) <= tol) && ++bad <= 3)
        ADD_FAILURE() << "target " << t << " element " << i << ": got " << got[t].values[i] << ", reference "
                      << ref[t].values[i] << ", tolerance " << tol;
    EXPECT_EQ(bad, 0u);
  }
}

// Planted sizes: one element, around the work-group (256) and a row group, and odd sizes that
// are no multiple of the work-group size; 3001 spans several work-groups of a reduction.
// `only` empty: every case. Each case is a program the OpenCL driver compiles once (about a
// second on PoCL, then from the binary cache), so float, whose kernels differ from double only in
// the type and the literals, runs the cases that exercise float literals and float math.
template <class T>
void run_all_cases(const std::vector<std::string>& only = {}) {
  std::uint64_t seed = 11;
  for (const auto& tc : expression_cases<T>())
    for (std::size_t n : {1, 2, 33, 255, 257, 3001}) {
      if (!only.empty() && std::find(only.begin(), only.end(), tc.name) == only.end()) continue;
      if (tc.name.find("dense") != std::string::npos && n > 300) continue;  // n^2 reference
      check_opencl_case<T>(tc, n, seed++);
    }
}

TEST(LinalgOpenCl, AllCasesDouble) {
  MOLACCEL_NEED_OPENCL();
  if (!opencl_devices()[0].fp64) GTEST_SKIP() << "OpenCL device 0 has no fp64";
  run_all_cases<double>();
}

TEST(LinalgOpenCl, CasesFloat) {
  MOLACCEL_NEED_OPENCL();
  run_all_cases<float>({"paper_blas1", "functions", "paper_tokens_csr", "safe_div_by_zero"});
}

TEST(LinalgOpenCl, LengthZero) {
  MOLACCEL_NEED_OPENCL();
  SymbolicVector<float, 0> x;
  SymbolicVector<float, 1> y;
  GpuSymbolicScalar<float, 2> s;
  CustomOperation op(x = y + 1.0, s = inner_prod(y, y));
  std::vector<ReferenceOperand> ops(3);
  ops[2].values = {5.0};
  opencl::execute(op, 0, ops);
  EXPECT_TRUE(ops[0].values.empty());
  EXPECT_EQ(ops[2].values[0], 0.0);
}

TEST(LinalgOpenCl, MatrixTargets) {
  // A = alpha * B + exp(A) over 7 x 45 matrices (no multiple of 32 columns): element-wise over the
  // unpadded row-major values, against the reference.
  MOLACCEL_NEED_OPENCL();
  SymbolicMatrix<float, 0> a;
  SymbolicMatrix<float, 1> b;
  CpuSymbolicScalar<float, 2> alpha;
  const std::vector<Statement> statements{a = alpha * b + exp(a)};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> value(0.5, 1.5);
  std::vector<ReferenceOperand> ref(3);
  for (int m = 0; m < 2; ++m) {
    ref[m].rows = 7;
    ref[m].cols = 45;
    for (int i = 0; i < 7 * 45; ++i) ref[m].values.push_back(double(float(value(rng))));
  }
  ref[2].values = {0.75};
  std::vector<ReferenceOperand> got = ref;
  opencl::execute(CustomOperation(statements), 0, got);
  reference_execute(statements, ref);
  ASSERT_EQ(got[0].values.size(), ref[0].values.size());
  // A few fp32 roundings of values below e^1.5 + 1.5 (no summation).
  for (std::size_t i = 0; i < ref[0].values.size(); ++i)
    ASSERT_NEAR(got[0].values[i], ref[0].values[i], 8 * 6.0 * std::numeric_limits<float>::epsilon()) << i;
}

TEST(LinalgOpenCl, GeneratedSourceIsOpenClC) {
  SymbolicVector<float, 0> x;
  SymbolicVector<float, 1> y;
  CustomOperation op(x = 2.0 * y);
  const std::string src = opencl::source(op);
  EXPECT_NE(src.find("__kernel"), std::string::npos);
  EXPECT_EQ(src.find("__global__"), std::string::npos);
  EXPECT_EQ(src.find("cl_khr_fp64"), std::string::npos);  // a float kernel needs no fp64
  EXPECT_EQ(src.find("threadIdx"), std::string::npos);
}

template <class T>
void check_solver(Solver solver, Preconditioner pc) {
  SCOPED_TRACE(fmt::format("{} {} {}", to_string(solver), pc == Preconditioner::jacobi ? "jacobi" : "none",
                           to_string(value_type_of<T>())));
  const HostCsr<double> a = poisson_2d(23);  // n = 529: a few work-groups, not a multiple of 256
  std::vector<double> ones(a.rows, 1.0);
  const std::vector<double> b = multiply(a, ones);
  SolverOptions o;
  o.solver = solver;
  o.preconditioner = pc;
  o.precision = std::is_same_v<T, double> ? Precision::fp64 : Precision::fp32;
  o.tolerance = std::is_same_v<T, double> ? 1e-10 : 1e-5;
  o.max_iterations = 500;
  const SolverResult got = opencl::solve(0, a, b, o);
  const SolverResult cpu = solve(Resources::cpu(2), a, b, o);
  EXPECT_EQ(got.status, SolverStatus::converged);
  EXPECT_EQ(cpu.status, SolverStatus::converged);
  // The same recurrence in another summation order: iteration counts agree within a few
  // iterations, and the solution is within the tolerance's reach of x = 1 (condition number of
  // this Poisson matrix ~ 230: 1e3 x the tolerance).
  EXPECT_LE(std::abs(got.iterations - cpu.iterations), 3);
  ASSERT_EQ(got.x.size(), a.rows);
  for (std::size_t i = 0; i < a.rows; ++i) ASSERT_NEAR(got.x[i], 1.0, 1e3 * o.tolerance) << i;
  // The true residual of the returned x.
  const auto ax = multiply(a, got.x);
  double rr = 0, bb = 0;
  for (std::size_t i = 0; i < a.rows; ++i) rr += (ax[i] - b[i]) * (ax[i] - b[i]), bb += b[i] * b[i];
  EXPECT_LE(std::sqrt(rr / bb), 100 * o.tolerance);
}

// Each solver and preconditioner is a set of 5-7 programs (seconds to compile on PoCL): the four
// combinations are spread over the two element types, whose kernels differ only in the type.
TEST(LinalgOpenCl, SolversDouble) {
  MOLACCEL_NEED_OPENCL();
  if (!opencl_devices()[0].fp64) GTEST_SKIP() << "OpenCL device 0 has no fp64";
  check_solver<double>(Solver::cg, Preconditioner::none);
  check_solver<double>(Solver::bicgstab, Preconditioner::jacobi);
}

TEST(LinalgOpenCl, SolversFloat) {
  MOLACCEL_NEED_OPENCL();
  check_solver<float>(Solver::cg, Preconditioner::jacobi);
  check_solver<float>(Solver::bicgstab, Preconditioner::none);
}

TEST(LinalgOpenCl, ZeroRightHandSideAndBadShapes) {
  MOLACCEL_NEED_OPENCL();
  const HostCsr<double> a = poisson_2d(4);
  SolverOptions o;
  o.precision = Precision::fp32;
  const std::vector<double> zero(a.rows, 0.0);
  EXPECT_EQ(opencl::solve(0, a, zero, o).status, SolverStatus::zero_rhs);
  const std::vector<double> short_b(3, 1.0);
  EXPECT_THROW(opencl::solve(0, a, short_b, o), Error);
  EXPECT_THROW(opencl::solve(static_cast<int>(opencl_devices().size()), a, zero, o), DeviceUnavailable);
}

TEST(LinalgOpenCl, MissingFp64IsAClearError) {
  // A device description without cl_khr_fp64 (simulated: PoCL has fp64).
  OpenClDeviceInfo info;
  info.index = 3;
  info.name = "a device without doubles";
  try {
    ::molaccel::opencl::require_fp64(info, "a double-precision solve");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a device without doubles"), std::string::npos) << what;
    EXPECT_NE(what.find("cl_khr_fp64"), std::string::npos) << what;
  }
}

TEST(LinalgOpenCl, BinaryCacheHitsAndRebuildsCorruptEntries) {
  MOLACCEL_NEED_OPENCL();
  namespace rt = ::molaccel::opencl;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("molaccel-clcache-{}", ::getpid());
  std::filesystem::remove_all(dir);
  rt::Device& d = rt::device(0);
  rt::BuildRequest r;
  r.source = "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }\n";
  r.program_name = "twice.cl";
  r.kernel_names = {"twice"};
  {
    rt::BinaryCache cache(dir);
    cache.build(d, r);
    EXPECT_EQ(cache.stats().builds, 1u);
    cache.build(d, r);
    EXPECT_EQ(cache.stats().memory_hits, 1u);
  }
  const auto path = rt::BinaryCache(dir).entry_path(rt::BinaryCache(dir).key_for(d, r));
  ASSERT_TRUE(std::filesystem::exists(path));
  {
    rt::BinaryCache cache(dir);  // a new process: from disk
    cache.build(d, r);
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(cache.stats().builds, 0u);
  }
  {  // a flipped byte: the checksum rejects it, the program is rebuilt and the entry replaced
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    bytes[bytes.size() / 2] ^= 0x5a;
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << bytes;
    }
    rt::BinaryCache cache(dir);
    rt::Program p = cache.build(d, r);
    EXPECT_EQ(cache.stats().corrupt_rebuilt, 1u);
    EXPECT_EQ(cache.stats().builds, 1u);
    rt::BinaryCache again(dir);
    again.build(d, r);
    EXPECT_EQ(again.stats().disk_hits, 1u);
  }
  EXPECT_FALSE(rt::decode_binary_entry("MOLACCEL-CLBIN\n", "k"));
  EXPECT_TRUE(rt::decode_binary_entry(rt::encode_binary_entry("k", "bin"), "k"));
  EXPECT_FALSE(rt::decode_binary_entry(rt::encode_binary_entry("k", "bin"), "other key"));
  // A build error carries the log.
  rt::BuildRequest bad = r;
  bad.source = "__kernel void twice(__global float* x) { x[0] = undeclared; }\n";
  try {
    rt::BinaryCache(dir).build(d, bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace molaccel::linalg::testing

// Tier 2: the CPU fused loop (every SIMD build this machine runs) against the reference.
#include "linalg/case_harness.hpp"

namespace molaccel::linalg::testing {
namespace {

Placement host(int threads = 2) {
  Placement p;
  p.cpu_threads = threads;
  return p;
}

template <class T>
void run_all_cases(std::vector<std::size_t> sizes) {
  std::uint64_t seed = 1;
  for (const auto& tc : expression_cases<T>())
    for (std::size_t n : sizes) {
      if (tc.name.find("dense") != std::string::npos && n > 700) continue;  // n^2 reference
      check_case<T>(tc, n, host(), seed++);
    }
}

// Sizes: one element, around a warp and a batch (256) and a chunk (8192 rows), odd sizes.
const std::vector<std::size_t> sizes = {1, 2, 31, 33, 255, 257, 1000, 8191, 8193, 30001};

TEST(LinalgCpuOperations, AllCasesDouble) {
  run_all_cases<double>(sizes);
}
TEST(LinalgCpuOperations, AllCasesFloat) {
  run_all_cases<float>(sizes);
}

TEST(LinalgCpuOperations, ThreadCountDoesNotChangeInnerProducts) {
  // Partial sums per fixed chunk, added in chunk order: bit-identical for any thread count.
  SymbolicVector<double, 0> y;
  SymbolicVector<double, 1> z;
  GpuSymbolicScalar<double, 2> s;
  CustomOperation dot(s = inner_prod(y, z));
  const std::size_t n = 100003;
  std::vector<double> a(n), b(n);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::size_t i = 0; i < n; ++i) a[i] = u(rng), b[i] = u(rng);
  double first = 0;
  for (int threads : {1, 2, 3}) {
    Vector<double> va(host(threads), n), vb(host(threads), n);
    va.copy_from_host(a);
    vb.copy_from_host(b);
    Scalar<double> out(host(threads), 0.0);
    dot(va, vb, out);
    if (threads == 1) first = out.value();
    EXPECT_EQ(out.value(), first) << threads << " threads";
  }
}

TEST(LinalgCpuOperations, EverySimdBuildAgreesWithReference) {
  // The dispatcher picks one build per process; report which one ran (the others are covered
  // by running the suite with MOLACCEL_SIMD=scalar|avx2).
  SymbolicVector<double, 0> x;
  SymbolicVector<double, 1> y;
  CustomOperation op(x = 2.0 * y);
  Vector<double> vx(host(), 5), vy(host(), 5);
  vy.copy_from_host(std::vector<double>{1, 2, 3, 4, 5});
  op(vx, vy);
  EXPECT_EQ(vx.to_host(), (std::vector<double>{2, 4, 6, 8, 10}));
  EXPECT_FALSE(op.last_cpu_variant().empty());
}

TEST(LinalgCpuOperations, SwapIsSimultaneous) {
  // x = y, y = x: both right-hand sides are plain loads of operands the other statement writes.
  SymbolicVector<double, 0> x;
  SymbolicVector<double, 1> y;
  CustomOperation swap(x = y, y = x);
  for (std::size_t n : {1, 300, 1000, 20000}) {
    std::vector<double> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = double(i), b[i] = -double(i) - 1;
    Vector<double> va(host(), n), vb(host(), n);
    va.copy_from_host(a);
    vb.copy_from_host(b);
    swap(va, vb);
    EXPECT_EQ(va.to_host(), b);
    EXPECT_EQ(vb.to_host(), a);
  }
}

TEST(LinalgCpuOperations, LengthMismatchIsAnError) {
  SymbolicVector<double, 0> x;
  SymbolicVector<double, 1> y;
  SymbolicVector<double, 2> z;
  CustomOperation op(x = y + z);
  Vector<double> a(host(), 4), b(host(), 4), c(host(), 5);
  EXPECT_THROW(op(a, b, c), Error);
  EXPECT_THROW(op(a, b), Error);  // too few operands
  Scalar<double> s(1.0);
  EXPECT_THROW(op(a, b, s), Error);  // wrong kind
  Vector<float> f(host(), 4);
  EXPECT_THROW(op(a, b, f), Error);  // wrong type
  EXPECT_THROW(op(a, a, b), Error);  // written operand passed twice
  EXPECT_NO_THROW(op(a, b, b));      // read-only operands may repeat
}

TEST(LinalgCpuOperations, RectangularProductWithRunTimeShapes) {
  // x (3) = prod(A (3x5), y (5)) + z (3): lengths come from the operands at run time.
  SymbolicVector<double, 0> x;
  SymbolicMatrix<double, 1> a;
  SymbolicVector<double, 2> y;
  SymbolicVector<double, 3> z;
  CustomOperation op(x = prod(a, y) + z);
  Matrix<double> m(host(), 3, 5);
  std::vector<double> mv(15);
  for (int i = 0; i < 15; ++i) mv[i] = i;
  m.copy_from_host(mv);
  Vector<double> vx(host(), 3), vy(host(), 5), vz(host(), 3);
  vy.copy_from_host(std::vector<double>{1, 1, 1, 1, 1});
  vz.copy_from_host(std::vector<double>{1, 2, 3});
  op(vx, m, vy, vz);
  EXPECT_EQ(vx.to_host(),
            (std::vector<double>{0 + 1 + 2 + 3 + 4 + 1, 5 + 6 + 7 + 8 + 9 + 2, 10 + 11 + 12 + 13 + 14 + 3}));
  Vector<double> wrong(host(), 4);
  EXPECT_THROW(op(vx, m, wrong, vz), Error);
}

}  // namespace
}  // namespace molaccel::linalg::testing

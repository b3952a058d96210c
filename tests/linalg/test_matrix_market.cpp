#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <random>

#include "molaccel/linalg.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg {
namespace {

TEST(LinalgMatrixMarket, CoordinateGeneralWithDuplicates) {
  const auto a = parse_matrix_market("a.mtx",
                                     "%%MatrixMarket matrix coordinate real general\n% comment\n\n"
                                     "2 3 4\n1 1 1.5\n2 3 -2\n1 1 0.5\n2 1 4e0\n");
  EXPECT_EQ(a.rows, 2u);
  EXPECT_EQ(a.cols, 3u);
  EXPECT_EQ(a.row_ptr, (std::vector<std::int32_t>{0, 1, 3}));
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{0, 0, 2}));
  EXPECT_EQ(a.values, (std::vector<double>{2.0, 4.0, -2.0}));
}

// Issue 24, defect 14: a UTF-8 byte order mark before %%MatrixMarket is skipped.
TEST(LinalgMatrixMarket, ByteOrderMarkIsSkipped) {
  const auto a = parse_matrix_market("bom.mtx",
                                     "\xEF\xBB\xBF%%MatrixMarket matrix coordinate real general\n"
                                     "2 2 2\n1 1 3\n2 2 4\n");
  EXPECT_EQ(a.rows, 2u);
  EXPECT_EQ(a.values, (std::vector<double>{3.0, 4.0}));
}

TEST(LinalgMatrixMarket, SymmetricPatternIntegerArray) {
  const auto s = parse_matrix_market(
      "s.mtx", "%%MatrixMarket matrix coordinate integer symmetric\n2 2 2\n1 1 3\n2 1 7\n");
  EXPECT_EQ(s.values, (std::vector<double>{3, 7, 7}));
  const auto p =
      parse_matrix_market("p.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n2 2\n");
  EXPECT_EQ(p.values, (std::vector<double>{1}));
  const auto d = parse_matrix_market("d.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n0\n3\n4\n");
  // Column-major: A = [1 3; 0 4]; the explicit zero is dropped.
  EXPECT_EQ(d.row_ptr, (std::vector<std::int32_t>{0, 2, 3}));
  EXPECT_EQ(d.values, (std::vector<double>{1, 3, 4}));
  const auto sym = parse_matrix_market("y.mtx", "%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n");
  EXPECT_EQ(sym.values, (std::vector<double>{1, 2, 2, 3}));
}

void expect_error_at_line(const std::string& text, std::size_t line) {
  try {
    (void)parse_matrix_market("bad.mtx", text);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.path(), "bad.mtx");
  }
}

TEST(LinalgMatrixMarket, ErrorsNameTheLine) {
  expect_error_at_line("", 0);
  expect_error_at_line("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", 1);
  expect_error_at_line("%%MatrixMarket matrix coordinate real general\n2 2\n", 2);
  expect_error_at_line("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n", 3);
  expect_error_at_line("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 x\n", 4);
  expect_error_at_line("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n", 3);  // too few
  expect_error_at_line("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 1\n",
                       4);  // too many
  expect_error_at_line("%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n",
                       3);  // upper triangle
  expect_error_at_line("%%MatrixMarket matrix array real general\n2 1\n1\n", 3);
}

TEST(LinalgMatrixMarket, VectorRoundTripIsAtomic) {
  molaccel::testing::TempDir dir;
  const std::vector<double> x{1.0, -2.5, 1e-300, 0.1};
  write_matrix_market_vector(dir / "x.mtx", x, "test");
  EXPECT_EQ(read_matrix_market_vector(dir / "x.mtx"), x);
  EXPECT_THROW(read_matrix_market_vector(molaccel::testing::data_dir() / "linalg" / "ani4.mtx"), InputError);
  // A failing write leaves no file behind.
  EXPECT_ANY_THROW(write_matrix_market_vector(dir / "missing" / "y.mtx", x));
  EXPECT_FALSE(std::filesystem::exists(dir / "missing" / "y.mtx"));
}

// Large vectors are formatted in blocks on every core: the same text as one loop over the values
// (blocks of 65,536 lines; 200,003 values make four, the last one short), and the same values back
// from a plain, a gzip and (where the build has libzstd) a Zstandard file.
TEST(LinalgMatrixMarket, LargeVectorInBlocksAndCompressed) {
  molaccel::testing::TempDir dir;
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal;
  std::vector<double> x(200003);
  for (double& v : x) v = normal(rng) * std::pow(10.0, double(rng() % 40) - 20.0);
  x[65535] = 0.0;
  x[65536] = -1e-310;  // subnormal, either side of a block's edge
  write_matrix_market_vector(dir / "x.mtx", x, "blocks");
  std::string expected = fmt::format("%%MatrixMarket matrix array real general\n% blocks\n{} 1\n", x.size());
  for (double v : x) expected += fmt::format("{:.17g}\n", v);
  std::ifstream in(dir / "x.mtx", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, expected);
  EXPECT_EQ(read_matrix_market_vector(dir / "x.mtx"), x);
  write_matrix_market_vector(dir / "x.mtx.gz", x);
  EXPECT_EQ(read_matrix_market_vector(dir / "x.mtx.gz"), x);
  try {
    write_matrix_market_vector(dir / "x.mtx.zst", x);
  } catch (const NotCompiled&) {
    GTEST_SKIP() << "no libzstd in this build";
  }
  EXPECT_GT(std::filesystem::file_size(dir / "x.mtx.zst"), 0u);
}

TEST(LinalgMatrixMarket, BundledMatrices) {
  const auto bus = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "1138_bus.mtx");
  EXPECT_EQ(bus.rows, 1138u);
  EXPECT_EQ(bus.nnz(), 2u * 2596u - 1138u);  // symmetric: off-diagonal entries mirrored
  const auto ani = read_matrix_market(molaccel::testing::data_dir() / "linalg" / "ani4.mtx");
  EXPECT_EQ(ani.rows, 3081u);
  EXPECT_EQ(ani.nnz(), 20971u);
}

TEST(LinalgMatrixMarket, PoissonIsTheFivePointStencil) {
  const auto a = poisson_2d(3);
  EXPECT_EQ(a.rows, 9u);
  EXPECT_EQ(a.nnz(), 9u * 5u - 4u * 3u);  // 5 per row minus the missing boundary neighbours
  const auto y = multiply(a, std::vector<double>(9, 1.0));
  EXPECT_EQ(y, (std::vector<double>{2, 1, 2, 1, 0, 1, 2, 1, 2}));
}

}  // namespace
}  // namespace molaccel::linalg

// A Matrix Market header announcing more than this machine can hold is refused at its size line,
// with the numbers, instead of std::bad_alloc part-way through reading (issue 24, item 9).
#include <fstream>

#include "linalg/io/matrix_market.hpp"
#include "testing/testing.hpp"

namespace molaccel::linalg {
namespace {

std::uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

TEST(LinalgMatrixMarketLimits, HeaderBeyondAvailableMemoryIsRefusedWithNumbers) {
  // 2^31 - 1 rows and stored entries, symmetric: about 163 GB to read.
  const std::uint64_t available = available_memory();
  if (available == 0 || available > 160ull << 30) GTEST_SKIP() << "this machine could read it";
  try {
    (void)parse_matrix_market("huge.mtx",
                              "%%MatrixMarket matrix coordinate real symmetric\n% comment\n"
                              "2147483647 2147483647 2147483647\n1 1 1\n");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 3u);
    const std::string what = e.what();
    EXPECT_NE(what.find("2147483647 x 2147483647 matrix with 2147483647"), std::string::npos) << what;
    EXPECT_NE(what.find("GiB of memory to read"), std::string::npos) << what;
    EXPECT_NE(what.find("GiB are available"), std::string::npos) << what;
  }
}

TEST(LinalgMatrixMarketLimits, LargeButFittingHeadersStillReadTheirEntries) {
  // 10^6 rows, 3 entries: read as usual (the estimate is below 1 GiB: no system query).
  const auto a =
      parse_matrix_market("wide.mtx",
                          "%%MatrixMarket matrix coordinate real general\n1000000 1000000 3\n1 1 1\n"
                          "2 2 2\n1000000 1000000 3\n");
  EXPECT_EQ(a.rows, 1000000u);
  EXPECT_EQ(a.nnz(), 3u);
}

}  // namespace
}  // namespace molaccel::linalg

// Issue 24, item 9: the parsers that refuse an input too large for memory (a Matrix Market header,
// a database's index) ask the same runtime function as the commands, so a memory limit is one
// number everywhere; here a fake 2 GiB through the test seam.
#include "linalg/io/matrix_market.hpp"
#include "runtime/resource_limits.hpp"
#include "runtime/text_input.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

TEST(ResourceLimits, MatrixMarketHeaderOverTheMemoryLimitIsRefusedWithBothNumbers) {
  // 10^8 stored entries: about 3.4 GiB to read.
  const std::string text = "%%MatrixMarket matrix coordinate real general\n100000 100000 100000000\n1 1 1\n";
  detail::set_resource_probes_for_testing([] { return std::optional<std::uint64_t>(std::uint64_t(2) << 30); },
                                          {});
  std::string what;
  try {
    io::LineReader reader("big.mtx", text);
    linalg::io::parse_triplets(reader);
  } catch (const InputError& e) {
    what = e.what();
  }
  detail::set_resource_probes_for_testing({}, {});
  EXPECT_NE(what.find("big.mtx:2"), std::string::npos) << what;
  EXPECT_NE(what.find("3.4 GiB"), std::string::npos) << what;
  EXPECT_NE(what.find("2.0 GiB are available"), std::string::npos) << what;
}

}  // namespace
}  // namespace molaccel

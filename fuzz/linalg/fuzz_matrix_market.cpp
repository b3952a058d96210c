// Matrix Market parser: any input either parses into a consistent CSR matrix or throws
// InputError; nothing else (no crash, no other exception, no unbounded allocation).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "linalg/io/matrix_market.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    molaccel::io::LineReader reader("fuzz.mtx", text);
    const auto t = molaccel::linalg::io::parse_triplets(reader);
    if (t.rows > 100000) return 0;  // row pointers of huge declared sizes: not the parser's concern
    const auto a = molaccel::linalg::io::to_csr(t);
    if (a.row_ptr.size() != a.rows + 1 || a.col_idx.size() != a.values.size()) __builtin_trap();
    for (std::size_t r = 0; r < a.rows; ++r)
      for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k)
        if (a.col_idx[k] < 0 || static_cast<std::size_t>(a.col_idx[k]) >= a.cols) __builtin_trap();
  } catch (const molaccel::InputError&) {
  }
  return 0;
}

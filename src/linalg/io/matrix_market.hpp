// Matrix Market parsing into triplets (internal: the fuzz target drives it directly).
#pragma once

#include <cstdint>
#include <vector>

#include "molaccel/linalg.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::linalg::io {

struct matrix_market_triplets {
  std::size_t rows = 0, cols = 0;
  bool array_format = false;
  std::vector<std::int32_t> row, col;  // 0-based, symmetric entries already mirrored
  std::vector<double> value;
};

// Reads the whole input; throws InputError naming the input and line.
matrix_market_triplets parse_triplets(molaccel::io::LineReader& reader);
// Sorted CSR with duplicates summed (explicit zeros of array files dropped).
host_csr<double> to_csr(const matrix_market_triplets& t);

}  // namespace molaccel::linalg::io

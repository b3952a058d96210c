// Matrix Market parsing into triplets (internal: the fuzz target drives it directly).
#pragma once

#include <cstdint>
#include <vector>

#include "molaccel/linalg.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::linalg::io {

struct MatrixMarketTriplets {
  std::size_t rows = 0, cols = 0;
  bool array_format = false;
  std::vector<std::int32_t> row, col;  // 0-based, symmetric entries already mirrored
  std::vector<double> value;
};

// Reads the whole input; throws InputError naming the input and line.
MatrixMarketTriplets parse_triplets(molaccel::io::LineReader& reader);
// Sorted CSR with duplicates summed (explicit zeros of array files dropped).
HostCsr<double> to_csr(const MatrixMarketTriplets& t);

}  // namespace molaccel::linalg::io

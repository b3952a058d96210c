// The copy ceilings of the dense pipeline, measured alone (benchmark reference lines).
#pragma once

#include <cstddef>

namespace molaccel::lingo_bench {

struct CopyRates {
  double d2h_pinned_gbs = 0;  // device-to-host copies of `bytes` into pinned memory (CUDA events, 8 copies)
  double host_copy_gbs = 0;   // the multi-threaded host copy from pinned into ordinary touched memory
};
CopyRates measure_copy_rates(int device, std::size_t bytes);

// The copy engine alone: `chunk`-byte device-to-host copies filling all of `destination` in order
// (GB/s, CUDA events) -- the ceiling for landing a whole matrix in that (page-locked) memory.
double measure_d2h_into(int device, void* destination, std::size_t destination_bytes, std::size_t chunk);

}  // namespace molaccel::lingo_bench

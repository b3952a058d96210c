// The database layout of the hashed GPU kernel, built on the host (CUDA-free, so
// CPU tests check it): windows of `window` molecules in slice order; inside a window, molecules
// sorted by feature count, longest first (a warp's 32 lanes then loop about as long); each warp's
// features interleaved, element k of lane l at warp_base + 32 k + l (coalesced loads).
#pragma once

#include <cstdint>
#include <vector>

#include "lingo/encoding.hpp"

namespace molaccel::lingo::detail {

struct InterleavedLayout {
  std::vector<std::uint64_t> warp_base;  // per 32 sorted positions
  std::vector<std::uint32_t> length;     // per sorted position (0 past the slice end)
  std::vector<std::uint32_t> size;       // per sorted position: magnitude or distinct count
  std::vector<std::uint16_t> column;     // per sorted position: column within its window
  std::vector<std::uint32_t> features;   // interleaved; padding holds `padding`
};

// Molecules [begin, end) of `set`; window must be a multiple of 32 and at most 65,536. Each warp's
// share is padded to a multiple of `length_multiple` rows (the hashed kernel reads 4 or 8 rows at a
// time and uses window 256, multiple 4).
InterleavedLayout build_interleaved_layout(const FeatureSet& set, std::size_t begin, std::size_t end,
                                           std::uint32_t window, std::uint32_t padding,
                                           std::uint32_t length_multiple = 1);

}  // namespace molaccel::lingo::detail

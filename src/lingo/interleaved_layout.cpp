#include "lingo/interleaved_layout.hpp"

#include <algorithm>

namespace molaccel::lingo::detail {

InterleavedLayout build_interleaved_layout(const FeatureSet& set, std::size_t begin, std::size_t end,
                                           std::uint32_t window, std::uint32_t padding,
                                           std::uint32_t length_multiple) {
  MOLACCEL_EXPECTS(window % 32 == 0 && window > 0 && window <= 65536, "window: a multiple of 32, <= 65536");
  MOLACCEL_EXPECTS(length_multiple > 0, "length_multiple: at least 1");
  InterleavedLayout out;
  const std::size_t n = end - begin;
  const std::size_t n_pos = (n + window - 1) / window * window;
  out.length.assign(n_pos, 0);
  out.size.assign(n_pos, 0);
  out.column.assign(n_pos, 0);
  auto count = [&](std::size_t molecule) { return set.offsets[molecule + 1] - set.offsets[molecule]; };
  // Windows on every core (each one sorted by its own molecules' lengths).
  const std::size_t n_windows = (n + window - 1) / window;
  parallel_for(n_windows, 0, 1, [&](std::size_t first, std::size_t last) {
    std::vector<std::uint32_t> order;
    for (std::size_t w = first; w < last; ++w) {
      const std::size_t w0 = w * window, wn = std::min<std::size_t>(window, n - w0);
      order.resize(wn);
      for (std::size_t i = 0; i < wn; ++i) order[i] = static_cast<std::uint32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
        return count(begin + w0 + x) > count(begin + w0 + y);
      });
      for (std::size_t t = 0; t < wn; ++t) {
        out.length[w0 + t] = static_cast<std::uint32_t>(count(begin + w0 + order[t]));
        out.size[w0 + t] = set.sizes[begin + w0 + order[t]];
        out.column[w0 + t] = static_cast<std::uint16_t>(order[t]);
      }
    }
  });
  const std::size_t n_warps = n_pos / 32;
  out.warp_base.assign(std::max<std::size_t>(n_warps, 1), 0);
  std::uint64_t total = 0;
  for (std::size_t g = 0; g < n_warps; ++g) {
    out.warp_base[g] = total;
    const std::uint64_t rows = (out.length[g * 32] + length_multiple - 1) / length_multiple * length_multiple;
    total += 32ull * rows;  // lane 0 is the longest of its warp
  }
  out.features.assign(std::max<std::uint64_t>(total, 1), padding);
  parallel_for(n, 0, 32 * 256, [&](std::size_t first, std::size_t last) {  // whole warps per chunk
    for (std::size_t p = first; p < last; ++p) {
      const std::size_t w0 = p / window * window;
      const std::uint64_t src = set.offsets[begin + w0 + out.column[p]];
      for (std::uint32_t k = 0; k < out.length[p]; ++k)
        out.features[out.warp_base[p / 32] + 32ull * k + p % 32] = set.features[src + k];
    }
  });
  return out;
}

}  // namespace molaccel::lingo::detail

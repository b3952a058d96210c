// The three passes of the traceback over striped rows (striped_rows.hpp), compiled once per
// instruction set by molaccel_add_multiversion (traceback_passes.cpp); traceback.cpp picks the
// variant for the machine and, per pass, 16-bit or 32-bit lanes (`narrow`) where the values fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "align/traceback.hpp"

namespace molaccel::align::traceback_passes {

struct StripedPasses {
  const char* isa;  // "scalar" (SSE2 baseline) or "avx2"
  int vector_bytes;
  // Pass 1: the end cell; nullopt when 16-bit lanes would overflow (a row passed `limit`).
  std::optional<detail::EndCell> (*find_end)(std::span<const std::uint8_t> query,
                                             std::span<const std::uint8_t> subject, const Scoring& scoring,
                                             std::optional<int> known_score, bool narrow, int limit);
  // Pass 2 over the reversed prefixes that end at the end cell.
  detail::StartCell (*find_start)(std::span<const std::uint8_t> reversed_query,
                                  std::span<const std::uint8_t> reversed_subject, const Scoring& scoring,
                                  const detail::EndCell& end, bool narrow);
  // Pass 3 over the region.
  detail::RegionTrace (*trace_region)(std::span<const std::uint8_t> query_part,
                                      std::span<const std::uint8_t> subject_part, const Scoring& scoring,
                                      bool narrow, std::size_t direction_bytes);
};

namespace isa_scalar {
const StripedPasses& striped_passes() noexcept;
}
namespace isa_avx2 {
const StripedPasses& striped_passes() noexcept;
}

}  // namespace molaccel::align::traceback_passes

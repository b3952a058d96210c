// Traceback internals: align_pair with the memory bound and the known score made explicit (the
// search passes the score it found; tests pass small bounds to exercise the checkpointed path).
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include "molaccel/align.hpp"

namespace molaccel::align::detail {

struct TracebackLimits {
  // Direction bytes held at once (one per cell of the aligned region). A larger region is traced
  // in row blocks of at most this many bytes, recomputed from checkpoint rows saved by one more
  // forward pass: the same alignment, about 1.5x the region's work, memory ~ this bound.
  std::size_t direction_bytes = std::size_t{1} << 30;
};

// align_pair(query, subject, scoring); `known_score` (the pair's Smith-Waterman score, when the
// caller has it) ends the search for the end cell at the first cell reaching it.
Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring, std::optional<int> known_score,
                     const TracebackLimits& limits = {});

}  // namespace molaccel::align::detail

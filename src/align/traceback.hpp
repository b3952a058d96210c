// Traceback internals: align_pair with the memory bound and the known score made explicit (the
// search passes the score it found; tests pass small bounds to exercise the checkpointed path).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "molaccel/align.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::align::detail {

struct TracebackLimits {
  // Direction bytes held at once (one per cell of the aligned region). A larger region is traced
  // in row blocks of at most this many bytes, recomputed from checkpoint rows saved by one more
  // forward pass: the same alignment, about 1.5x the region's work, memory ~ this bound.
  std::size_t direction_bytes = std::size_t{1} << 30;
  // Each pass in 16-bit lanes where its values fit (else 32-bit); tests turn it off to check the
  // 32-bit lanes on small pairs too.
  bool narrow_lanes = true;
  // The instruction set of the striped passes (never above this machine's; default: this
  // machine's): SSE2 (16-byte vectors) below AVX2, AVX2 (32-byte vectors) from it.
  std::optional<SimdLevel> simd;
};

// Which striped variant `limits` runs, e.g. "striped/avx2/32-byte" (for benchmark notes).
std::string striped_variant(const TracebackLimits& limits = {});

// Pass 1 of align_pair on its own: the pair's score and its first end cell in row-major order
// (1-based; score 0 and no cell when nothing scores above 0). `known_score` (the pair's score)
// ends the search at the first cell reaching it; one that no cell reaches is ignored.
struct EndCell {
  int score = 0;
  std::size_t query_end = 0, subject_end = 0;
};
EndCell find_end(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                 const Scoring& scoring, std::optional<int> known_score, const TracebackLimits& limits = {});

// Pass 2 on its own: the nearest start cell (1-based) of an alignment that ends at `end` (found by
// find_end: its score is the pair's) with the pair's score.
struct StartCell {
  std::size_t query_start = 0, subject_start = 0;
};
StartCell find_start(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring, const EndCell& end, const TracebackLimits& limits = {});

// Pass 3 of align_pair on its own (for tests and benchmarks): the traceback from the corner of the
// region query_part x subject_part (the local recurrence restarted at the region's edges).
// `score_bound` bounds every H of the region from above (align_pair: the pair's score).
struct RegionTrace {
  std::size_t query_offset = 0, subject_offset = 0;  // region residues before the first aligned pair
  std::string ops;                                   // 'M', 'I', 'D' in alignment order
  std::uint32_t identities = 0;
};
RegionTrace trace_region(std::span<const std::uint8_t> query_part, std::span<const std::uint8_t> subject_part,
                         const Scoring& scoring, int score_bound, const TracebackLimits& limits = {});

// align_pair(query, subject, scoring); `known_score` (the pair's Smith-Waterman score, when the
// caller has it) ends the search for the end cell at the first cell reaching it. A known score
// below the pair's gives an alignment of at least that score, not necessarily the same one.
Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring, std::optional<int> known_score,
                     const TracebackLimits& limits = {});

}  // namespace molaccel::align::detail

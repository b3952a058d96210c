// Traceback of reported hits (CPU). Three passes keep memory to the aligned region:
//  1. forward scores in linear memory: best score and its first end cell in row-major order (with
//     the score known, the first cell reaching it);
//  2. backward from that cell, anchored there, in linear memory: the nearest start cell at which an
//     alignment reaches the best score;
//  3. Gotoh with one direction byte per cell over that region, traced back from its corner. A
//     region over the byte bound is traced one row block at a time: a forward pass saves the DP
//     row (H and the vertical gap) at each block's start, and each block's direction bytes are
//     recomputed from its checkpoint, left of the current column only, when the trace enters it.
// All three run row by row over the subject striped across the lanes of one vector register
// (striped_rows.hpp; traceback_passes.cpp, built for the SSE2 baseline and for AVX2, the variant
// chosen here for the machine), in 16-bit lanes where their values provably fit (below), else
// 32-bit: every value that decides a cell is the scalar recurrence's, so the cells found are the
// same.
#include <algorithm>
#include <optional>
#include <vector>

#include "align/traceback.hpp"
#include "align/traceback_passes.hpp"

namespace molaccel::align {
namespace {

// The variant for the instruction set asked for, or this machine's (never above it).
const traceback_passes::StripedPasses& passes_for(const detail::TracebackLimits& limits) {
  const SimdLevel simd = std::min(limits.simd.value_or(cpu_info().simd), cpu_info().simd);
  return simd >= SimdLevel::avx2 ? traceback_passes::isa_avx2::striped_passes()
                                 : traceback_passes::isa_scalar::striped_passes();
}

// 16-bit lanes: every pass keeps H >= its floor (0, or -1 in pass 2: traceback_passes.cpp says why
// that changes no start cell) and E, F >= floor - gap_open;
// the lanes' -infinity is -2^14 and intermediate values subtract at most one gap cost or add one
// letter score to these, so with costs and letter scores within 8192 nothing falls below -2^15.
bool costs_fit_16_bits(const Scoring& scoring) {
  return scoring.matrix.min_score() >= -8192 && scoring.gap_open <= 8192 && scoring.gap_extend <= 8192;
}
// From above, the largest term is a diagonal one, H of the row before plus a letter score: it fits
// while H stays at most this.
int highest_16_bit_h(const Scoring& scoring) {
  return 32767 - std::max(scoring.matrix.max_score(), 0);
}
// Whether a pass whose H never exceeds `bound` runs in 16-bit lanes.
bool narrow_lanes_for(const Scoring& scoring, int bound, const detail::TracebackLimits& limits) {
  return limits.narrow_lanes && costs_fit_16_bits(scoring) && bound <= highest_16_bit_h(scoring);
}

}  // namespace

Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring) {
  return detail::align_pair(query, subject, scoring, std::nullopt);
}

namespace detail {

std::string striped_variant(const TracebackLimits& limits) {
  const auto& passes = passes_for(limits);
  return fmt::format("striped/{}/{}-byte", passes.isa, passes.vector_bytes);
}

EndCell find_end(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                 const Scoring& scoring, std::optional<int> known_score, const TracebackLimits& limits) {
  if (query.empty() || subject.empty() || (known_score && *known_score <= 0)) return {};
  const auto& passes = passes_for(limits);
  std::optional<EndCell> end;
  // Without a known score 16-bit lanes are tried (and left when a row passes the limit).
  if (narrow_lanes_for(scoring, known_score.value_or(0), limits))
    end = passes.find_end(query, subject, scoring, known_score, true, highest_16_bit_h(scoring));
  if (!end) end = passes.find_end(query, subject, scoring, known_score, false, 0);
  // A known score above the pair's (no cell reaches it): the end of the pair's own best score.
  if (known_score && end->score < *known_score)
    return find_end(query, subject, scoring, std::nullopt, limits);
  return *end;
}

StartCell find_start(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring, const EndCell& end, const TracebackLimits& limits) {
  const std::vector<std::uint8_t> reversed_query(query.rend() - static_cast<std::ptrdiff_t>(end.query_end),
                                                 query.rend());
  const std::vector<std::uint8_t> reversed_subject(
      subject.rend() - static_cast<std::ptrdiff_t>(end.subject_end), subject.rend());
  return passes_for(limits).find_start(reversed_query, reversed_subject, scoring, end,
                                       narrow_lanes_for(scoring, end.score, limits));
}

RegionTrace trace_region(std::span<const std::uint8_t> query_part, std::span<const std::uint8_t> subject_part,
                         const Scoring& scoring, int score_bound, const TracebackLimits& limits) {
  if (query_part.empty() || subject_part.empty()) return {};
  return passes_for(limits).trace_region(query_part, subject_part, scoring,
                                         narrow_lanes_for(scoring, std::max(score_bound, 0), limits),
                                         limits.direction_bytes);
}

Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring, std::optional<int> known_score, const TracebackLimits& limits) {
  Alignment result;
  const EndCell end = find_end(query, subject, scoring, known_score, limits);
  result.score = end.score;
  if (end.score == 0) return result;
  const StartCell start = find_start(query, subject, scoring, end, limits);

  // Pass 3: region [start_i, end_i] x [start_j, end_j] with direction bytes, in row blocks.
  const RegionTrace trace =
      trace_region(query.subspan(start.query_start - 1, end.query_end - start.query_start + 1),
                   subject.subspan(start.subject_start - 1, end.subject_end - start.subject_start + 1),
                   scoring, end.score, limits);
  result.query_start = static_cast<std::uint32_t>(start.query_start + trace.query_offset);
  result.subject_start = static_cast<std::uint32_t>(start.subject_start + trace.subject_offset);
  result.query_end = static_cast<std::uint32_t>(end.query_end);
  result.subject_end = static_cast<std::uint32_t>(end.subject_end);
  result.identities = trace.identities;
  result.length = static_cast<std::uint32_t>(trace.ops.size());
  const std::string& ops = trace.ops;
  for (std::size_t k = 0; k < ops.size();) {
    std::size_t run = 1;
    while (k + run < ops.size() && ops[k + run] == ops[k]) ++run;
    result.cigar += fmt::format("{}{}", run, ops[k]);
    k += run;
  }
  return result;
}

}  // namespace detail
}  // namespace molaccel::align

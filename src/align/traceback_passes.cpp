// The three passes of the traceback (traceback.cpp says what each finds) over striped rows, in
// 16-bit or 32-bit lanes as the caller says; compiled once per instruction set.
#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "align/striped_rows.hpp"
#include "align/traceback_passes.hpp"

#define MOLACCEL_TRACEBACK_STR2(x) #x
#define MOLACCEL_TRACEBACK_STR(x) MOLACCEL_TRACEBACK_STR2(x)

namespace molaccel::align::traceback_passes::MOLACCEL_ISA_NAMESPACE {
namespace {

using namespace striped::MOLACCEL_ISA_NAMESPACE;

// Pass 1 in lanes of V. No H exceeds the pair's score, which is not known beforehand without
// `known_score`: V is 16-bit for those that fit, and while the H values so far stay at most `limit`
// the next row fits too; past it, nullopt (the caller reruns in 32-bit lanes). A row's maximum is
// located only where it matters: the first row reaching the known score, or each improving row.
template <LaneVector V>
std::optional<detail::EndCell> find_end_in(std::span<const std::uint8_t> query,
                                           std::span<const std::uint8_t> subject, const Scoring& scoring,
                                           std::optional<int> known_score, int limit) {
  StripedRows<V> rows(subject, scoring);
  detail::EndCell end;
  int highest = 0;
  for (std::size_t i = 1; i <= query.size(); ++i) {
    if (highest > limit) return std::nullopt;
    const int row_max = rows.template next<Track::row_max>(query[i - 1], 0, 0);
    highest = std::max(highest, row_max);
    if (known_score ? row_max < *known_score : row_max <= end.score) continue;
    // A padding column's H comes from a real column before it, minus gap costs: the first column
    // reaching a positive value is a real one.
    const std::size_t j = rows.first_column_reaching(known_score ? *known_score : row_max);
    if (j == subject.size()) throw Error("traceback: the row maximum is in no column (internal error)");
    end = {rows.row(j), i, j + 1};
    if (known_score) break;
  }
  return end;
}

// Pass 2 keeps anchored values at or above this floor. Clamping changes no start cell: the clamped
// recurrence is the anchored one with, besides, a fresh start of value -1 at every cell, so each
// value is the larger of the anchored value and -1 plus the score of some segment of alignment
// ending there. The start is the first cell (row, then column) whose diagonal term equals `best`;
// a segment ending in that match scores at most the pair's optimum `best` (dropping a leading gap
// only raises its score), so a clamped diagonal term is `best` exactly where the anchored one is.
// Every value stays within [-1 - gap_open, best] plus one letter score: 16-bit lanes hold pass 2
// whenever they hold pass 3, whatever gaps the anchored values cross (they never fall below -1).
// The floor also ends the lazy-F loop: the carried gap, kept above -infinity, falls below every
// H - gap_open.
constexpr int kAnchoredFloor = -1;

// Pass 2 in lanes of V, over the reversed prefixes that end at the end cell.
template <LaneVector V>
detail::StartCell find_start_in(std::span<const std::uint8_t> reversed_query,
                                std::span<const std::uint8_t> reversed_subject, const Scoring& scoring,
                                const detail::EndCell& end) {
  StripedRows<V> rows(reversed_subject, scoring);
  rows.start(kAnchoredFloor);
  for (std::size_t a = 1; a <= reversed_query.size(); ++a) {
    // The anchor: the alignment begins (in reverse) with the pair (end_i, end_j).
    const int left_diagonal = a == 1 ? 0 : kAnchoredFloor;
    if (!rows.template next<Track::diagonal>(reversed_query[a - 1], left_diagonal, kAnchoredFloor, end.score))
      continue;
    const std::size_t b = rows.first_column_with_diagonal(end.score);
    return {end.query_end - a + 1, end.subject_end - b};
  }
  throw Error("traceback: no start cell reaches the best score (internal error)");
}

// Pass 3 in lanes of V.
template <LaneVector V>
detail::RegionTrace trace_region_in(std::span<const std::uint8_t> query_part,
                                    std::span<const std::uint8_t> subject_part, const Scoring& scoring,
                                    std::size_t direction_bytes) {
  using Rows = StripedRows<V>;
  const std::size_t rm = query_part.size(), rn = subject_part.size();
  // Blocks of equal height: the checkpoint pass and the recomputation are then the least.
  const std::size_t max_rows = std::clamp<std::size_t>(direction_bytes / Rows::stride(rn), 1, rm);
  const std::size_t blocks_needed = (rm + max_rows - 1) / max_rows;
  const std::size_t block_rows = (rm + blocks_needed - 1) / blocks_needed;
  const std::size_t n_blocks = (rm + block_rows - 1) / block_rows;
  // The checkpoint pass: H and vertical-gap rows before each block's first row but the first (the
  // boundary) and the last (`forward` goes on into it).
  Rows forward(subject_part, scoring);
  std::vector<std::vector<int>> checkpoints_h(n_blocks), checkpoints_e(n_blocks);
  for (std::size_t b = 1; b < n_blocks; ++b) {
    for (std::size_t i = (b - 1) * block_rows + 1; i <= b * block_rows; ++i)
      forward.next(query_part[i - 1], 0, 0);
    if (b + 1 < n_blocks) forward.save(checkpoints_h[b], checkpoints_e[b]);
  }

  detail::RegionTrace trace;
  std::vector<std::uint8_t> direction;
  enum class State { h, e, f } state = State::h;
  std::size_t i = rm, j = rn;
  bool stopped = false;
  for (std::size_t b = n_blocks; b-- > 0 && !stopped && j > 0;) {
    // Direction bytes of the block's rows, columns 1..j (columns right of the trace are never read).
    const std::size_t row0 = b * block_rows;
    std::optional<Rows> narrower;
    if (b + 1 < n_blocks) {
      narrower.emplace(subject_part.first(j), scoring);
      if (b > 0) narrower->load(checkpoints_h[b], checkpoints_e[b]);
    }
    Rows& rows = narrower ? *narrower : forward;
    const std::size_t stride = Rows::stride(narrower ? j : rn);
    direction.resize((i - row0) * stride);
    for (std::size_t r = row0 + 1; r <= i; ++r) {
      rows.next(query_part[r - 1], 0, 0);
      rows.directions(direction.data() + (r - row0 - 1) * stride);
    }
    while (i > row0 && j > 0) {
      const std::uint8_t d = direction[(i - row0 - 1) * stride + rows.index(j - 1)];
      if (state == State::h) {
        const int source = d & 3;
        if (source == kFromStart) {
          stopped = true;
          break;
        }
        if (source == kFromDiagonal) {
          if (query_part[i - 1] == subject_part[j - 1]) ++trace.identities;
          trace.ops.push_back('M');
          --i, --j;
        } else {
          state = source == kFromE ? State::e : State::f;
        }
      } else if (state == State::e) {  // gap in the query: consumes subject
        trace.ops.push_back('D');
        if (!(d & kEExtends)) state = State::h;
        --j;
      } else {  // gap in the subject: consumes query
        trace.ops.push_back('I');
        if (!(d & kFExtends)) state = State::h;
        --i;
      }
    }
  }
  std::reverse(trace.ops.begin(), trace.ops.end());
  trace.query_offset = i;
  trace.subject_offset = j;
  return trace;
}

std::optional<detail::EndCell> find_end(std::span<const std::uint8_t> query,
                                        std::span<const std::uint8_t> subject, const Scoring& scoring,
                                        std::optional<int> known_score, bool narrow, int limit) {
  if (narrow) return find_end_in<Lanes16>(query, subject, scoring, known_score, limit);
  return find_end_in<Lanes32>(query, subject, scoring, known_score, std::numeric_limits<int>::max());
}
detail::StartCell find_start(std::span<const std::uint8_t> reversed_query,
                             std::span<const std::uint8_t> reversed_subject, const Scoring& scoring,
                             const detail::EndCell& end, bool narrow) {
  if (narrow) return find_start_in<Lanes16>(reversed_query, reversed_subject, scoring, end);
  return find_start_in<Lanes32>(reversed_query, reversed_subject, scoring, end);
}
detail::RegionTrace trace_region(std::span<const std::uint8_t> query_part,
                                 std::span<const std::uint8_t> subject_part, const Scoring& scoring,
                                 bool narrow, std::size_t direction_bytes) {
  if (narrow) return trace_region_in<Lanes16>(query_part, subject_part, scoring, direction_bytes);
  return trace_region_in<Lanes32>(query_part, subject_part, scoring, direction_bytes);
}

}  // namespace

const StripedPasses& striped_passes() noexcept {
  static const StripedPasses passes{MOLACCEL_TRACEBACK_STR(MOLACCEL_ISA), static_cast<int>(kVectorBytes),
                                    find_end, find_start, trace_region};
  return passes;
}

}  // namespace molaccel::align::traceback_passes::MOLACCEL_ISA_NAMESPACE

// Traceback of reported hits (CPU). Three passes keep memory to the aligned region:
//  1. forward scores in linear memory: best score and its first end cell in row-major order (with
//     the score known, the first cell reaching it);
//  2. backward from that cell, anchored there, in linear memory: the nearest start cell at which an
//     alignment reaches the best score;
//  3. Gotoh with one direction byte per cell over that region, traced back from its corner. A
//     region over the byte bound is traced one row block at a time: a forward pass saves the DP
//     row (H and the vertical gap) at each block's start, and each block's direction bytes are
//     recomputed from its checkpoint, left of the current column only, when the trace enters it.
#include <algorithm>
#include <limits>
#include <vector>

#include "align/traceback.hpp"

namespace molaccel::align {
namespace {

constexpr int kNegativeInfinity = std::numeric_limits<int>::min() / 4;

// Direction byte: bits 0-1 = source of H (0 start, 1 diagonal, 2 E, 3 F);
// bit 2 = E extends E (else opens from H); bit 3 = F extends F (else opens from H).
enum : std::uint8_t {
  kFromStart = 0,
  kFromDiagonal = 1,
  kFromE = 2,
  kFromF = 3,
  kEExtends = 4,
  kFExtends = 8
};

// Rows [row_begin, row_end) (1-based, of the region) of the Gotoh recurrence over columns
// 1..cols, from `h` and `e` holding the row before row_begin (updated in place). With `direction`,
// each row's direction bytes go there, `cols` per row.
void region_rows(std::span<const std::uint8_t> query_part, std::span<const std::uint8_t> subject_part,
                 const Scoring& scoring, std::size_t row_begin, std::size_t row_end, std::size_t cols,
                 std::vector<int>& h, std::vector<int>& e, std::uint8_t* direction) {
  const int open = scoring.gap_open, extend = scoring.gap_extend;
  for (std::size_t i = row_begin; i < row_end; ++i) {
    int diagonal = 0, f = kNegativeInfinity, h_left = 0;
    const auto q = query_part[i - 1];
    std::uint8_t* row = direction ? direction + (i - row_begin) * cols : nullptr;
    for (std::size_t j = 1; j <= cols; ++j) {
      std::uint8_t d = 0;
      const int e_open = h[j] - open, e_extend = e[j] - extend;
      // Here "e" is the vertical gap (consumes query) and "f" the horizontal one (consumes
      // subject); the direction byte names them as F and E of the public convention.
      if (e_extend >= e_open) d |= kFExtends;
      e[j] = std::max(e_open, e_extend);
      const int f_open = h_left - open, f_extend = f - extend;
      if (f_extend >= f_open) d |= kEExtends;
      f = std::max(f_open, f_extend);
      const int match = diagonal + scoring.matrix.at(q, subject_part[j - 1]);
      int value = 0;
      std::uint8_t source = kFromStart;
      if (match > value) value = match, source = kFromDiagonal;
      if (f > value) value = f, source = kFromE;
      if (e[j] > value) value = e[j], source = kFromF;
      if (row) row[j - 1] = d | source;
      diagonal = h[j];
      h[j] = value;
      h_left = value;
    }
  }
}

}  // namespace

Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring) {
  return detail::align_pair(query, subject, scoring, std::nullopt);
}

namespace detail {

Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring, std::optional<int> known_score, const TracebackLimits& limits) {
  const int open = scoring.gap_open, extend = scoring.gap_extend;
  const std::size_t m = query.size(), n = subject.size();
  Alignment result;
  if (m == 0 || n == 0) return result;

  // Pass 1: best score and first end cell (1-based).
  std::size_t end_i = 0, end_j = 0;
  int best = 0;
  {
    std::vector<int> h(n + 1, 0), e(n + 1, kNegativeInfinity);
    const int enough = known_score ? *known_score : std::numeric_limits<int>::max();
    for (std::size_t i = 1; i <= m && best < enough; ++i) {
      int diagonal = 0, f = kNegativeInfinity, h_left = 0;
      for (std::size_t j = 1; j <= n; ++j) {
        e[j] = std::max(e[j] - extend, h[j] - open);  // vertical gap (from row above)
        f = std::max(f - extend, h_left - open);      // horizontal gap (from the left)
        int value = std::max({0, diagonal + scoring.matrix.at(query[i - 1], subject[j - 1]), e[j], f});
        diagonal = h[j];
        h[j] = value;
        h_left = value;
        if (value > best) {
          best = value, end_i = i, end_j = j;
          if (best >= enough) break;
        }
      }
    }
  }
  result.score = best;
  if (best == 0) return result;

  // Pass 2: anchored at the end cell, walk backward over reversed prefixes; the alignment must
  // begin (in reverse) with the pair (end_i, end_j). Nearest cell reaching `best` is the start.
  std::size_t start_i = end_i, start_j = end_j;
  {
    const std::size_t rm = end_i, rn = end_j;
    std::vector<int> h(rn + 1, kNegativeInfinity), e(rn + 1, kNegativeInfinity);
    h[0] = 0;  // the anchor
    bool found = false;
    for (std::size_t a = 1; a <= rm && !found; ++a) {
      int diagonal = h[0], f = kNegativeInfinity, h_left = kNegativeInfinity;
      h[0] = kNegativeInfinity;
      for (std::size_t b = 1; b <= rn; ++b) {
        e[b] = std::max(e[b] - extend, h[b] - open);
        f = std::max(f - extend, h_left - open);
        const int match = diagonal == kNegativeInfinity
                              ? kNegativeInfinity
                              : diagonal + scoring.matrix.at(query[end_i - a], subject[end_j - b]);
        const int value = std::max({match, e[b], f});
        diagonal = h[b];
        h[b] = value;
        h_left = value;
        if (match == best && !found) {
          start_i = end_i - a + 1;
          start_j = end_j - b + 1;
          found = true;
          break;
        }
      }
    }
    if (!found) throw Error("traceback: no start cell reaches the best score (internal error)");
  }

  // Pass 3: region [start_i, end_i] x [start_j, end_j] with direction bytes, in row blocks.
  const std::size_t rm = end_i - start_i + 1, rn = end_j - start_j + 1;
  const auto query_part = query.subspan(start_i - 1, rm), subject_part = subject.subspan(start_j - 1, rn);
  // Blocks of equal height: the checkpoint pass and the recomputation are then the least.
  const std::size_t max_rows = std::clamp<std::size_t>(limits.direction_bytes / rn, 1, rm);
  const std::size_t blocks_needed = (rm + max_rows - 1) / max_rows;
  const std::size_t block_rows = (rm + blocks_needed - 1) / blocks_needed;
  const std::size_t n_blocks = (rm + block_rows - 1) / block_rows;
  // checkpoints[b]: H and vertical-gap rows before block b's first row (block 0: the boundary).
  std::vector<std::vector<int>> checkpoints_h(n_blocks), checkpoints_e(n_blocks);
  {
    std::vector<int> h(rn + 1, 0), e(rn + 1, kNegativeInfinity);
    for (std::size_t b = 0; b < n_blocks; ++b) {
      checkpoints_h[b] = h;
      checkpoints_e[b] = e;
      if (b + 1 < n_blocks)
        region_rows(query_part, subject_part, scoring, b * block_rows + 1, (b + 1) * block_rows + 1, rn, h, e,
                    nullptr);
    }
  }
  std::vector<std::uint8_t> direction;
  enum class State { h, e, f } state = State::h;
  std::size_t i = rm, j = rn;
  std::string ops;  // reversed
  std::uint32_t identities = 0;
  bool stopped = false;
  for (std::size_t b = n_blocks; b-- > 0 && !stopped && j > 0;) {
    // Direction bytes of the block's rows, columns 1..j (columns right of the trace are never read).
    const std::size_t row0 = b * block_rows, cols = j;
    direction.resize((i - row0) * cols);
    std::vector<int> h = std::move(checkpoints_h[b]), e = std::move(checkpoints_e[b]);
    region_rows(query_part, subject_part, scoring, row0 + 1, i + 1, cols, h, e, direction.data());
    while (i > row0 && j > 0) {
      const std::uint8_t d = direction[(i - row0 - 1) * cols + (j - 1)];
      if (state == State::h) {
        const int source = d & 3;
        if (source == kFromStart) {
          stopped = true;
          break;
        }
        if (source == kFromDiagonal) {
          if (query_part[i - 1] == subject_part[j - 1]) ++identities;
          ops.push_back('M');
          --i, --j;
        } else {
          state = source == kFromE ? State::e : State::f;
        }
      } else if (state == State::e) {  // gap in the query: consumes subject
        ops.push_back('D');
        if (!(d & kEExtends)) state = State::h;
        --j;
      } else {  // gap in the subject: consumes query
        ops.push_back('I');
        if (!(d & kFExtends)) state = State::h;
        --i;
      }
    }
  }
  std::reverse(ops.begin(), ops.end());
  result.query_start = static_cast<std::uint32_t>(start_i + i);
  result.subject_start = static_cast<std::uint32_t>(start_j + j);
  result.query_end = static_cast<std::uint32_t>(end_i);
  result.subject_end = static_cast<std::uint32_t>(end_j);
  result.identities = identities;
  result.length = static_cast<std::uint32_t>(ops.size());
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

// Traceback of reported hits (CPU). Three passes keep memory to the aligned region:
//  1. forward scores in linear memory: best score and its first end cell in row-major order (with
//     the score known, the first cell reaching it);
//  2. backward from that cell, anchored there, in linear memory: the nearest start cell at which an
//     alignment reaches the best score;
//  3. Gotoh with one direction byte per cell over that region, traced back from its corner. A
//     region over the byte bound is traced one row block at a time: a forward pass saves the DP
//     row (H and the vertical gap) at each block's start, and each block's direction bytes are
//     recomputed from its checkpoint, left of the current column only, when the trace enters it.
// Passes 1 and 2 hold no direction bytes, so they run row by row over the subject striped across
// the lanes of 4 x 32-bit vectors (Farrar's layout, with the horizontal gap finished by the lazy-F
// loop): every H, E and F value is the scalar recurrence's, so the cells found are the same.
#include <algorithm>
#include <limits>
#include <vector>

#include "align/traceback.hpp"

namespace molaccel::align {
namespace {

constexpr int kNegativeInfinity = std::numeric_limits<int>::min() / 4;

// 4 lanes of int32 (GCC/Clang vector extensions: one SSE2 register at the baseline ISA).
constexpr std::size_t kLanes = 4;
typedef int Lanes __attribute__((vector_size(kLanes * sizeof(int))));

Lanes splat(int x) {
  return Lanes{} + x;
}
Lanes max(Lanes a, Lanes b) {
  const Lanes greater = a > b;
  return (a & greater) | (b & ~greater);
}
bool any_greater(Lanes a, Lanes b) {
  const Lanes greater = a > b;
  int any = 0;
  for (std::size_t l = 0; l < kLanes; ++l) any |= greater[l];
  return any != 0;
}
int horizontal_max(Lanes a) {
  int m = a[0];
  for (std::size_t l = 1; l < kLanes; ++l) m = std::max(m, a[l]);
  return m;
}
// Lane l takes lane l - 1's value; lane 0 takes `first` (the column before the stripe's start).
Lanes shift_in(Lanes a, int first) {
  return __builtin_shufflevector(splat(first), a, 0, 4, 5, 6);
}

// Rows of the Smith-Waterman (pass 1) or anchored (pass 2) recurrence over one subject laid out
// in stripes: column j (0-based) is lane j / segments, segment j % segments. `profile` holds, for
// each query letter, its score against every striped column (padding columns score -infinity).
class StripedRows {
 public:
  StripedRows(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
              const Scoring& scoring)
      : n_(subject.size()),
        segments_((subject.size() + kLanes - 1) / kLanes),
        open_(scoring.gap_open),
        extend_(scoring.gap_extend),
        row_of_letter_(kMatrixStride, -1) {
    for (const std::uint8_t letter : query) {
      if (row_of_letter_[letter] >= 0) continue;
      row_of_letter_[letter] = static_cast<int>(profile_.size() / segments_);
      for (std::size_t s = 0; s < segments_; ++s) {
        Lanes v = splat(kNegativeInfinity);
        for (std::size_t l = 0; l < kLanes; ++l) {
          const std::size_t j = l * segments_ + s;
          if (j < n_) v[l] = scoring.matrix.at(letter, subject[j]);
        }
        profile_.push_back(v);
      }
    }
    h_load_.assign(segments_, Lanes{});
    h_store_.assign(segments_, Lanes{});
    e_.assign(segments_, splat(kNegativeInfinity));
  }

  // Sets the row before the first: all `value` (0 for Smith-Waterman, -infinity when anchored).
  void start(int value) {
    std::fill(h_load_.begin(), h_load_.end(), splat(value));
    std::fill(e_.begin(), e_.end(), splat(kNegativeInfinity));
  }

  // The next row for query letter `letter`; `left_diagonal` is H of the row before at column 0
  // (0 for Smith-Waterman; the anchor, then -infinity, when anchored); `floor` 0 clamps at zero
  // (Smith-Waterman), -infinity does not. With `match_target`, returns whether some cell's
  // diagonal term (H of the row before, up-left, plus the letter score) equals it. Afterwards
  // row() holds the row's H values and row_max() their maximum.
  bool next(std::uint8_t letter, int left_diagonal, int floor,
            std::optional<int> match_target = std::nullopt) {
    const Lanes* p = profile_.data() + static_cast<std::size_t>(row_of_letter_[letter]) * segments_;
    const Lanes open = splat(open_), extend = splat(extend_), lower = splat(floor);
    const Lanes target = splat(match_target.value_or(0));
    Lanes hit = Lanes{};
    Lanes f = splat(kNegativeInfinity), row_max = splat(kNegativeInfinity);
    Lanes h = shift_in(h_load_[segments_ - 1], left_diagonal);
    for (std::size_t s = 0; s < segments_; ++s) {
      const Lanes match = h + p[s];
      if (match_target) hit |= match == target;
      h = max(max(max(match, e_[s]), f), lower);
      h_store_[s] = h;
      row_max = max(row_max, h);
      const Lanes h_open = h - open;
      e_[s] = max(e_[s] - extend, h_open);
      f = max(f - extend, h_open);
      h = h_load_[s];
    }
    // Lazy F: the horizontal gap carried across the stripes' boundaries, as long as it still
    // raises some H (and with it the vertical gap of the next row).
    f = shift_in(f, kNegativeInfinity);
    for (std::size_t s = 0;;) {
      const Lanes h_open = h_store_[s] - open;
      if (!any_greater(f, h_open)) break;
      h_store_[s] = max(h_store_[s], f);
      row_max = max(row_max, h_store_[s]);
      e_[s] = max(e_[s], h_store_[s] - open);
      f = f - extend;
      if (++s == segments_) {
        s = 0;
        f = shift_in(f, kNegativeInfinity);
      }
    }
    row_max_ = horizontal_max(row_max);
    std::swap(h_load_, h_store_);
    for (std::size_t l = 0; l < kLanes; ++l)
      if (hit[l]) return true;
    return false;
  }

  int row_max() const { return row_max_; }
  // H of the last row at column j (0-based), and of the row before it.
  int row(std::size_t j) const { return h_load_[j % segments_][j / segments_]; }
  int previous_row(std::size_t j) const { return h_store_[j % segments_][j / segments_]; }
  // The first column (0-based) of the last row whose H is at least `value`; n if none.
  std::size_t first_column_reaching(int value) const {
    for (std::size_t j = 0; j < n_; ++j)
      if (row(j) >= value) return j;
    return n_;
  }

 private:
  std::size_t n_, segments_;
  int open_, extend_;
  std::vector<int> row_of_letter_;
  std::vector<Lanes> profile_, h_load_, h_store_, e_;
  int row_max_ = 0;
};

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

RegionTrace trace_region(std::span<const std::uint8_t> query_part, std::span<const std::uint8_t> subject_part,
                         const Scoring& scoring, int /*score_bound*/, const TracebackLimits& limits) {
  const std::size_t rm = query_part.size(), rn = subject_part.size();
  RegionTrace trace;
  if (rm == 0 || rn == 0) return trace;
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
  std::string& ops = trace.ops;  // reversed
  std::uint32_t& identities = trace.identities;
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
  trace.query_offset = i;
  trace.subject_offset = j;
  return trace;
}

Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring, std::optional<int> known_score, const TracebackLimits& limits) {
  const std::size_t m = query.size(), n = subject.size();
  Alignment result;
  if (m == 0 || n == 0) return result;

  // Pass 1: best score and first end cell (1-based): the first row whose maximum reaches the
  // known score (or improves on the best so far), and the first column of that row holding it.
  std::size_t end_i = 0, end_j = 0;
  int best = 0;
  {
    StripedRows rows(query, subject, scoring);
    rows.start(0);
    const int enough = known_score ? *known_score : std::numeric_limits<int>::max();
    for (std::size_t i = 1; i <= m && best < enough; ++i) {
      rows.next(query[i - 1], 0, 0);
      if (rows.row_max() > best) {
        // A padding column's H comes from a real column before it, minus gap costs: the row's
        // maximum is a real column's.
        const std::size_t j = rows.first_column_reaching(std::min(rows.row_max(), enough));
        if (j == n) throw Error("traceback: the row maximum is in no column (internal error)");
        best = rows.row(j);
        end_i = i, end_j = j + 1;
      }
    }
  }
  result.score = best;
  if (best == 0) return result;

  // Pass 2: anchored at the end cell, walk backward over reversed prefixes; the alignment must
  // begin (in reverse) with the pair (end_i, end_j). Nearest cell reaching `best` is the start:
  // the first row (row-major) where a diagonal term equals it, and its first such column.
  std::size_t start_i = end_i, start_j = end_j;
  {
    std::vector<std::uint8_t> reversed_query(query.rend() - static_cast<std::ptrdiff_t>(end_i), query.rend());
    std::vector<std::uint8_t> reversed_subject(subject.rend() - static_cast<std::ptrdiff_t>(end_j),
                                               subject.rend());
    StripedRows rows(reversed_query, reversed_subject, scoring);
    rows.start(kNegativeInfinity);
    bool found = false;
    for (std::size_t a = 1; a <= end_i && !found; ++a) {
      const std::uint8_t letter = reversed_query[a - 1];
      if (!rows.next(letter, a == 1 ? 0 : kNegativeInfinity, kNegativeInfinity, best)) continue;
      // The row holds a diagonal term equal to `best`: its first column, from the row before.
      for (std::size_t b = 1; b <= end_j; ++b) {
        const int diagonal = b == 1 ? (a == 1 ? 0 : kNegativeInfinity) : rows.previous_row(b - 2);
        if (diagonal == kNegativeInfinity) continue;
        if (diagonal + scoring.matrix.at(letter, reversed_subject[b - 1]) == best) {
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
  const RegionTrace trace =
      trace_region(query.subspan(start_i - 1, end_i - start_i + 1),
                   subject.subspan(start_j - 1, end_j - start_j + 1), scoring, best, limits);
  result.query_start = static_cast<std::uint32_t>(start_i + trace.query_offset);
  result.subject_start = static_cast<std::uint32_t>(start_j + trace.subject_offset);
  result.query_end = static_cast<std::uint32_t>(end_i);
  result.subject_end = static_cast<std::uint32_t>(end_j);
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

// Traceback of reported hits (CPU). Three passes keep memory to the aligned region:
//  1. forward scores in linear memory: best score and its first end cell in row-major order (with
//     the score known, the first cell reaching it);
//  2. backward from that cell, anchored there, in linear memory: the nearest start cell at which an
//     alignment reaches the best score;
//  3. Gotoh with one direction byte per cell over that region, traced back from its corner. A
//     region over the byte bound is traced one row block at a time: a forward pass saves the DP
//     row (H and the vertical gap) at each block's start, and each block's direction bytes are
//     recomputed from its checkpoint, left of the current column only, when the trace enters it.
// All three run row by row over the subject striped across the lanes of 16-byte vectors (Farrar's
// layout, with the horizontal gap finished by the lazy-F loop): every H, E and F value is the
// scalar recurrence's, so the cells found are the same. Passes 1 and 2 use 4 x 32-bit lanes; pass 3
// uses 8 x 16-bit lanes when its scores fit (they never exceed the pair's score), else 4 x 32-bit,
// and derives each row's direction bytes from its final values in a second vector sweep.
#include <algorithm>
#include <concepts>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "align/traceback.hpp"

namespace molaccel::align {
namespace {

constexpr int kNegativeInfinity = std::numeric_limits<int>::min() / 4;

// 16-byte vectors (GCC/Clang vector extensions: one SSE2 register at the baseline ISA) of 4 x
// int32 or 8 x int16; the byte vector that holds one direction byte per lane.
template <class T>
struct Vector16 {
  typedef T type __attribute__((vector_size(16)));
};
template <std::size_t N>
struct ByteVector {
  typedef std::uint8_t type __attribute__((vector_size(N)));
};
using Lanes = Vector16<int>::type;
using Lanes16 = Vector16<std::int16_t>::type;
template <class V>
concept LaneVector = std::same_as<V, Lanes> || std::same_as<V, Lanes16>;
template <LaneVector V>
using Element = std::remove_cvref_t<decltype(std::declval<V>()[0])>;
template <LaneVector V>
constexpr std::size_t kLanesOf = sizeof(V) / sizeof(Element<V>);
constexpr std::size_t kLanes = kLanesOf<Lanes>;

template <LaneVector V = Lanes>
V splat(int x) {
  return V{} + static_cast<Element<V>>(x);
}
template <LaneVector V>
V max(V a, V b) {
  return a > b ? a : b;  // one pmaxsw in 16-bit lanes; compare and select in 32-bit ones
}
template <LaneVector V>
bool any_greater(V a, V b) {
  const V greater = a > b;
  std::uint64_t halves[2];
  std::memcpy(halves, &greater, sizeof(halves));
  return (halves[0] | halves[1]) != 0;
}
int horizontal_max(Lanes a) {
  int m = a[0];
  for (std::size_t l = 1; l < kLanes; ++l) m = std::max(m, a[l]);
  return m;
}
// Lane l takes lane l - 1's value; lane 0 takes `first` (the column before the stripe's start).
template <LaneVector V>
V shift_in(V a, int first) {
  V shifted;
  if constexpr (kLanesOf<V> == 4)
    shifted = __builtin_shufflevector(V{}, a, 0, 4, 5, 6);
  else
    shifted = __builtin_shufflevector(V{}, a, 0, 8, 9, 10, 11, 12, 13, 14);
  shifted[0] = static_cast<Element<V>>(first);
  return shifted;
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

// Rows of pass 3's recurrence over the region (Gotoh, local, restarted at the region's edges: H is
// 0 left of column 1 and above row 1), striped like StripedRows in lanes of V. Here "e" is the
// vertical gap (consumes query) and "f" the horizontal one (consumes subject); the direction byte
// names them as F and E of the public convention. A row is computed in three sweeps over its
// stripes: H with the lazy-F loop (E comes from the row above only, so it is final at once); each
// lane's horizontal gap at its last column, which gives the gap carried into every lane; then the
// exact horizontal gap of every cell and the direction bytes, with the scalar recurrence's ties:
// diagonal if match > 0, then the horizontal gap if strictly greater, then the vertical one if
// strictly greater; a gap extends when extending scores at least as much as opening.
template <LaneVector V>
class RegionRows {
 public:
  using T = Element<V>;
  static constexpr std::size_t kWidth = kLanesOf<V>;
  // Far below every real gap value (>= -gap_open), with room to subtract gap costs in 16 bits.
  static constexpr int kMinusInfinity = sizeof(T) == 2 ? -(1 << 14) : kNegativeInfinity;

  // Direction bytes per row of `cols` columns: whole stripes, padding columns included.
  static std::size_t stride(std::size_t cols) { return kWidth * ((cols + kWidth - 1) / kWidth); }

  // Starts before row 1 (H = 0, no vertical gap); load() starts elsewhere.
  RegionRows(std::span<const std::uint8_t> query_part, std::span<const std::uint8_t> subject_part,
             const Scoring& scoring)
      : cols_(subject_part.size()),
        segments_((subject_part.size() + kWidth - 1) / kWidth),
        open_(scoring.gap_open),
        extend_(scoring.gap_extend),
        row_of_letter_(kMatrixStride, -1),
        h_prev_(segments_, V{}),
        h_cur_(segments_),
        e_prev_(segments_, splat<V>(kMinusInfinity)),
        e_cur_(segments_) {
    for (const std::uint8_t letter : query_part) {
      if (row_of_letter_[letter] >= 0) continue;
      row_of_letter_[letter] = static_cast<int>(profile_.size() / segments_);
      for (std::size_t s = 0; s < segments_; ++s) {
        V v = splat<V>(kMinusInfinity);
        for (std::size_t l = 0; l < kWidth; ++l) {
          const std::size_t j = l * segments_ + s;
          if (j < cols_) v[l] = static_cast<T>(scoring.matrix.at(letter, subject_part[j]));
        }
        profile_.push_back(v);
      }
    }
  }

  // The row before the next one, from (at least) `cols` row-major H and vertical-gap values.
  void load(const std::vector<int>& h, const std::vector<int>& e) {
    for (std::size_t s = 0; s < segments_; ++s)
      for (std::size_t l = 0; l < kWidth; ++l) {
        const std::size_t j = l * segments_ + s;
        h_prev_[s][l] = static_cast<T>(j < cols_ ? h[j] : 0);
        e_prev_[s][l] = static_cast<T>(j < cols_ ? e[j] : kMinusInfinity);
      }
  }
  // The last row computed, row-major (a checkpoint for load()).
  void save(std::vector<int>& h, std::vector<int>& e) const {
    h.resize(cols_);
    e.resize(cols_);
    for (std::size_t j = 0; j < cols_; ++j) {
      h[j] = h_prev_[j % segments_][j / segments_];
      e[j] = e_prev_[j % segments_][j / segments_];
    }
  }
  // Where column j (0-based) of a row is in its direction bytes.
  std::size_t index(std::size_t j) const { return (j % segments_) * kWidth + j / segments_; }

  // The next row, for query letter `letter`; with `direction`, its stride(cols) direction bytes.
  void next(std::uint8_t letter, std::uint8_t* direction) {
    const V* p = profile_.data() + static_cast<std::size_t>(row_of_letter_[letter]) * segments_;
    const V open = splat<V>(open_), extend = splat<V>(extend_), minus_infinity = splat<V>(kMinusInfinity);
    V f = minus_infinity, h_diagonal = shift_in(h_prev_[segments_ - 1], 0);
    for (std::size_t s = 0; s < segments_; ++s) {
      const V e = max(e_prev_[s] - extend, h_prev_[s] - open);
      e_cur_[s] = e;
      const V h = max(max(max(h_diagonal + p[s], e), f), V{});
      h_cur_[s] = h;
      f = max(f - extend, h - open);
      h_diagonal = h_prev_[s];
    }
    // Lazy F, as in StripedRows; the gap is kept above -infinity (no wrap-around in 16 bits).
    f = shift_in(f, kMinusInfinity);
    for (std::size_t s = 0;;) {
      if (!any_greater(f, h_cur_[s] - open)) break;
      h_cur_[s] = max(h_cur_[s], f);
      f = max(f - extend, minus_infinity);
      if (++s == segments_) {
        s = 0;
        f = shift_in(f, kMinusInfinity);
      }
    }
    if (direction) directions(p, direction);
    std::swap(h_prev_, h_cur_);
    std::swap(e_prev_, e_cur_);
  }

 private:
  // Direction bytes of the row in h_cur_ (the row before in h_prev_, e_prev_).
  void directions(const V* p, std::uint8_t* direction) const {
    const V open = splat<V>(open_), extend = splat<V>(extend_);
    // Each lane's horizontal gap at its last column with nothing carried in from the lane before...
    V f = splat<V>(kMinusInfinity), h_left = shift_in(h_cur_[segments_ - 1], 0);
    for (std::size_t s = 0; s < segments_; ++s) {
      f = max(f - extend, h_left - open);
      h_left = h_cur_[s];
    }
    // ... then with the gap carried from lane to lane (none into lane 0: nothing left of column 1).
    V last_f;
    std::int64_t carried = kMinusInfinity;  // into the lane's first column
    for (std::size_t l = 0; l < kWidth; ++l) {
      const std::int64_t at_last = carried - static_cast<std::int64_t>(segments_ - 1) * extend_;
      last_f[l] =
          static_cast<T>(std::max<std::int64_t>(f[l], std::max<std::int64_t>(at_last, kMinusInfinity)));
      carried = std::max<std::int64_t>(last_f[l] - extend_, kMinusInfinity);
    }
    // Every cell: the horizontal gap from its left neighbour's exact one, then the source of H
    // (start if H = 0, else the first of diagonal, horizontal gap, vertical gap to equal H: the
    // scalar order of strict comparisons) and the extend bits.
    const V three = splat<V>(3), minus_two = splat<V>(-2);
    const V e_bit = splat<V>(kEExtends), f_bit = splat<V>(kFExtends);
    // Local copies: the byte stores may alias any member, which would reload them every segment.
    const std::size_t segments = segments_;
    const V *h_cur = h_cur_.data(), *h_prev = h_prev_.data(), *e_prev = e_prev_.data();
    V f_left = shift_in(last_f, kMinusInfinity), h_diagonal = shift_in(h_prev[segments - 1], 0);
    h_left = shift_in(h_cur[segments - 1], 0);
    for (std::size_t s = 0; s < segments; ++s) {
      const V h = h_cur[s], h_up = h_prev[s];
      const V left_extend = f_left - extend, left_open = h_left - open;
      const V f_here = max(left_extend, left_open);
      const V from_diagonal = h == h_diagonal + p[s], from_left = h == f_here, from_start = h == V{};
      const V source = (three + (from_left & ~from_diagonal) + (from_diagonal & minus_two)) & ~from_start;
      const V d =
          source | ((left_extend >= left_open) & e_bit) | ((e_prev[s] - extend >= h_up - open) & f_bit);
      const auto bytes = __builtin_convertvector(d, typename ByteVector<kWidth>::type);
      std::memcpy(direction + s * kWidth, &bytes, kWidth);
      f_left = f_here;
      h_left = h;
      h_diagonal = h_up;
    }
  }

  std::size_t cols_, segments_;
  int open_, extend_;
  std::vector<int> row_of_letter_;
  std::vector<V> profile_, h_prev_, h_cur_, e_prev_, e_cur_;
};

// Pass 3 in lanes of V (detail::trace_region chooses them).
template <LaneVector V>
detail::RegionTrace trace_region_in(std::span<const std::uint8_t> query_part,
                                    std::span<const std::uint8_t> subject_part, const Scoring& scoring,
                                    const detail::TracebackLimits& limits) {
  using Rows = RegionRows<V>;
  const std::size_t rm = query_part.size(), rn = subject_part.size();
  // Blocks of equal height: the checkpoint pass and the recomputation are then the least.
  const std::size_t max_rows = std::clamp<std::size_t>(limits.direction_bytes / Rows::stride(rn), 1, rm);
  const std::size_t blocks_needed = (rm + max_rows - 1) / max_rows;
  const std::size_t block_rows = (rm + blocks_needed - 1) / blocks_needed;
  const std::size_t n_blocks = (rm + block_rows - 1) / block_rows;
  // The checkpoint pass: H and vertical-gap rows before each block's first row but the first (the
  // boundary) and the last (`forward` goes on into it).
  Rows forward(query_part, subject_part, scoring);
  std::vector<std::vector<int>> checkpoints_h(n_blocks), checkpoints_e(n_blocks);
  for (std::size_t b = 1; b < n_blocks; ++b) {
    for (std::size_t i = (b - 1) * block_rows + 1; i <= b * block_rows; ++i)
      forward.next(query_part[i - 1], nullptr);
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
      narrower.emplace(query_part, subject_part.first(j), scoring);
      if (b > 0) narrower->load(checkpoints_h[b], checkpoints_e[b]);
    }
    Rows& rows = narrower ? *narrower : forward;
    const std::size_t stride = Rows::stride(narrower ? j : rn);
    direction.resize((i - row0) * stride);
    for (std::size_t r = row0 + 1; r <= i; ++r)
      rows.next(query_part[r - 1], direction.data() + (r - row0 - 1) * stride);
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

}  // namespace

Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring) {
  return detail::align_pair(query, subject, scoring, std::nullopt);
}

namespace detail {

RegionTrace trace_region(std::span<const std::uint8_t> query_part, std::span<const std::uint8_t> subject_part,
                         const Scoring& scoring, int score_bound, const TracebackLimits& limits) {
  if (query_part.empty() || subject_part.empty()) return {};
  // 16-bit lanes hold every value when H stays below 2^15 by a letter score (H, the diagonal term)
  // and gap costs stay small against the 16-bit -infinity (E and F are at least -gap_open).
  const ScoringMatrix& matrix = scoring.matrix;
  const bool fits_16_bits = std::max(score_bound, 0) + std::max(matrix.max_score(), 0) <= 32767 &&
                            matrix.min_score() >= -8192 && scoring.gap_open <= 8192 &&
                            scoring.gap_extend <= 8192;
  if (limits.narrow_lanes && fits_16_bits)
    return trace_region_in<Lanes16>(query_part, subject_part, scoring, limits);
  return trace_region_in<Lanes>(query_part, subject_part, scoring, limits);
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

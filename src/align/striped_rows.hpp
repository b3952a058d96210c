// Rows of the local alignment recurrence (Gotoh, affine gaps) over one subject striped across the
// lanes of a vector (Farrar's layout, the horizontal gap finished by the lazy-F loop), in 16-bit or
// 32-bit lanes: the machinery shared by the three passes of the traceback (traceback_passes.cpp,
// compiled per instruction set: 16-byte vectors at the SSE2 baseline, 32-byte ones with AVX2).
// Every H, E and F value is the scalar recurrence's as long as it fits the lanes; which bounds make
// 16-bit lanes exact is the callers' argument (traceback.cpp, traceback_passes.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "molaccel/align.hpp"

#ifndef MOLACCEL_ISA_NAMESPACE
#error "include from a source compiled through molaccel_add_multiversion"
#endif

namespace molaccel::align::striped::MOLACCEL_ISA_NAMESPACE {

constexpr int kNegativeInfinity = std::numeric_limits<int>::min() / 4;

// One register: 32 bytes with AVX2 (an AVX-512 build would take these too: 64-byte vectors were
// no faster, docs/PERFORMANCE.md), else 16 (SSE2).
#if defined(__AVX2__)
constexpr std::size_t kVectorBytes = 32;
#else
constexpr std::size_t kVectorBytes = 16;
#endif

// Vectors (GCC/Clang vector extensions) of int32 or int16; the byte vector that holds one
// direction byte per lane.
template <class T, std::size_t Bytes>
struct VectorOf {
  typedef T type __attribute__((vector_size(Bytes)));
};
using Lanes32 = VectorOf<std::int32_t, kVectorBytes>::type;
using Lanes16 = VectorOf<std::int16_t, kVectorBytes>::type;
template <class V>
concept LaneVector = std::same_as<V, Lanes32> || std::same_as<V, Lanes16>;
template <LaneVector V>
using Element = std::remove_cvref_t<decltype(std::declval<V>()[0])>;
template <LaneVector V>
constexpr std::size_t kLanesOf = sizeof(V) / sizeof(Element<V>);

template <LaneVector V>
V splat(int x) {
  return V{} + static_cast<Element<V>>(x);
}
template <LaneVector V>
V max(V a, V b) {
  return a > b ? a : b;  // one instruction, but for 32-bit lanes in SSE2 (compare and select)
}
template <LaneVector V>
bool any_set(V a) {
  std::uint64_t words[sizeof(V) / 8];
  std::memcpy(words, &a, sizeof(words));
  std::uint64_t any = 0;
  for (const std::uint64_t word : words) any |= word;
  return any != 0;
}
template <LaneVector V>
bool any_greater(V a, V b) {
  return any_set<V>(a > b);
}
template <LaneVector V>
int horizontal_max(V a) {
  int m = a[0];
  for (std::size_t l = 1; l < kLanesOf<V>; ++l) m = std::max<int>(m, a[l]);
  return m;
}
// Lane l takes lane l - 1's value; lane 0 takes `first` (the column before the stripe's start).
template <LaneVector V>
V shift_in(V a, int first) {
  V shifted = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return __builtin_shufflevector(V{}, a, 0, (kLanesOf<V> + I)...);
  }
  (std::make_index_sequence<kLanesOf<V> - 1>{});
  shifted[0] = static_cast<Element<V>>(first);
  return shifted;
}

// What next() watches besides computing the row.
enum class Track {
  nothing,
  row_max,   // returns the row's largest H
  diagonal,  // returns whether some cell's diagonal term (H up-left plus the letter score) = target
};

// Direction byte (pass 3): bits 0-1 = source of H (0 start, 1 diagonal, 2 E, 3 F);
// bit 2 = E extends E (else opens from H); bit 3 = F extends F (else opens from H).
enum : std::uint8_t {
  kFromStart = 0,
  kFromDiagonal = 1,
  kFromE = 2,
  kFromF = 3,
  kEExtends = 4,
  kFExtends = 8
};

// Rows of the recurrence, query letter by query letter, over one subject laid out in stripes:
// column j (0-based) is lane j / segments, segment j % segments. The profile holds, for each query
// letter used, its score against every striped column (padding columns score -infinity, so they
// feed nothing and no real column depends on them: they come after every real one in row-major
// order).
// Here "e" is the vertical gap (consumes query) and "f" the horizontal one (consumes subject).
// E comes from the row above only, so it is final at once; H and F are finished by the lazy-F loop.
template <LaneVector V>
class StripedRows {
 public:
  using T = Element<V>;
  static constexpr std::size_t kWidth = kLanesOf<V>;
  // Far below every value the callers keep (>= their floor minus gap_open), with room to subtract
  // a gap cost in 16 bits (costs up to 8192).
  static constexpr int kMinusInfinity = sizeof(T) == 2 ? -(1 << 14) : kNegativeInfinity;

  // Direction bytes per row of `cols` columns: whole stripes, padding columns included.
  static std::size_t stride(std::size_t cols) { return kWidth * ((cols + kWidth - 1) / kWidth); }

  // Starts before row 1 with H = 0 and no vertical gap (start() and load() start elsewhere); the
  // query comes letter by letter to next().
  StripedRows(std::span<const std::uint8_t> subject, const Scoring& scoring)
      : n_(subject.size()),
        segments_((subject.size() + kWidth - 1) / kWidth),
        open_(scoring.gap_open),
        extend_(scoring.gap_extend),
        matrix_(scoring.matrix),
        striped_subject_(segments_ * kWidth, kPadding),
        row_of_letter_(kMatrixStride, -1),
        h_(segments_, V{}),
        h_before_(segments_),
        e_(segments_, splat<V>(kMinusInfinity)),
        e_before_(segments_) {
    scoring.validate();  // gap_open >= gap_extend >= 1: next()'s horizontal gap relies on it
    for (std::size_t j = 0; j < n_; ++j)
      striped_subject_[(j % segments_) * kWidth + j / segments_] = subject[j];
  }

  // The row before the next one: H = `h` everywhere, no vertical gap.
  void start(int h) {
    std::fill(h_.begin(), h_.end(), splat<V>(h));
    std::fill(e_.begin(), e_.end(), splat<V>(kMinusInfinity));
  }
  // The row before the next one, from (at least) n row-major H and vertical-gap values.
  void load(const std::vector<int>& h, const std::vector<int>& e) {
    for (std::size_t s = 0; s < segments_; ++s)
      for (std::size_t l = 0; l < kWidth; ++l) {
        const std::size_t j = l * segments_ + s;
        h_[s][l] = static_cast<T>(j < n_ ? h[j] : 0);
        e_[s][l] = static_cast<T>(j < n_ ? e[j] : kMinusInfinity);
      }
  }
  // The last row, row-major (a checkpoint for load()).
  void save(std::vector<int>& h, std::vector<int>& e) const {
    h.resize(n_);
    e.resize(n_);
    for (std::size_t j = 0; j < n_; ++j) {
      h[j] = h_[j % segments_][j / segments_];
      e[j] = e_[j % segments_][j / segments_];
    }
  }

  // The next row, for query letter `letter`: H = max(diagonal term, E, F, `floor`), with
  // `left_diagonal` H of the row before at column 0 (nothing enters from the left: F starts at
  // -infinity). Returns what kTrack asks for (0 for Track::nothing).
  template <Track kTrack = Track::nothing>
  int next(std::uint8_t letter, int left_diagonal, int floor, int target = 0) {
    std::swap(h_, h_before_);
    std::swap(e_, e_before_);
    profile_row_ = profile_row(letter);
    left_diagonal_ = left_diagonal;
    const V open = splat<V>(open_), extend = splat<V>(extend_), lower = splat<V>(floor);
    const V minus_infinity = splat<V>(kMinusInfinity), wanted = splat<V>(target);
    // Local copies: stores through V* may alias any member, which would reload them every segment.
    const std::size_t segments = segments_;
    const V* p = profile_row_;
    const V *h_before = h_before_.data(), *e_before = e_before_.data();
    V *h = h_.data(), *e = e_.data();
    V tracked = kTrack == Track::row_max ? minus_infinity : V{};
    V f = minus_infinity, diagonal = shift_in(h_before[segments - 1], left_diagonal);
    for (std::size_t s = 0; s < segments; ++s) {
      const V e_here = max(e_before[s] - extend, h_before[s] - open);
      e[s] = e_here;
      const V match = diagonal + p[s];
      if constexpr (kTrack == Track::diagonal) tracked |= match == wanted;
      const V not_f = max(max(match, e_here), lower), h_here = max(not_f, f);
      h[s] = h_here;
      if constexpr (kTrack == Track::row_max) tracked = max(tracked, h_here);
      // max(f - extend, h_here - open) without h_here on the chain from f to f: f - open never
      // wins (gap_open >= gap_extend), so two steps per segment instead of four.
      f = max(f - extend, not_f - open);
      diagonal = h_before[s];
    }
    // Lazy F: the horizontal gap carried across the stripes' boundaries, as long as it still
    // raises some H; kept above -infinity (no wrap-around in 16 bits; it then raises nothing).
    f = shift_in(f, kMinusInfinity);
    for (std::size_t s = 0;;) {
      if (!any_greater(f, h[s] - open)) break;
      h[s] = max(h[s], f);
      if constexpr (kTrack == Track::row_max) tracked = max(tracked, h[s]);
      f = max(f - extend, minus_infinity);
      if (++s == segments) {
        s = 0;
        f = shift_in(f, kMinusInfinity);
      }
    }
    if constexpr (kTrack == Track::row_max) return horizontal_max(tracked);
    if constexpr (kTrack == Track::diagonal) return any_set(tracked);
    return 0;
  }

  // H of the last row at column j (0-based).
  int row(std::size_t j) const { return h_[j % segments_][j / segments_]; }
  // The first column (0-based) of the last row whose H is at least `value`; n if none.
  std::size_t first_column_reaching(int value) const {
    const V wanted = splat<V>(value);
    return first_column([&](std::size_t s) { return h_[s] >= wanted; });
  }
  // The first column (0-based) of the last row whose diagonal term equals `target`; n if none.
  std::size_t first_column_with_diagonal(int target) const {
    const V wanted = splat<V>(target);
    return first_column([&](std::size_t s) {
      const V diagonal = s == 0 ? shift_in(h_before_[segments_ - 1], left_diagonal_) : h_before_[s - 1];
      return diagonal + profile_row_[s] == wanted;
    });
  }

  // Where column j (0-based) of a row is in its direction bytes.
  std::size_t index(std::size_t j) const { return (j % segments_) * kWidth + j / segments_; }
  // The stride(n) direction bytes of the last row (Smith-Waterman rows: floor 0, H = 0 left of
  // column 1), with the scalar recurrence's ties: diagonal if match > 0, then the horizontal gap if
  // strictly greater, then the vertical one if strictly greater; a gap extends when extending
  // scores at least as much as opening. The direction byte names the gaps as F and E of the public
  // convention. First each lane's horizontal gap at its last column, which gives the gap carried
  // into every lane; then the exact horizontal gap of every cell and its byte.
  void directions(std::uint8_t* direction) const {
    const V open = splat<V>(open_), extend = splat<V>(extend_);
    // Local copies: the byte stores may alias any member, which would reload them every segment.
    const std::size_t segments = segments_;
    const V *h_cur = h_.data(), *h_prev = h_before_.data(), *e_prev = e_before_.data(), *p = profile_row_;
    // Each lane's horizontal gap at its last column with nothing carried in from the lane before...
    V f = splat<V>(kMinusInfinity), h_left = shift_in(h_cur[segments - 1], 0);
    for (std::size_t s = 0; s < segments; ++s) {
      f = max(f - extend, h_left - open);
      h_left = h_cur[s];
    }
    // ... then with the gap carried from lane to lane (none into lane 0: nothing left of column 1).
    V last_f{};
    std::int64_t carried = kMinusInfinity;  // into the lane's first column
    for (std::size_t l = 0; l < kWidth; ++l) {
      const std::int64_t at_last = carried - static_cast<std::int64_t>(segments - 1) * extend_;
      last_f[l] =
          static_cast<T>(std::max<std::int64_t>(f[l], std::max<std::int64_t>(at_last, kMinusInfinity)));
      carried = std::max<std::int64_t>(last_f[l] - extend_, kMinusInfinity);
    }
    // Every cell: the horizontal gap from its left neighbour's exact one, then the source of H
    // (start if H = 0, else the first of diagonal, horizontal gap, vertical gap to equal H: the
    // scalar order of strict comparisons) and the extend bits.
    const V three = splat<V>(3), minus_two = splat<V>(-2);
    const V e_bit = splat<V>(kEExtends), f_bit = splat<V>(kFExtends);
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
      const auto bytes = __builtin_convertvector(d, typename VectorOf<std::uint8_t, kWidth>::type);
      std::memcpy(direction + s * kWidth, &bytes, kWidth);
      f_left = f_here;
      h_left = h;
      h_diagonal = h_up;
    }
  }

 private:
  // A letter outside the alphabet that marks padding columns.
  static constexpr std::uint8_t kPadding = kMatrixStride - 1;
  static_assert(kAlphabetSize < kPadding);

  // The letter's score against every striped column, made on its first use.
  const V* profile_row(std::uint8_t letter) {
    if (row_of_letter_[letter] < 0) {
      row_of_letter_[letter] = static_cast<int>(profile_.size() / segments_);
      std::array<T, kMatrixStride> scores;
      for (int c = 0; c < kMatrixStride; ++c)
        scores[c] = static_cast<T>(c == kPadding ? kMinusInfinity : matrix_.at(letter, c));
      for (std::size_t s = 0; s < segments_; ++s) {
        V v;
        for (std::size_t l = 0; l < kWidth; ++l) v[l] = scores[striped_subject_[s * kWidth + l]];
        profile_.push_back(v);
      }
    }
    return profile_.data() + static_cast<std::size_t>(row_of_letter_[letter]) * segments_;
  }

  // The first column (row-major) of the last row where mask(s) is set; n if none. Columns of a
  // lane precede those of the next, so it is the first segment set in the lowest lane set.
  template <class Mask>
  std::size_t first_column(Mask mask) const {
    V seen{};
    std::array<std::size_t, kWidth> first{};
    for (std::size_t s = 0; s < segments_ && !seen[0]; ++s) {
      const V fresh = mask(s) & ~seen;
      if (!any_set(fresh)) continue;
      for (std::size_t l = 0; l < kWidth; ++l)
        if (fresh[l]) first[l] = s;
      seen |= fresh;
    }
    for (std::size_t l = 0; l < kWidth; ++l)
      if (seen[l]) return std::min(l * segments_ + first[l], n_);
    return n_;
  }

  std::size_t n_, segments_;
  int open_, extend_;
  const ScoringMatrix& matrix_;
  std::vector<std::uint8_t> striped_subject_;  // the subject's letters in striped order
  std::vector<int> row_of_letter_;             // in profile_, in segments_
  std::vector<V> profile_, h_, h_before_, e_, e_before_;
  const V* profile_row_ = nullptr;  // the last row's letter
  int left_diagonal_ = 0;           // the last row's
};

}  // namespace molaccel::align::striped::MOLACCEL_ISA_NAMESPACE

// Inter-sequence Smith-Waterman (Gotoh) over vector lanes: W subjects at once, one per lane, the
// query running down each column. Built per ISA (scalar = SSE2 baseline, avx2, avx512) from this one
// source. 8- and 16-bit lanes wrap instead of saturating; a lane whose maximum reaches the
// saturation threshold is flagged and rescored with wider lanes by the caller (see kernels.hpp).
#include <algorithm>
#include <cstring>
#include <vector>

#include "align/cpu/inter_sequence.hpp"
#include "molaccel/align.hpp"

#ifndef MOLACCEL_ISA_NAMESPACE
#error "compile through molaccel_add_multiversion"
#endif

#define MOLACCEL_ALIGN_STR2(x) #x
#define MOLACCEL_ALIGN_STR(x) MOLACCEL_ALIGN_STR2(x)

namespace molaccel::align::cpu::MOLACCEL_ISA_NAMESPACE {
namespace {

#if defined(__AVX512BW__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX2__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

typedef std::int8_t VecI8 __attribute__((vector_size(kVectorBytes)));
typedef std::int8_t HalfVecI8 __attribute__((vector_size(kVectorBytes / 2)));
typedef std::int16_t VecI16 __attribute__((vector_size(kVectorBytes)));
typedef std::int32_t VecI32 __attribute__((vector_size(kVectorBytes)));

template <class V>
inline V vmax(V a, V b) {
  return a > b ? a : b;
}

template <class V, class Lane>
inline V splat(Lane x) {
  V v;
  for (std::size_t i = 0; i < sizeof(V) / sizeof(Lane); ++i) v[i] = x;
  return v;
}

// Columns per pass over the query: the E and H row arrays are loaded and stored once per
// kColumns cells, and the kColumns dependency chains overlap in the out-of-order core (8 ran 1.45x
// faster than 4 with AVX-512 on db5k).
constexpr int kColumns = 8;

// GCC's __builtin_shuffle permutes by a run-time index vector (vpermw, vpermi2w); clang has no
// such builtin, so a clang build fills the profile lane by lane (slower, same results).
#if defined(__GNUC__) && !defined(__clang__)
constexpr bool kVectorShuffle = true;
#else
constexpr bool kVectorShuffle = false;
#endif

// profile[a][lane] = score(query letter a, subject letter of `lane`): one permute per letter when
// a 32-entry table row fits one or two vectors of 16-bit lanes, else lane by lane.
template <class V, class Lane>
inline void column_profile(V* profile, const VecI16* table_low, const VecI16* table_high,
                           const Lane (*table)[kMatrixStride], const std::uint8_t* letters) {
  constexpr int W = sizeof(V) / sizeof(Lane);
#if defined(__GNUC__) && !defined(__clang__)
  constexpr int W16 = kVectorBytes / 2;  // lanes of a VecI16
  if constexpr (sizeof(Lane) == 1 && (W16 == 32 || W16 == 16)) {
    // 8-bit lanes: permute 16-bit table rows for each half of the lanes, then narrow.
    for (int half = 0; half < 2; ++half) {
      VecI16 index;
      for (int l = 0; l < W16; ++l) index[l] = letters[half * W16 + l];
      for (int a = 0; a < kAlphabetSize; ++a) {
        VecI16 p;
        if constexpr (W16 == 32)
          p = __builtin_shuffle(table_low[a], index);
        else
          p = __builtin_shuffle(table_low[a], table_high[a], index);
        const HalfVecI8 narrow = __builtin_convertvector(p, HalfVecI8);
        std::memcpy(reinterpret_cast<char*>(&profile[a]) + half * W16, &narrow, sizeof(narrow));
      }
    }
    return;
  }
  if constexpr (sizeof(Lane) == 2 && (W == 32 || W == 16)) {
    V index;
    for (int l = 0; l < W; ++l) index[l] = letters[l];
    for (int a = 0; a < kAlphabetSize; ++a) {
      if constexpr (W == 32)
        profile[a] = __builtin_shuffle(table_low[a], index);
      else
        profile[a] = __builtin_shuffle(table_low[a], table_high[a], index);
    }
    return;
  }
#endif
  (void)table_low;
  (void)table_high;
  for (int a = 0; a < kAlphabetSize; ++a) {
    V p;
    for (int l = 0; l < W; ++l) p[l] = table[a][letters[l]];
    profile[a] = p;
  }
}

template <class V, class Lane>
void score_group(const LaneGroup& g) {
  constexpr int W = sizeof(V) / sizeof(Lane);
  const std::size_t m = g.query_length;
  // table[a][b] = score(a, b) with the padding letter (31) scoring low (any score <= 0 keeps padded
  // cells from beating the real cells they derive from; -64 fits 8-bit lanes without wrapping).
  constexpr int kPadding = sizeof(Lane) == 1 ? -64 : -1024;
  alignas(64) Lane table[kMatrixStride][kMatrixStride];
  for (int a = 0; a < kMatrixStride; ++a)
    for (int b = 0; b < kMatrixStride; ++b)
      table[a][b] = static_cast<Lane>(
          b == kPaddingCode || a >= kAlphabetSize ? kPadding : g.matrix[a * kMatrixStride + b]);
  constexpr int W16 = kVectorBytes / 2;
  alignas(64) VecI16 table_low[kMatrixStride], table_high[kMatrixStride];
  if constexpr (kVectorShuffle && sizeof(Lane) <= 2 && (W16 == 32 || W16 == 16)) {
    for (int a = 0; a < kMatrixStride; ++a)
      for (int l = 0; l < W16; ++l) {
        table_low[a][l] = table[a][l];
        table_high[a][l] = table[a][(l + W16) % kMatrixStride];
      }
  }

  V* __restrict hc = static_cast<V*>(g.workspace);
  V* __restrict ec = hc + m;
  for (std::size_t i = 0; i < m; ++i) hc[i] = V{}, ec[i] = splat<V, Lane>(static_cast<Lane>(-g.gap_open));
  std::uint32_t max_length = 0;
  for (int l = 0; l < g.count; ++l) max_length = std::max(max_length, g.lengths[l]);

  const V open = splat<V, Lane>(static_cast<Lane>(g.gap_open));
  const V extend = splat<V, Lane>(static_cast<Lane>(g.gap_extend));
  const V zero{};
  V best{};
  alignas(64) V profile[kColumns][kMatrixStride];
  for (std::uint32_t j0 = 0; j0 < max_length; j0 += kColumns) {
    for (int k = 0; k < kColumns; ++k) {
      std::uint8_t letters[W];
      const std::uint32_t j = j0 + k;  // past every subject's end: padding (never raises a maximum)
      for (int l = 0; l < W; ++l)
        letters[l] = (l < g.count && j < g.lengths[l]) ? g.subjects[l][j] : kPaddingCode;
      column_profile<V, Lane>(profile[k], table_low, table_high, table, letters);
    }
    // Per column k: F and H of the row above; diagonal of column 0 = H(i-1, j0-1).
    V f[kColumns], h_up[kColumns];
    for (int k = 0; k < kColumns; ++k) f[k] = -open, h_up[k] = zero;
    V h_up_left = zero;
    const std::uint8_t* __restrict q = g.query;
    for (std::size_t i = 0; i < m; ++i) {
      V h_left = hc[i];
      V e = ec[i];
      V diagonal = h_up_left;
      h_up_left = h_left;
      const unsigned letter = q[i];
#pragma GCC unroll 8
      for (int k = 0; k < kColumns; ++k) {
        e = vmax(e - extend, h_left - open);
        f[k] = vmax(f[k] - extend, h_up[k] - open);
        const V h = vmax(vmax(diagonal + profile[k][letter], zero), vmax(e, f[k]));
        diagonal = h_up[k];
        h_up[k] = h;
        h_left = h;
        best = vmax(best, h);
      }
      hc[i] = h_left;
      ec[i] = e;
    }
  }
  for (int l = 0; l < g.count; ++l) {
    g.scores[l] = static_cast<int>(best[l]);
    if (g.saturated) g.saturated[l] = static_cast<int>(best[l]) >= g.saturation_threshold;
  }
}

}  // namespace

int lanes8() noexcept {
  return kVectorBytes;
}
int lanes16() noexcept {
  return kVectorBytes / 2;
}
int lanes32() noexcept {
  return kVectorBytes / 4;
}
const char* isa_name() noexcept {
  return MOLACCEL_ALIGN_STR(MOLACCEL_ISA);
}
void score_group8(const LaneGroup& group) {
  score_group<VecI8, std::int8_t>(group);
}
void score_group16(const LaneGroup& group) {
  score_group<VecI16, std::int16_t>(group);
}
void score_group32(const LaneGroup& group) {
  score_group<VecI32, std::int32_t>(group);
}

}  // namespace molaccel::align::cpu::MOLACCEL_ISA_NAMESPACE

// Bit-sliced counters, the GPU's way of counting 32 queries at once, as plain integer code for
// host and device (the CUDA kernels use it; CPU tests check it on its own). Plane b holds bit b of
// 32 counters; counter q belongs to query q of a group.
#pragma once

#include <cstdint>

#include "lingo/similarity_math.hpp"

// Unroll in the device pass only (the host compiler does not know the pragma).
#if defined(__CUDA_ARCH__)
#define MOLACCEL_LINGO_UNROLL _Pragma("unroll")
#else
#define MOLACCEL_LINGO_UNROLL
#endif

namespace molaccel::lingo::detail {

// Adds `carry` (one bit per counter) at plane From: a ripple that stops once no carry is left.
template <int From, int Planes>
MOLACCEL_LINGO_HD void bitslice_ripple(std::uint32_t (&planes)[Planes], std::uint32_t carry) {
  MOLACCEL_LINGO_UNROLL
  for (int p = From; p < Planes; ++p) {
    if (!carry) break;
    const std::uint32_t next = planes[p] & carry;
    planes[p] ^= carry;
    carry = next;
  }
}

// Adds one to every counter whose bit is set in `mask` (a ripple-carry add across the planes).
template <int Planes>
MOLACCEL_LINGO_HD void bitslice_add(std::uint32_t (&planes)[Planes], std::uint32_t mask) {
  bitslice_ripple<0>(planes, mask);
}

// Full adder over 32 lanes (a carry-save step): a + b + c = sum + 2 carry in every lane.
MOLACCEL_LINGO_HD void bitslice_csa(std::uint32_t& sum, std::uint32_t& carry, std::uint32_t a,
                                    std::uint32_t b, std::uint32_t c) {
  const std::uint32_t u = a ^ b;
  sum = u ^ c;
  carry = (a & b) | (u & c);
}

// Adds four masks at once: carry-save adders fold them into planes 0 and 1 (planes[0] + m0..m3 =
// s2 + 2 (c1 + c2), then planes[1] + c1 + c2 = s3 + 2 c3) and only c3 ripples on from plane 2:
// ~6 logic ops and one short ripple where four bitslice_add calls take four divergent ripples.
// Same counters as four bitslice_add calls (integer logic, exact).
template <int Planes>
MOLACCEL_LINGO_HD void bitslice_add4(std::uint32_t (&planes)[Planes], std::uint32_t m0, std::uint32_t m1,
                                     std::uint32_t m2, std::uint32_t m3) {
  static_assert(Planes >= 3, "at least three planes");
  std::uint32_t s1, c1, s2, c2, s3, c3;
  bitslice_csa(s1, c1, planes[0], m0, m1);
  bitslice_csa(s2, c2, s1, m2, m3);
  bitslice_csa(s3, c3, planes[1], c1, c2);
  planes[0] = s2;
  planes[1] = s3;
  bitslice_ripple<2>(planes, c3);
}

// Folds eight masks into planes 0, 1 and 2 (the Harley-Seal order) by seven carry-save adders:
// planes[0] + m0..m3 = s + 2 (a + b), planes[1] + a + b = t + 2 f, the same for m4..m7 with f',
// then planes[2] + f + f' = u + 2 e. Returns e, the carry into plane 3 (not yet added).
template <int Planes>
MOLACCEL_LINGO_HD std::uint32_t bitslice_fold8(std::uint32_t (&planes)[Planes], const std::uint32_t (&m)[8]) {
  static_assert(Planes >= 4, "at least four planes");
  std::uint32_t s, a, b, t, f0, f1, u, e;
  bitslice_csa(s, a, planes[0], m[0], m[1]);
  bitslice_csa(s, b, s, m[2], m[3]);
  bitslice_csa(t, f0, planes[1], a, b);
  bitslice_csa(s, a, s, m[4], m[5]);
  bitslice_csa(s, b, s, m[6], m[7]);
  bitslice_csa(t, f1, t, a, b);
  bitslice_csa(u, e, planes[2], f0, f1);
  planes[0] = s;
  planes[1] = t;
  planes[2] = u;
  return e;
}

// Adds eight masks at once: bitslice_fold8, then only its carry ripples on, from plane 3: one
// ripple per eight masks where two bitslice_add4 calls take two, each from plane 2. Same counters
// as eight bitslice_add calls (integer logic, exact).
template <int Planes>
MOLACCEL_LINGO_HD void bitslice_add8(std::uint32_t (&planes)[Planes], const std::uint32_t (&m)[8]) {
  bitslice_ripple<3>(planes, bitslice_fold8(planes, m));
}

// Counter q.
template <int Planes>
MOLACCEL_LINGO_HD std::uint32_t bitslice_count(const std::uint32_t (&planes)[Planes], std::uint32_t q) {
  std::uint32_t count = 0;
  MOLACCEL_LINGO_UNROLL
  for (int b = 0; b < Planes; ++b) count |= ((planes[b] >> q) & 1u) << b;
  return count;
}

// All 32 counters at once as bytes, valid when every counter is below 256: byte j of out[r] is
// counter 8j + r. An 8x8 bit-matrix transpose inside each byte column of the 8 low planes (bit
// 8j + r of plane b is bit b of counter 8j + r), in three rounds of delta swaps (4-, 2-, then 1-bit
// blocks): 12 swaps of ~5 integer ops, ~2 ops per counter.
MOLACCEL_LINGO_HD void bitslice_swap(std::uint32_t& a, std::uint32_t& b, int shift, std::uint32_t mask) {
  const std::uint32_t t = ((a >> shift) ^ b) & mask;
  b ^= t;
  a ^= t << shift;
}

template <int Planes>
MOLACCEL_LINGO_HD void bitslice_transpose8(const std::uint32_t (&planes)[Planes], std::uint32_t (&out)[8]) {
  MOLACCEL_LINGO_UNROLL
  for (int b = 0; b < 8; ++b) out[b] = b < Planes ? planes[b] : 0u;
  MOLACCEL_LINGO_UNROLL
  for (int a = 0; a < 4; ++a) bitslice_swap(out[a], out[a + 4], 4, 0x0f0f0f0fu);
  bitslice_swap(out[0], out[2], 2, 0x33333333u);
  bitslice_swap(out[1], out[3], 2, 0x33333333u);
  bitslice_swap(out[4], out[6], 2, 0x33333333u);
  bitslice_swap(out[5], out[7], 2, 0x33333333u);
  MOLACCEL_LINGO_UNROLL
  for (int a = 0; a < 8; a += 2) bitslice_swap(out[a], out[a + 1], 1, 0x55555555u);
}

}  // namespace molaccel::lingo::detail

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

// Adds one to every counter whose bit is set in `mask` (a ripple-carry add across the planes).
template <int Planes>
MOLACCEL_LINGO_HD void bitslice_add(std::uint32_t (&planes)[Planes], std::uint32_t mask) {
  std::uint32_t carry = mask;
  MOLACCEL_LINGO_UNROLL
  for (int b = 0; b < Planes; ++b) {
    if (!carry) break;
    const std::uint32_t next = planes[b] & carry;
    planes[b] ^= carry;
    carry = next;
  }
}

// Counter q.
template <int Planes>
MOLACCEL_LINGO_HD std::uint32_t bitslice_count(const std::uint32_t (&planes)[Planes], std::uint32_t q) {
  std::uint32_t count = 0;
  MOLACCEL_LINGO_UNROLL
  for (int b = 0; b < Planes; ++b) count |= ((planes[b] >> q) & 1u) << b;
  return count;
}

// Bits 0..3 of x, one per byte (bit i -> bit 0 of byte i): no two products overlap, so no carries.
MOLACCEL_LINGO_HD std::uint32_t spread_nibble(std::uint32_t x) {
  return (x * 0x00204081u) & 0x01010101u;
}

// Counters q..q+3 as the four bytes of the result (q a multiple of 4); valid when every counter is
// below 256. Four counters for the price of one.
template <int Planes>
MOLACCEL_LINGO_HD std::uint32_t bitslice_bytes4(const std::uint32_t (&planes)[Planes], std::uint32_t q) {
  std::uint32_t packed = 0;
  MOLACCEL_LINGO_UNROLL
  for (int b = 0; b < 8 && b < Planes; ++b) packed += spread_nibble((planes[b] >> q) & 0xfu) << b;
  return packed;
}

}  // namespace molaccel::lingo::detail

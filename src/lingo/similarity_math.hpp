// The final similarity expressions, from exact integer counts: one definition for the CPU and CUDA
// backends (host and device), so their fp32 results are bit-identical. The reference backend writes
// the same IEEE expressions on its own (it is the deliberate twin, the oracle).
//
// Bit-identity rests on: integer counts (exact), one IEEE-754 correctly rounded division in fp32
// (or fp64 for vidal), no fast-math and no contraction anywhere in these expressions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MOLACCEL_LINGO_HD __host__ __device__ __forceinline__
#else
#define MOLACCEL_LINGO_HD inline
#endif

namespace molaccel::lingo::detail {

// shared / (a + b - shared); 0 when both are empty. Counts stay below 2^24 (kMaxSmilesLength),
// so the conversions to float are exact and only the division rounds. An empty union implies
// shared == 0, so dividing by max(union, 1) gives the same +0.0f without a branch, which lets the
// CPU loop vectorise (a guarded division may not be executed speculatively).
MOLACCEL_LINGO_HD float ratio_similarity(std::uint32_t shared, std::uint32_t size_a, std::uint32_t size_b) {
  const std::uint32_t union_size = size_a + size_b - shared;
  const std::uint32_t divisor = union_size == 0 ? 1u : union_size;
  return static_cast<float>(shared) / static_cast<float>(divisor);
}

// ratio_similarity without a division, for unions below kReciprocals: `reciprocal` = 1.0f / union
// (correctly rounded, from a table), q0 = RN(shared * reciprocal) is within 2 ulp, and one exact
// correction step (residual shared - q0 * union by FMA, then q0 + residual * reciprocal) gives the
// correctly rounded quotient, i.e. the same bits as ratio_similarity. Checked for every
// shared <= union < kReciprocals by test_lingo_pieces (FMA and the product rounded separately on
// both sides: __fmul_rn / __fmaf_rn on the device, std::fma on the host).
constexpr std::uint32_t kReciprocals = 1024;
MOLACCEL_LINGO_HD float ratio_from_reciprocal(std::uint32_t shared, std::uint32_t union_size,
                                              float reciprocal) {
  const float s = static_cast<float>(shared), u = static_cast<float>(union_size);
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(s, reciprocal);
  const float residual = __fmaf_rn(-q0, u, s);
  return __fmaf_rn(residual, reciprocal, q0);
#else
  volatile float product = s * reciprocal;  // rounded on its own: never contracted into the FMA
  const float q0 = product;
  const float residual = std::fma(-q0, u, s);
  return std::fma(residual, reciprocal, q0);
#endif
}

// One distinct Lingo present in both molecules with counts a and b contributes
// 1 - |a-b|/(a+b) = 2 min(a,b)/(a+b) to the vidal sum. In 32-bit fixed point (rounded down), the
// sum is an exact integer, independent of summation order: error < 2^-32 per term.
MOLACCEL_LINGO_HD std::uint64_t vidal_term(std::uint32_t a, std::uint32_t b) {
  const std::uint64_t twice_min = 2ull * (a < b ? a : b);
  return (twice_min << 32) / (static_cast<std::uint64_t>(a) + b);
}

// Mean of the terms over the union of distinct Lingos (terms of unshared Lingos are 0).
// sum < 2^52 (at most 2^20 distinct Lingos, each term <= 2^32): exact in a double.
MOLACCEL_LINGO_HD float vidal_similarity(std::uint64_t fixed_sum, std::uint32_t shared_distinct,
                                         std::uint32_t distinct_a, std::uint32_t distinct_b) {
  const std::uint32_t union_size = distinct_a + distinct_b - shared_distinct;
  if (union_size == 0) return 0.0f;
  const double mean = static_cast<double>(fixed_sum) / 4294967296.0 / static_cast<double>(union_size);
  return static_cast<float>(mean);
}

// fp32 -> IEEE binary16, round to nearest, ties to even (subnormals, overflow to inf, NaN kept
// quiet). Integer operations only, so host and device give the same bits.
MOLACCEL_LINGO_HD std::uint16_t float_to_half_bits(float value) {
#if defined(__CUDA_ARCH__)
  std::uint32_t x = __float_as_uint(value);
#else
  std::uint32_t x;
  static_assert(sizeof(x) == sizeof(value), "float is 32 bits");
  std::memcpy(&x, &value, sizeof(x));
#endif
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (x < 0x38800000u) {                                                    // half subnormal (or 0)
    if (x <= 0x33000000u) return sign;                                      // <= 2^-25: ties to 0
    const std::uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - (x >> 23);  // 14..24
    std::uint32_t r = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t h = (x - 0x38000000u) >> 13;
  const std::uint32_t rest = x & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

// rint(255 s) for s in [0, 1]: one correctly rounded product, then round half to even (no
// contraction possible: the rounding is not an addition).
MOLACCEL_LINGO_HD std::uint8_t similarity_to_u8(float s) {
  const float scaled = s * 255.0f;
  const float clamped = scaled < 0.0f ? 0.0f : (scaled > 255.0f ? 255.0f : scaled);
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint8_t>(__float2uint_rn(clamped));
#else
  return static_cast<std::uint8_t>(__builtin_rintf(clamped));
#endif
}

}  // namespace molaccel::lingo::detail

// The final similarity expressions, from exact integer counts: one definition for the CPU and CUDA
// backends (host and device), so their fp32 results are bit-identical. The reference backend writes
// the same IEEE expressions on its own (it is the deliberate twin, the oracle).
//
// Bit-identity rests on: integer counts (exact), one IEEE-754 correctly rounded division in fp32
// (or fp64 for vidal), no fast-math and no contraction anywhere in these expressions.
#pragma once

#include <cstdint>

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

}  // namespace molaccel::lingo::detail

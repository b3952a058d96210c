// Block and warp pieces of the hashed kernel: the shared-memory hash table of a query group, and
// the output stage (bit-sliced counts to fp32 similarities). Device code, included by
// similarity_kernels.cu only (internal linkage, as the kernel that inlines them).
#pragma once

#include "lingo/bitslice.hpp"
#include "lingo/cuda/kernels.hpp"
#include "lingo/similarity_math.hpp"

namespace molaccel::lingo::cuda_backend {
namespace {

// ---- the query group's hash table ----------------------------------------------------------------
// Table entry: x = feature (kEmptySlot when free), y = mask of the group's queries holding it.
__device__ __forceinline__ std::uint32_t slot_of(std::uint32_t feature, int log2_slots) {
  return (feature * 2654435761u) >> (32 - log2_slots);
}

__device__ void table_insert(uint2* table, int log2_slots, std::uint32_t feature, std::uint32_t bit) {
  const std::uint32_t wrap = (1u << log2_slots) - 1;
  for (std::uint32_t s = slot_of(feature, log2_slots);; s = (s + 1) & wrap) {
    const std::uint32_t prev = atomicCAS(&table[s].x, kEmptySlot, feature);
    if (prev == kEmptySlot || prev == feature) {
      atomicOr(&table[s].y, bit);
      return;
    }
  }
}

__device__ __forceinline__ std::uint32_t table_lookup(const uint2* table, int log2_slots,
                                                      std::uint32_t feature) {
  const std::uint32_t wrap = (1u << log2_slots) - 1;
  for (std::uint32_t s = slot_of(feature, log2_slots);; s = (s + 1) & wrap) {
    const uint2 e = table[s];
    if (e.x == feature) return e.y;
    if (e.x == kEmptySlot) return 0;
  }
}

template <class Clear, class Insert>
__device__ __forceinline__ void fill_group_table(const QueryGroup& group, const std::uint64_t* q_offsets,
                                                 const std::uint32_t* q_features,
                                                 const std::uint32_t* q_sizes, std::uint32_t slots,
                                                 std::uint32_t* sizes, Clear clear, Insert insert) {
  for (std::uint32_t s = threadIdx.x; s < slots; s += blockDim.x) clear(s);
  if (threadIdx.x < group.count) sizes[threadIdx.x] = q_sizes[group.first_row + threadIdx.x];
  __syncthreads();
  const std::uint64_t begin = q_offsets[group.first_row];
  const std::uint64_t end = q_offsets[group.first_row + group.count];
  std::uint32_t q = 0;
  for (std::uint64_t f = begin + threadIdx.x; f < end; f += blockDim.x) {
    while (q_offsets[group.first_row + q + 1] <= f) ++q;  // which query owns feature f
    insert(q_features[f], q);
  }
  __syncthreads();
}

// ---- the output stage ----------------------------------------------------------------------------
// The block's reciprocal table for the division-free exact ratio: recip[u] = 1.0f / u (IEEE),
// recip[0] = 0 (an empty union: shared = 0, and the formula then gives +0, as ratio_similarity).
__device__ __forceinline__ void fill_reciprocals(float* recip) {
  for (std::uint32_t u = threadIdx.x; u < detail::kReciprocals; u += blockDim.x)
    recip[u] = u ? 1.0f / static_cast<float>(u) : 0.0f;
}

// shared / (a + b - shared), bit-identical to detail::ratio_similarity: unions below kReciprocals
// take the table and one exact correction step (no division; checked exhaustively on the CPU by
// test_lingo_pieces), larger ones the IEEE division.
__device__ __forceinline__ float pair_similarity(std::uint32_t shared, std::uint32_t size_a,
                                                 std::uint32_t size_b, const float* recip) {
  const std::uint32_t u = size_a + size_b - shared;
  if (u < detail::kReciprocals) return detail::ratio_from_reciprocal(shared, u, recip[u]);
  return detail::ratio_similarity(shared, size_a, size_b);
}

// The 32 counts as bytes (byte j of t[r] = count of query 8j + r, from bitslice_transpose8) out as
// fp32 similarities, o[q * ld] for query q < count.
__device__ __forceinline__ void store_count_bytes(const std::uint32_t (&t)[8], std::uint32_t count,
                                                  const std::uint32_t* sizes, std::uint32_t db_size,
                                                  const float* recip, float* o, std::size_t ld) {
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    if (8 * j >= count) break;
#pragma unroll
    for (std::uint32_t r = 0; r < 8; ++r) {
      const std::uint32_t q = 8 * j + r;
      if (q < count) o[q * ld] = pair_similarity((t[r] >> (8 * j)) & 0xffu, sizes[q], db_size, recip);
    }
  }
}

// store_count_bytes for a full group (32 queries) whose every union is known to be below
// kReciprocals (the block checked its largest query size; the column has < 256 features): no
// per-pair bounds or range checks, the same arithmetic (ratio_from_reciprocal), the same bits.
__device__ __forceinline__ void store_count_bytes_full(const std::uint32_t (&t)[8],
                                                       const std::uint32_t* sizes, std::uint32_t db_size,
                                                       const float* recip, float* o, std::size_t ld) {
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
#pragma unroll
    for (std::uint32_t r = 0; r < 8; ++r) {
      const std::uint32_t q = 8 * j + r;
      const std::uint32_t shared = (t[r] >> (8 * j)) & 0xffu;
      const std::uint32_t u = sizes[q] + db_size - shared;
      o[q * ld] = detail::ratio_from_reciprocal(shared, u, recip[u]);
    }
  }
}

// A molecule of >= 256 features: its counts may not fit a byte, so they leave the planes one at a
// time and it stores its own column.
template <int Planes>
__device__ __forceinline__ void store_counts_one_by_one(const std::uint32_t (&planes)[Planes],
                                                        std::uint32_t count, const std::uint32_t* sizes,
                                                        std::uint32_t db_size, const float* recip, float* o,
                                                        std::size_t ld) {
  for (std::uint32_t q = 0; q < count; ++q)
    o[q * ld] = pair_similarity(detail::bitslice_count(planes, q), sizes[q], db_size, recip);
}

}  // namespace
}  // namespace molaccel::lingo::cuda_backend

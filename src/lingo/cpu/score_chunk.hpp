// The CPU hot loop, compiled once per instruction set (scalar, avx2, avx512) from score_chunk.cpp.
// A database chunk (<= 65,536 molecules) is an inverted index: for every Lingo id present in the
// chunk, the chunk-local molecules holding it and their counts. Scoring one query walks its own ids
// (a few dozen), accumulates the exact shared counts of every chunk molecule in a small array that
// stays in L1/L2, then turns the counts into similarities in a vectorised loop.
#pragma once

#include <cstdint>
#include <string>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::cpu {

struct ChunkView {
  std::uint32_t size = 0;                  // molecules in the chunk
  std::uint32_t key_count = 0;             // distinct Lingo ids present
  const std::uint32_t* keys = nullptr;     // ascending ids, key_count of them
  const std::uint32_t* offsets = nullptr;  // key k: postings [offsets[k], offsets[k+1])
  const std::uint16_t* members = nullptr;  // chunk-local molecule of each posting
  const std::uint32_t* member_counts = nullptr;
  const std::uint32_t* magnitudes = nullptr;  // per chunk-local molecule
  const std::uint32_t* distinct = nullptr;
};

struct QueryView {
  const std::uint32_t* ids = nullptr;  // ascending
  const std::uint32_t* counts = nullptr;
  std::uint32_t length = 0;
  std::uint32_t magnitude = 0;
  std::uint32_t distinct = 0;
};

// Scratch sized for the chunk: shared[size], fixed_sum[size] (vidal only).
using ScoreChunkFn = void (*)(Metric metric, const QueryView& query, const ChunkView& chunk, float* out,
                              std::uint32_t* shared, std::uint64_t* fixed_sum);

#define MOLACCEL_LINGO_DECLARE_SCORE_CHUNK(isa)                                               \
  namespace isa {                                                                             \
  void score_chunk(Metric metric, const QueryView& query, const ChunkView& chunk, float* out, \
                   std::uint32_t* shared, std::uint64_t* fixed_sum);                          \
  }
MOLACCEL_LINGO_DECLARE_SCORE_CHUNK(isa_scalar)
MOLACCEL_LINGO_DECLARE_SCORE_CHUNK(isa_avx2)
MOLACCEL_LINGO_DECLARE_SCORE_CHUNK(isa_avx512)
#undef MOLACCEL_LINGO_DECLARE_SCORE_CHUNK

// Picks the best variant for this CPU (molaccel::cpu_info().simd); `variant` gets its name.
ScoreChunkFn select_score_chunk(std::string* variant = nullptr);

}  // namespace molaccel::lingo::cpu

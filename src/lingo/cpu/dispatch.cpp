#include "lingo/cpu/score_chunk.hpp"

namespace molaccel::lingo::cpu {

ScoreChunkFn select_score_chunk(std::string* variant) {
  const SimdLevel level = cpu_info().simd;
  if (level == SimdLevel::avx512) {
    if (variant) *variant = "avx512";
    return &isa_avx512::score_chunk;
  }
  if (level == SimdLevel::avx2) {
    if (variant) *variant = "avx2";
    return &isa_avx2::score_chunk;
  }
  if (variant) *variant = "scalar";
  return &isa_scalar::score_chunk;
}

}  // namespace molaccel::lingo::cpu

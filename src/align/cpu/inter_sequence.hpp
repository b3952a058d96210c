// Inter-sequence SIMD kernel (one database subject per vector lane, SWIPE-style), compiled once per
// instruction set by molaccel_add_multiversion; cpu/score_cpu.cpp picks the variant at run time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace molaccel::align::cpu {

struct LaneGroup {
  const std::uint8_t* query = nullptr;
  std::size_t query_length = 0;
  const std::uint8_t* const* subjects = nullptr;  // `count` pointers
  const std::uint32_t* lengths = nullptr;
  int count = 0;                // <= lanes of the variant
  const int* matrix = nullptr;  // 32x32, matrix[query * 32 + subject]
  int gap_open = 11, gap_extend = 1;
  int saturation_threshold = 32767;   // 8- and 16-bit only
  int* scores = nullptr;              // `count` outputs
  std::uint8_t* saturated = nullptr;  // `count` flags (8- and 16-bit only)
  // Caller's scratch: workspace_bytes(query_length) bytes, 64-byte aligned (H and E columns).
  void* workspace = nullptr;
};

inline std::size_t workspace_bytes(std::size_t query_length) {
  return 2 * query_length * 64;
}

#define MOLACCEL_ALIGN_DECLARE_ISA(ns)        \
  namespace ns {                              \
  int lanes8() noexcept;                      \
  int lanes16() noexcept;                     \
  int lanes32() noexcept;                     \
  const char* isa_name() noexcept;            \
  void score_group8(const LaneGroup& group);  \
  void score_group16(const LaneGroup& group); \
  void score_group32(const LaneGroup& group); \
  }
MOLACCEL_ALIGN_DECLARE_ISA(isa_scalar)
MOLACCEL_ALIGN_DECLARE_ISA(isa_avx2)
MOLACCEL_ALIGN_DECLARE_ISA(isa_avx512)
#undef MOLACCEL_ALIGN_DECLARE_ISA

}  // namespace molaccel::align::cpu

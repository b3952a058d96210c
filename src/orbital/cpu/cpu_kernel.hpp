// CPU fast path: one source (orbital_cpu_kernel.cpp) compiled per instruction set; the
// dispatcher (orbital_cpu.cpp) picks the variant once from molaccel::cpu_info().simd.
#pragma once

#include <cstddef>
#include <string>

#include "orbital/packed_basis.hpp"

namespace molaccel::orbital::cpu {

struct KernelArgs {
  const detail::PackedBasis* basis = nullptr;
  const float* coefficients = nullptr;  // orbitals x basis->components
  std::size_t orbitals = 0;
  const float* weights = nullptr;  // density weights per orbital; nullptr = write orbitals
  const GridSpec* grid = nullptr;
  float* out = nullptr;  // orbitals: out[o * points + p]; density: out[p]
};

// The kernel works on tiles of up to kTileRows rows of a plane (4 x 4 points with AVX-512, 2 x 4
// with AVX2, 2 x 2 otherwise), aligned to the grid (rows j0 = j - j % tile rows): a call whose
// range cuts a tile computes the whole tile and stores only its own rows, so callers should hand
// out strips of kTileRows rows of one plane (aligned, they hold whole tiles of every variant).
inline constexpr std::size_t kTileRows = 4;

// Evaluates grid rows [row_begin, row_end) (row = i * counts[1] + j) on the calling thread.
using RowKernel = void (*)(const KernelArgs&, std::size_t row_begin, std::size_t row_end);

struct Variant {
  RowKernel kernel;
  std::string name;  // "cpu/avx2"
};
const Variant& select_variant();

}  // namespace molaccel::orbital::cpu

#define MOLACCEL_ORBITAL_DECLARE_ISA(ns)                                                  \
  namespace molaccel::orbital::cpu::ns {                                                  \
  void evaluate_rows(const KernelArgs& args, std::size_t row_begin, std::size_t row_end); \
  /* the kernel's exp() for x <= 0 on n values (tests: accuracy and underflow) */         \
  void exp_nonpositive(const float* x, float* out, std::size_t n);                        \
  }
MOLACCEL_ORBITAL_DECLARE_ISA(isa_scalar)
MOLACCEL_ORBITAL_DECLARE_ISA(isa_avx2)
MOLACCEL_ORBITAL_DECLARE_ISA(isa_avx512)
#undef MOLACCEL_ORBITAL_DECLARE_ISA

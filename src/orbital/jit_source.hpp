// Generator of the orbital JIT kernel (CUDA C++ source as text): the basis set's exponents,
// contraction coefficients, screening radii and shell structure become literals, one device
// function per distinct atom basis ("element type"), loops fully unrolled. CUDA-free, so the
// source can be generated and compiled by NVRTC without a GPU (tests do this in CI).
#pragma once

#include <string>
#include <vector>

#include "orbital/packed_basis.hpp"

namespace molaccel::orbital::detail {

struct JitSource {
  std::string source;
  std::string kernel_name = "molaccel_orbital_jit";
  std::vector<int> atom_type;  // element type index per atom
  int type_count = 0;
  int points_per_thread = 1;  // consecutive grid points along the fastest axis per thread
};

JitSource generate_jit_source(const PackedBasis& basis);

}  // namespace molaccel::orbital::detail

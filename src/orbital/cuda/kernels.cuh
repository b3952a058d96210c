// Device-side types of the orbital CUDA kernels, shared by the kernels (kernels.cu) and the host
// code that launches them (dispatch.cu, device_state.cu), and the kernels' launchers.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "orbital/cuda/orbital_cuda.hpp"

namespace molaccel::orbital::cuda_backend {

// Same layout as the struct in the generated JIT source.
struct OrbitalGridArgs {
  double origin[3];
  double axes[3][3];
  int ny, nz, plane_begin, components;
  int planes;  // planes of this launch (JIT 3-D bricks)
};

inline OrbitalGridArgs grid_args(const GridSpec& grid, std::size_t plane_begin, int components) {
  OrbitalGridArgs g{};
  for (int d = 0; d < 3; ++d) {
    g.origin[d] = grid.origin[d];
    for (int e = 0; e < 3; ++e) g.axes[d][e] = grid.axes[d][e];
  }
  g.ny = static_cast<int>(grid.counts[1]);
  g.nz = static_cast<int>(grid.counts[2]);
  g.plane_begin = static_cast<int>(plane_begin);
  g.components = components;
  return g;
}

// Packed basis in device memory; the generic kernels copy it into shared memory per block.
struct BasisView {
  const double* atom_xyz;
  const int* atom_first_shell;
  const int4* shells;  // l, first_primitive, primitive_count, first_component
  const float* shell_cut;
  const float4* primitives;  // -alpha*log2(e), coefficient, cutoff_r2, unused
  int atoms, shell_count, primitive_count, components;
};

__host__ __device__ inline std::size_t align16(std::size_t n) {
  return (n + 15) / 16 * 16;
}

__host__ __device__ inline std::size_t shared_basis_bytes(const BasisView& b) {
  return align16(sizeof(double) * 3 * b.atoms) + align16(sizeof(int) * (b.atoms + 1)) +
         align16(sizeof(int4) * b.shell_count) + align16(sizeof(float) * b.shell_count) +
         align16(sizeof(float4) * b.primitive_count);
}

constexpr int kPointsPerBlock = 128;

// Orbitals per thread of the contraction: 4 (tiles of 64) for few orbitals, 12 (tiles of 192,
// e.g. C60's 180 occupied orbitals in one pass over the basis matrix) for many.
inline int contraction_width(std::size_t orbitals) {
  return orbitals <= 64 ? 4 : 12;
}
// Rows of the transposed coefficient matrix are padded to a multiple of this.
constexpr int kComponentPad = 8;

constexpr int kBrickPoints = 128, kSparseK = 32, kSparseThreads = 256;

struct BrickShape {
  int bx, by, bz;     // brick extent in planes, rows, columns (product kBrickPoints)
  int nbx, nby, nbz;  // bricks along each axis
};

inline BrickShape brick_shape(std::size_t planes, std::size_t ny, std::size_t nz) {
  BrickShape b{};
  if (planes >= 4)
    b = {4, 4, 8, 0, 0, 0};
  else if (planes >= 2)
    b = {2, 8, 8, 0, 0, 0};
  else
    b = {1, 8, 16, 0, 0, 0};
  b.nbx = static_cast<int>((planes + b.bx - 1) / b.bx);
  b.nby = static_cast<int>((ny + b.by - 1) / b.by);
  b.nbz = static_cast<int>((nz + b.bz - 1) / b.bz);
  return b;
}

__host__ __device__ inline int cartesian_components(int l) {
  return (l + 1) * (l + 2) / 2;
}

// Dynamic shared memory of the sparse kernel (ints): active shells, their component counts and
// offsets, chunk starts, component indices of the active shells.
inline std::size_t sparse_dynamic_bytes(const BasisView& b) {
  return sizeof(int) *
         (4 * static_cast<std::size_t>(b.shell_count) + 3 + static_cast<std::size_t>(b.components));
}

// Throws Error when a kernel needs more shared memory per block than `device` has.
void check_shared_fits(std::size_t bytes, int device);

// Dynamic shared memory of the generic kernel: the basis and one orbital's coefficients.
inline std::size_t generic_shared_bytes(const BasisView& b) {
  return shared_basis_bytes(b) + sizeof(float) * static_cast<std::size_t>(b.components);
}

// Generic kernel for one orbital (coefficients: its Cartesian coefficients), grid blocks of
// kPointsPerBlock columns x rows x planes.
void launch_generic_kernel(const BasisView& basis, const float* coefficients, const OrbitalGridArgs& g,
                           dim3 blocks, cudaStream_t stream, int device, float* out);

// Sparse basis-matrix kernel (contraction width R = 4 or 12, contraction_width) over `planes`
// planes from g.plane_begin: ct is components_padded x orbitals_padded, weights (density) or
// nullptr (orbital values: out[o * out_pitch + p]).
void launch_sparse_kernel(int width, const BasisView& basis, const int* shell_atom, const OrbitalGridArgs& g,
                          int planes, const BrickShape& shape, const float* ct, int orbitals_padded,
                          int orbitals, const float* weights, float* out, std::size_t out_pitch,
                          cudaStream_t stream, int device);

}  // namespace molaccel::orbital::cuda_backend

// Generator of the orbital JIT kernel (CUDA C++ source as text): the basis set's exponents,
// contraction coefficients, screening radii and shell structure become literals, one device
// function per distinct atom basis ("element type"), loops fully unrolled. CUDA-free, so the
// source can be generated and compiled by NVRTC without a GPU (tests do this in CI).
#pragma once

#include <string>
#include <vector>

#include "orbital/packed_basis.hpp"

namespace molaccel::orbital::detail {

// Thread layout of the culled JIT kernel (the default): a block of 128 threads covers a brick of
// bx planes x by rows x bz columns, each thread points_per_thread points (planes li, li + bx/ppt,
// ...). Bricks are aligned to the grid (plane index multiple of bx), not to the launch, so a
// point's value does not depend on how the grid is cut into tiles.
struct CullLayout {
  int bx = 2, by = 8, bz = 8;
  int points_per_thread = 1;
  std::string name() const;  // "2x8x8" or "4x8x8/2"
};
// "BXxBYxBZ" or "BXxBYxBZ/P"; throws Error for a shape the generator does not support (128
// threads: (bx / P) * by * bz == 128, bz a multiple of 4 (8 when bx / P == 1), by of 4).
CullLayout parse_cull_layout(const std::string& text);
// Atoms whose every point of the brick is beyond their largest screening radius (brick bounding
// sphere, 1e-3 bohr margin) are left out; the distance and the culling rule are those of the
// sparse density path.

struct JitSource {
  std::string source;
  std::string kernel_name = "molaccel_orbital_jit";
  std::vector<int> atom_type;  // element type index per atom
  int type_count = 0;
  int points_per_thread = 1;  // consecutive grid points along the fastest axis per thread
  bool split_coordinates = false;
  bool brick_layout = false;
  bool brick3d_layout = false;
  // Culled kernel: atoms sorted by element type (atom_order[i] = atom at sorted position i),
  // type_first[t] = first sorted position of type t (type_count + 1 entries).
  bool culled = false;
  CullLayout cull;
  std::vector<int> atom_order;
  std::vector<int> type_first;
};

// split_coordinates (opt-in; measured slower on an H100, see orbital_cuda.cu): the atom offsets
// are formed in fp32 from hi/lo splits of the point and atom coordinates, (p_hi - a_hi) + (p_lo - a_lo), instead of a double subtraction and a double-to-
// float conversion per atom and point (conversions run at 1/4 of the fp64 rate on an H100); the
// result has the same ~2^-24 relative error as (float)(p - a). The kernel takes both the double
// coordinates and the splits (6 floats per atom: hi x y z, lo x y z) and reads one of them.
// brick_layout (the default before per-block culling; see JitVariant in orbital_cuda.cu): a block of 128 threads covers 16 rows x 8 columns of a plane (a warp
// 4 x 8 points, 0.3 x 0.6 A at VMD's spacing) instead of 128 consecutive columns, so the threads
// of a warp are closer together and diverge less at the shell screening branches; launch with
// blocks (ceil(nz / 8), ceil(ny / 16), planes). Needs one point per thread.
// brick3d_layout (opt-in): a block covers 2 planes x 8 rows x 8 columns, a warp 2 x 4 x 4 points;
// launch with blocks (ceil(nz / 8), ceil(ny / 8), ceil(planes / 2)) and OrbitalGridArgs::planes set.
JitSource generate_jit_source(const PackedBasis& basis, bool split_coordinates = false, bool brick_layout = false,
                              bool brick3d_layout = false);

// The culled kernel (per-block atom lists; see the comment at its generator). Kernel parameters:
// (const double* atom_xyz /* sorted, 3 per atom */, const int* atom_base /* sorted: first
// component */, const float* atom_cut2 /* sorted: largest shell screening radius^2 */,
// const int* type_first, int atoms, const float* coefficients, OrbitalGridArgs g, float* out);
// launch with blocks (ceil(nz / bz), ceil(ny / by), bricks of bx planes touching the launch's
// planes: (plane_begin + planes - 1) / bx - plane_begin / bx + 1) and OrbitalGridArgs::planes set.
JitSource generate_culled_jit_source(const PackedBasis& basis, const CullLayout& layout);

}  // namespace molaccel::orbital::detail

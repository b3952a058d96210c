// CUDA backends of the orbital engine.
//  * generic kernel: one thread per grid point, the packed basis and the orbital's Cartesian
//    coefficients staged in shared memory, loops over atoms/shells/primitives with screening;
//  * JIT kernel: source from generate_jit_source() (basis folded in, per-brick atom lists),
//    compiled by NVRTC through the runtime's JitCache and launched with cuda::launch;
//  * many orbitals / densities (sparse basis matrix): per brick of 128 points, the shells that
//    survive screening somewhere in the brick, their basis values in shared memory and a
//    register-tiled contraction with the gathered coefficient rows, fused with the density sum.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "orbital/cuda/orbital_cuda.hpp"
#include "orbital/jit_source.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::orbital::cuda_backend {

namespace {

// Same layout as the struct in the generated JIT source.
struct OrbitalGridArgs {
  double origin[3];
  double axes[3][3];
  int ny, nz, plane_begin, components;
  int planes;  // planes of this launch (JIT 3-D bricks)
};

OrbitalGridArgs grid_args(const GridSpec& grid, std::size_t plane_begin, int components) {
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

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Packed basis in device memory; the generic kernels copy it into shared memory per block.
struct BasisView {
  const double* atom_xyz;
  const int* atom_first_shell;
  const int4* shells;        // l, first_primitive, primitive_count, first_component
  const float* shell_cut;
  const float4* primitives;  // -alpha*log2(e), coefficient, cutoff_r2, unused
  int atoms, shell_count, primitive_count, components;
};

struct SharedBasis {
  double* atom_xyz;
  int* atom_first_shell;
  int4* shells;
  float* shell_cut;
  float4* primitives;
};

__host__ __device__ inline std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }

__host__ __device__ inline std::size_t shared_basis_bytes(const BasisView& b) {
  return align16(sizeof(double) * 3 * b.atoms) + align16(sizeof(int) * (b.atoms + 1)) +
         align16(sizeof(int4) * b.shell_count) + align16(sizeof(float) * b.shell_count) +
         align16(sizeof(float4) * b.primitive_count);
}

// Block-cooperative copy of the basis into shared memory (the "tile agent" preamble).
__device__ SharedBasis stage_basis(const BasisView& b, unsigned char* smem) {
  SharedBasis s;
  std::size_t offset = 0;
  s.atom_xyz = reinterpret_cast<double*>(smem + offset);
  offset += align16(sizeof(double) * 3 * b.atoms);
  s.atom_first_shell = reinterpret_cast<int*>(smem + offset);
  offset += align16(sizeof(int) * (b.atoms + 1));
  s.shells = reinterpret_cast<int4*>(smem + offset);
  offset += align16(sizeof(int4) * b.shell_count);
  s.shell_cut = reinterpret_cast<float*>(smem + offset);
  offset += align16(sizeof(float) * b.shell_count);
  s.primitives = reinterpret_cast<float4*>(smem + offset);
  for (int i = threadIdx.x; i < 3 * b.atoms; i += blockDim.x) s.atom_xyz[i] = b.atom_xyz[i];
  for (int i = threadIdx.x; i <= b.atoms; i += blockDim.x) s.atom_first_shell[i] = b.atom_first_shell[i];
  for (int i = threadIdx.x; i < b.shell_count; i += blockDim.x) {
    s.shells[i] = b.shells[i];
    s.shell_cut[i] = b.shell_cut[i];
  }
  for (int i = threadIdx.x; i < b.primitive_count; i += blockDim.x) s.primitives[i] = b.primitives[i];
  return s;
}

__device__ __forceinline__ void grid_point(const OrbitalGridArgs& g, int i, int j, int k, double p[3]) {
  for (int d = 0; d < 3; ++d) p[d] = g.origin[d] + i * g.axes[0][d] + j * g.axes[1][d] + k * g.axes[2][d];
}

// Radial part of a shell at r2 with per-primitive screening (warp piece shared by both kernels).
__device__ __forceinline__ float shell_radial(const SharedBasis& s, int4 shell, float r2) {
  float radial = 0.0f;
  for (int q = 0; q < shell.z; ++q) {
    const float4 prim = s.primitives[shell.y + q];
    if (r2 < prim.z) radial += prim.y * ex2_approx(prim.x * r2);
  }
  return radial;
}

// sum_c coef[c] * monomial_c(dx, dy, dz) in Molden component order.
__device__ __forceinline__ float angular_sum(int l, const float* c, float x, float y, float z) {
  switch (l) {
    case 0: return c[0];
    case 1: return c[0] * x + c[1] * y + c[2] * z;
    case 2: return c[0] * x * x + c[1] * y * y + c[2] * z * z + c[3] * x * y + c[4] * x * z + c[5] * y * z;
    case 3:
      return c[0] * x * x * x + c[1] * y * y * y + c[2] * z * z * z + c[3] * x * y * y + c[4] * x * x * y +
             c[5] * x * x * z + c[6] * x * z * z + c[7] * y * z * z + c[8] * y * y * z + c[9] * x * y * z;
    default:
      return c[0] * x * x * x * x + c[1] * y * y * y * y + c[2] * z * z * z * z + c[3] * x * x * x * y +
             c[4] * x * x * x * z + c[5] * y * y * y * x + c[6] * y * y * y * z + c[7] * z * z * z * x +
             c[8] * z * z * z * y + c[9] * x * x * y * y + c[10] * x * x * z * z + c[11] * y * y * z * z +
             c[12] * x * x * y * z + c[13] * y * y * x * z + c[14] * z * z * x * y;
  }
}

// Monomials of one shell, written to column `p` of the basis matrix (pitch = points per row).
__device__ __forceinline__ void store_monomials(int l, float radial, float x, float y, float z, float* b,
                                                std::size_t pitch) {
  switch (l) {
    case 0: b[0] = radial; break;
    case 1: b[0] = radial * x; b[pitch] = radial * y; b[2 * pitch] = radial * z; break;
    case 2: {
      const float v[6] = {x * x, y * y, z * z, x * y, x * z, y * z};
      for (int c = 0; c < 6; ++c) b[c * pitch] = radial * v[c];
      break;
    }
    case 3: {
      const float v[10] = {x * x * x, y * y * y, z * z * z, x * y * y, x * x * y,
                           x * x * z, x * z * z, y * z * z, y * y * z, x * y * z};
      for (int c = 0; c < 10; ++c) b[c * pitch] = radial * v[c];
      break;
    }
    default: {
      const float v[15] = {x * x * x * x, y * y * y * y, z * z * z * z, x * x * x * y, x * x * x * z,
                           y * y * y * x, y * y * y * z, z * z * z * x, z * z * z * y, x * x * y * y,
                           x * x * z * z, y * y * z * z, x * x * y * z, y * y * x * z, z * z * x * y};
      for (int c = 0; c < 15; ++c) b[c * pitch] = radial * v[c];
    }
  }
}

constexpr int kPointsPerBlock = 128;

// Generic kernel: one orbital, one point per thread, basis and coefficients in shared memory.
__global__ void __launch_bounds__(kPointsPerBlock) generic_orbital_kernel(BasisView basis, const float* coefficients,
                                                                          OrbitalGridArgs g, float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const SharedBasis s = stage_basis(basis, smem);
  float* c = reinterpret_cast<float*>(smem + shared_basis_bytes(basis));
  for (int i = threadIdx.x; i < basis.components; i += blockDim.x) c[i] = coefficients[i];
  __syncthreads();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= g.nz) return;
  const int j = blockIdx.y, i = g.plane_begin + blockIdx.z;
  double p[3];
  grid_point(g, i, j, k, p);
  float value = 0.0f;
  for (int a = 0; a < basis.atoms; ++a) {
    const float x = static_cast<float>(p[0] - s.atom_xyz[3 * a]);
    const float y = static_cast<float>(p[1] - s.atom_xyz[3 * a + 1]);
    const float z = static_cast<float>(p[2] - s.atom_xyz[3 * a + 2]);
    const float r2 = x * x + y * y + z * z;
    for (int sh = s.atom_first_shell[a]; sh < s.atom_first_shell[a + 1]; ++sh) {
      if (r2 >= s.shell_cut[sh]) continue;
      const int4 shell = s.shells[sh];
      value += shell_radial(s, shell, r2) * angular_sum(shell.x, c + shell.w, x, y, z);
    }
  }
  out[(static_cast<std::size_t>(blockIdx.z) * g.ny + j) * g.nz + k] = value;
}

// Orbitals per thread of the contraction: 4 (tiles of 64) for few orbitals, 12 (tiles of 192,
// e.g. C60's 180 occupied orbitals in one pass over the basis matrix) for many.
inline int contraction_width(std::size_t orbitals) { return orbitals <= 64 ? 4 : 12; }
// Rows of the transposed coefficient matrix are padded to a multiple of this.
constexpr int kComponentPad = 8;

// ---------------------------------------------------------------------------------------------
// Sparse (screened) basis-matrix path for many orbitals and densities. One block of 256 threads
// per brick of 128 grid points (4x4x8, 2x8x8 or 1x8x16 planes x rows x columns). The block first
// lists the shells that can be non-zero anywhere in the brick (distance from the brick's bounding
// sphere to the atom against the shell's screening radius, conservative by 1e-3 bohr, so a shell
// left out is one that the per-point test would have zeroed at every point of the brick), then
// walks that list in chunks of at most kSparseK Cartesian components: basis values of the chunk
// into shared memory (per-point screening), the matching rows of the coefficient matrix gathered
// into shared memory, and a register-tiled contraction: 256 threads with 8 points x R orbitals
// each (strided, so shared-memory reads are conflict-free or broadcasts), tiles of 128 points x
// (16 x R) orbitals. Density mode (weights != nullptr) sums w_o psi^2 over all orbital tiles of
// the block, so psi never leaves registers. For C60 6-31G* on the 0.075 A grid a brick needs on
// the order of 150 of the 900 components.
// ---------------------------------------------------------------------------------------------
constexpr int kBrickPoints = 128, kSparseK = 32, kSparseThreads = 256;

struct BrickShape {
  int bx, by, bz;          // brick extent in planes, rows, columns (product kBrickPoints)
  int nbx, nby, nbz;       // bricks along each axis
};

inline BrickShape brick_shape(std::size_t planes, std::size_t ny, std::size_t nz) {
  BrickShape b{};
  if (planes >= 4) b = {4, 4, 8, 0, 0, 0};
  else if (planes >= 2) b = {2, 8, 8, 0, 0, 0};
  else b = {1, 8, 16, 0, 0, 0};
  b.nbx = static_cast<int>((planes + b.bx - 1) / b.bx);
  b.nby = static_cast<int>((ny + b.by - 1) / b.by);
  b.nbz = static_cast<int>((nz + b.bz - 1) / b.bz);
  return b;
}

__host__ __device__ inline int cartesian_components(int l) { return (l + 1) * (l + 2) / 2; }

// Dynamic shared memory of the sparse kernel (ints): active shells, their component counts and
// offsets, chunk starts, component indices of the active shells.
inline std::size_t sparse_dynamic_bytes(const BasisView& b) {
  return sizeof(int) * (4 * static_cast<std::size_t>(b.shell_count) + 3 + static_cast<std::size_t>(b.components));
}

template <int R>
__global__ void __launch_bounds__(kSparseThreads, 1)
    sparse_contract_kernel(BasisView basis, const int* __restrict__ shell_atom, OrbitalGridArgs g, int planes,
                           BrickShape shape, const float* __restrict__ ct, int orbitals_padded, int orbitals,
                           const float* __restrict__ weights, float* __restrict__ out, std::size_t out_pitch) {
  constexpr int kTileO = 16 * R;
  __shared__ __align__(16) float bs[kSparseK][kBrickPoints];
  __shared__ __align__(16) float cs[kSparseK][kTileO];
  __shared__ float rho[kBrickPoints];
  __shared__ int warp_count[kSparseThreads / 32];
  __shared__ int n_active_s, n_chunks_s;
  extern __shared__ int dyn[];
  int* active = dyn;                                  // shell_count
  int* active_nc = active + basis.shell_count;        // shell_count
  int* comp_off = active_nc + basis.shell_count;      // shell_count + 1 (component offset of active shell j)
  int* chunk_begin = comp_off + basis.shell_count + 1;  // shell_count + 1
  int* comp_all = chunk_begin + basis.shell_count + 1;  // components

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int brick = blockIdx.x;
  const int bk = brick % shape.nbz, bj = (brick / shape.nbz) % shape.nby, bi = brick / (shape.nbz * shape.nby);
  const int i0 = bi * shape.bx, j0 = bj * shape.by, k0 = bk * shape.bz;  // i0 relative to g.plane_begin

  // Bounding sphere of the brick (all of its points, in range or not).
  double center[3];
  {
    const double ci = g.plane_begin + i0 + 0.5 * (shape.bx - 1), cj = j0 + 0.5 * (shape.by - 1),
                 ck = k0 + 0.5 * (shape.bz - 1);
    for (int d = 0; d < 3; ++d) center[d] = g.origin[d] + ci * g.axes[0][d] + cj * g.axes[1][d] + ck * g.axes[2][d];
  }
  double radius = 0.0;
  {
    const int ext[3] = {shape.bx - 1, shape.by - 1, shape.bz - 1};
    for (int e = 0; e < 3; ++e)
      radius += 0.5 * ext[e] * sqrt(g.axes[e][0] * g.axes[e][0] + g.axes[e][1] * g.axes[e][1] + g.axes[e][2] * g.axes[e][2]);
  }

  // Ordered list of the shells that may be non-zero in the brick (ballot + warp offsets).
  if (tid == 0) n_active_s = 0;
  __syncthreads();
  for (int base = 0; base < basis.shell_count; base += kSparseThreads) {
    const int s = base + tid;
    bool flag = false;
    if (s < basis.shell_count) {
      const int a = shell_atom[s];
      const double dx = center[0] - basis.atom_xyz[3 * a], dy = center[1] - basis.atom_xyz[3 * a + 1],
                   dz = center[2] - basis.atom_xyz[3 * a + 2];
      const double gap = fmax(0.0, sqrt(dx * dx + dy * dy + dz * dz) - radius - 1e-3);
      flag = gap * gap < static_cast<double>(basis.shell_cut[s]);
    }
    const unsigned mask = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) warp_count[warp] = __popc(mask);
    __syncthreads();
    int offset = n_active_s;
    for (int w = 0; w < warp; ++w) offset += warp_count[w];
    if (flag) {
      const int j = offset + __popc(mask & ((1u << lane) - 1u));
      active[j] = s;
      active_nc[j] = cartesian_components(basis.shells[s].x);
    }
    __syncthreads();
    if (tid == 0) {
      int total = 0;
      for (int w = 0; w < kSparseThreads / 32; ++w) total += warp_count[w];
      n_active_s += total;
    }
    __syncthreads();
  }
  // Chunks of whole shells with at most kSparseK components (serial over the short list).
  if (tid == 0) {
    const int n = n_active_s;
    int chunks = 0, cur = 0, off = 0;
    chunk_begin[0] = 0;
    for (int j = 0; j < n; ++j) {
      if (cur + active_nc[j] > kSparseK) {
        chunk_begin[++chunks] = j;
        cur = 0;
      }
      comp_off[j] = off;
      cur += active_nc[j];
      off += active_nc[j];
    }
    comp_off[n] = off;
    if (n > 0) chunk_begin[++chunks] = n;
    n_chunks_s = chunks;
  }
  __syncthreads();
  const int n_active = n_active_s, n_chunks = n_chunks_s;
  for (int j = tid; j < n_active; j += kSparseThreads) {
    const int first = basis.shells[active[j]].w;
    for (int c = 0; c < active_nc[j]; ++c) comp_all[comp_off[j] + c] = first + c;
  }

  // This thread's point for the basis values (two threads per point, alternate shells).
  const int p = tid % kBrickPoints, half = tid / kBrickPoints;
  const int pi = p / (shape.by * shape.bz), pj = (p / shape.bz) % shape.by, pk = p % shape.bz;
  const bool valid = i0 + pi < planes && j0 + pj < g.ny && k0 + pk < g.nz;
  double pos[3];
  grid_point(g, g.plane_begin + i0 + pi, j0 + pj, k0 + pk, pos);

  const int tx = tid % 16, ty = tid / 16;
  if (weights)
    for (int i = tid; i < kBrickPoints; i += kSparseThreads) rho[i] = 0.0f;
  __syncthreads();
  for (int o0 = 0; o0 < orbitals_padded; o0 += kTileO) {
    float acc[R][8];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[r][q] = 0.0f;
    for (int ch = 0; ch < n_chunks; ++ch) {
      const int js = chunk_begin[ch], je = chunk_begin[ch + 1];
      const int cb = comp_off[js], nk = comp_off[je] - cb;
      __syncthreads();  // comp_all written / previous chunk consumed
      for (int j = js + half; j < je; j += kSparseThreads / kBrickPoints) {
        const int s = active[j];
        const int4 shell = basis.shells[s];
        const int a = shell_atom[s];
        const float x = static_cast<float>(pos[0] - basis.atom_xyz[3 * a]);
        const float y = static_cast<float>(pos[1] - basis.atom_xyz[3 * a + 1]);
        const float z = static_cast<float>(pos[2] - basis.atom_xyz[3 * a + 2]);
        const float r2 = x * x + y * y + z * z;
        float radial = 0.0f;
        if (valid && r2 < basis.shell_cut[s]) {
          for (int q = 0; q < shell.z; ++q) {
            const float4 prim = basis.primitives[shell.y + q];
            if (r2 < prim.z) radial += prim.y * ex2_approx(prim.x * r2);
          }
        }
        store_monomials(shell.x, radial, x, y, z, &bs[comp_off[j] - cb][p], kBrickPoints);
      }
      for (int i = tid; i < nk * (kTileO / 4); i += kSparseThreads) {
        const int kk = i / (kTileO / 4), oo = (i % (kTileO / 4)) * 4;
        *reinterpret_cast<float4*>(&cs[kk][oo]) = *reinterpret_cast<const float4*>(
            &ct[static_cast<std::size_t>(comp_all[cb + kk]) * orbitals_padded + o0 + oo]);
      }
      __syncthreads();
#pragma unroll 4
      for (int kk = 0; kk < nk; ++kk) {
        float bv[8], cv[R];
#pragma unroll
        for (int q = 0; q < 8; ++q) bv[q] = bs[kk][tx + 16 * q];
#pragma unroll
        for (int r = 0; r < R; ++r) cv[r] = cs[kk][ty + 16 * r];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int q = 0; q < 8; ++q) acc[r][q] = fmaf(cv[r], bv[q], acc[r][q]);
      }
    }
    // Output point index of brick point pp (or -1 outside the grid/tile).
    auto out_index = [&](int pp) -> long long {
      const int qi = i0 + pp / (shape.by * shape.bz), qj = j0 + (pp / shape.bz) % shape.by, qk = k0 + pp % shape.bz;
      if (qi >= planes || qj >= g.ny || qk >= g.nz) return -1;
      return (static_cast<long long>(qi) * g.ny + qj) * g.nz + qk;
    };
    if (weights) {
      // Partial sums of the 16 thread rows (ty) into the free basis-value buffer, then summed in a
      // fixed order: unlike shared-memory atomics, the density is the same bit for bit on every run
      // (and so whatever the number of GPUs).
      float* partial = &bs[0][0];  // 16 x kBrickPoints <= kSparseK x kBrickPoints
      __syncthreads();             // the last chunk's basis values have been read
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        float sum = 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) sum += weights[o0 + ty + 16 * r] * acc[r][q] * acc[r][q];
        partial[ty * kBrickPoints + tx + 16 * q] = sum;
      }
      __syncthreads();
      for (int i = tid; i < kBrickPoints; i += kSparseThreads) {
        float sum = 0.0f;
        for (int t = 0; t < kSparseThreads / 16; ++t) sum += partial[t * kBrickPoints + i];
        rho[i] += sum;
      }
      __syncthreads();  // partial read before the next orbital tile writes bs
    } else {
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const long long idx = out_index(tx + 16 * q);
        if (idx < 0) continue;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int o = o0 + ty + 16 * r;
          if (o < orbitals) out[static_cast<std::size_t>(o) * out_pitch + static_cast<std::size_t>(idx)] = acc[r][q];
        }
      }
    }
    if (weights && o0 + kTileO >= orbitals_padded) {
      __syncthreads();
      for (int i = tid; i < kBrickPoints; i += kSparseThreads) {
        const long long idx = out_index(i);
        if (idx >= 0) out[idx] = rho[i];
      }
    }
  }
}

// Densities and (by the tuning: more than 4) many orbitals take the sparse basis-matrix path.
inline bool use_matrix_path(const GpuJob& job) { return job.weights != nullptr || job.tuning.basis_matrix; }

// The JIT request for a basis set and kernel variant (the source is the cache key).
JitRequest jit_request(const detail::JitSource& source, int device) {
  JitRequest request;
  request.source = source.source;
  request.program_name = "molaccel_orbital_jit.cu";
  request.kernel_names = {source.kernel_name};
  cudaDeviceProp prop{};
  MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  request.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
  return request;
}

detail::JitSource jit_source_for(const detail::PackedBasis& basis, const detail::CullLayout& brick) {
  return detail::generate_jit_source(basis, brick);
}

// What a device state holds after init: the request cache's ids of the basis and the
// coefficients, the path and JIT brick, and the density weights. Empty (never reused) when the
// job does not come from the cache.
std::string state_key(const GpuJob& job, bool want_jit) {
  if (job.basis_id == 0 || job.coefficients_id == 0) return {};
  std::string key = fmt::format(fmt::runtime("{}/{}/{}/{}/{}/{}/"), job.basis_id, job.coefficients_id, job.orbitals,
                                want_jit, use_matrix_path(job), job.tuning.jit_brick.name());
  if (job.weights) key.append(reinterpret_cast<const char*>(job.weights), job.orbitals * sizeof(float));
  return key;
}

// Pinned host buffers outlive a request: page-locking the two 32 MiB staging buffers of a worker
// costs milliseconds, which a request that takes tens of milliseconds should not pay each time.
// Process-wide, at most 16 buffers kept; never destroyed (the driver frees pinned memory at exit,
// after static destructors could no longer call it safely).
class PinnedPool {
 public:
  static PinnedPool& instance() {
    static PinnedPool* pool = new PinnedPool;
    return *pool;
  }
  // A buffer of at least n floats (capacity returned in `capacity`).
  cuda::PinnedBuffer<float> take(std::size_t n, std::size_t& capacity) {
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < free_.size(); ++i)
        if (free_[i].first >= n) {
          capacity = free_[i].first;
          cuda::PinnedBuffer<float> b = std::move(free_[i].second);
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          b.resize(n);  // within capacity: no new allocation
          return b;
        }
    }
    capacity = n;
    return cuda::PinnedBuffer<float>(n);
  }
  void give(cuda::PinnedBuffer<float>&& b, std::size_t capacity) {
    if (capacity == 0) return;
    std::lock_guard lock(mutex_);
    if (free_.size() < 16) free_.emplace_back(capacity, std::move(b));
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, cuda::PinnedBuffer<float>>> free_;
};

// ---------------------------------------------------------------------------------------------
// Per-worker device state: the basis, coefficients and (for JIT) the loaded program, uploaded
// once per job and worker.
// ---------------------------------------------------------------------------------------------
struct DeviceState {
  bool ready = false;
  int device = -1;
  std::string key;  // what init uploaded (state_key), empty = not reusable by another request
  cuda::DeviceBuffer<double> atom_xyz;
  cuda::DeviceBuffer<int> atom_first_shell;
  cuda::DeviceBuffer<int4> shells;
  cuda::DeviceBuffer<float> shell_cut;
  cuda::DeviceBuffer<float4> primitives;
  cuda::DeviceBuffer<float> coefficients;     // orbitals x components (row per orbital)
  cuda::DeviceBuffer<float> coefficients_t;   // components_padded x orbitals_padded
  cuda::DeviceBuffer<float> weights;          // orbitals_padded
  cuda::DeviceBuffer<int> shell_atom;         // atom of each shell (sparse matrix path)
  cuda::DeviceBuffer<float> result;            // benchmarks (time_kernel)
  // Tile pipeline (evaluate_planes): two device result buffers and two pinned host buffers, the
  // kernels on `stream`, the device-to-host copies on `copy_stream`.
  cuda::DeviceBuffer<float> results[2];
  cuda::PinnedBuffer<float> staging[2];       // from PinnedPool, returned by the destructor
  std::size_t staging_capacity[2] = {0, 0};
  std::unique_ptr<cuda::Event> computed[2], copied[2];
  std::unique_ptr<cuda::Stream> copy_stream;
  std::size_t chunk_planes = 0;                // planes per launch (0 = chosen per tile; halves on OOM)
  std::unique_ptr<cuda::Stream> stream;
  std::unique_ptr<cuda::LoadedProgram> program;
  cudaKernel_t jit_kernel = nullptr;
  detail::CullLayout jit_cull;
  cuda::DeviceBuffer<int> atom_base;     // JIT: sorted by type
  cuda::DeviceBuffer<float> atom_cut2;
  cuda::DeviceBuffer<int> type_first;
  cuda::DeviceBuffer<double> atom_xyz_sorted;
  BasisView view{};
  int components_padded = 0, orbitals_padded = 0;

  DeviceState() = default;
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;
  ~DeviceState() {
    for (int b = 0; b < 2; ++b) PinnedPool::instance().give(std::move(staging[b]), staging_capacity[b]);
  }
  void ensure_staging(int b, std::size_t n) {
    if (staging_capacity[b] >= n) {
      staging[b].resize(n);
      return;
    }
    PinnedPool::instance().give(std::move(staging[b]), staging_capacity[b]);
    staging_capacity[b] = 0;
    staging[b] = PinnedPool::instance().take(n, staging_capacity[b]);
  }

  // Uploads one job's basis and coefficients. A state taken from its DevicePool keeps its
  // streams, events and buffers from earlier jobs (buffers grow, never shrink), so a job pays no
  // allocation, which the driver serialises across GPUs.
  void init(const GpuJob& job, int dev, bool want_jit) {
    device = dev;
    chunk_planes = 0;
    jit_kernel = nullptr;
    components_padded = orbitals_padded = 0;
    const auto& basis = *job.basis;
    if (!stream) stream = std::make_unique<cuda::Stream>();
    atom_xyz.upload(basis.atom_xyz, *stream);
    atom_first_shell.upload(basis.atom_first_shell, *stream);
    std::vector<int4> shell_data;
    std::vector<float> cuts;
    for (const auto& s : basis.shells) {
      shell_data.push_back(make_int4(s.l, s.first_primitive, s.primitive_count, s.first_component));
      cuts.push_back(s.cutoff_r2);
    }
    shells.upload(shell_data, *stream);
    shell_cut.upload(cuts, *stream);
    std::vector<float4> prims;
    for (std::size_t p = 0; p < basis.exponent.size(); ++p)
      prims.push_back(make_float4(static_cast<float>(-basis.exponent[p] * 1.4426950408889634), basis.coefficient[p],
                                  basis.cutoff_r2[p], 0.0f));
    primitives.upload(prims, *stream);
    coefficients.upload(std::vector<float>(job.coefficients, job.coefficients + job.orbitals * basis.components), *stream);
    view = BasisView{atom_xyz.data(), atom_first_shell.data(), shells.data(), shell_cut.data(), primitives.data(),
                     static_cast<int>(basis.atom_count()), static_cast<int>(basis.shells.size()),
                     static_cast<int>(basis.exponent.size()), basis.components};
    if (!copy_stream) copy_stream = std::make_unique<cuda::Stream>();
    for (int b = 0; b < 2; ++b) {
      if (!computed[b]) computed[b] = std::make_unique<cuda::Event>(false);
      if (!copied[b]) copied[b] = std::make_unique<cuda::Event>(false);
    }
    if (use_matrix_path(job)) {
      components_padded = (basis.components + kComponentPad - 1) / kComponentPad * kComponentPad;
      const std::size_t tile_o = 16u * static_cast<std::size_t>(contraction_width(job.orbitals));
      orbitals_padded = static_cast<int>((job.orbitals + tile_o - 1) / tile_o * tile_o);
      std::vector<float> ct(static_cast<std::size_t>(components_padded) * orbitals_padded, 0.0f);
      for (std::size_t o = 0; o < job.orbitals; ++o)
        for (int c = 0; c < basis.components; ++c)
          ct[static_cast<std::size_t>(c) * orbitals_padded + o] = job.coefficients[o * basis.components + c];
      coefficients_t.upload(ct, *stream);
      std::vector<float> w(static_cast<std::size_t>(orbitals_padded), 0.0f);
      if (job.weights) std::copy(job.weights, job.weights + job.orbitals, w.begin());
      weights.upload(w, *stream);
      std::vector<int> sa(basis.shells.size());
      for (std::size_t a = 0; a < basis.atom_count(); ++a)
        for (int sh = basis.atom_first_shell[a]; sh < basis.atom_first_shell[a + 1]; ++sh)
          sa[static_cast<std::size_t>(sh)] = static_cast<int>(a);
      shell_atom.upload(sa, *stream);
    } else if (want_jit) {
      const auto source = jit_source_for(basis, job.tuning.jit_brick);
      jit_cull = source.cull;
      {
        std::vector<double> xyz;
        std::vector<int> bases;
        std::vector<float> cuts;
        for (const int a : source.atom_order) {
          const std::size_t au = static_cast<std::size_t>(a);
          for (int d = 0; d < 3; ++d) xyz.push_back(basis.atom_xyz[3 * au + static_cast<std::size_t>(d)]);
          const int first = basis.atom_first_shell[au], last = basis.atom_first_shell[au + 1];
          bases.push_back(first < last ? basis.shells[static_cast<std::size_t>(first)].first_component : 0);
          float cut = 0;
          for (int sh = first; sh < last; ++sh) cut = std::max(cut, basis.shells[static_cast<std::size_t>(sh)].cutoff_r2);
          cuts.push_back(cut);
        }
        atom_xyz_sorted.upload(xyz, *stream);
        atom_base.upload(bases, *stream);
        atom_cut2.upload(cuts, *stream);
        type_first.upload(source.type_first, *stream);
      }
      const JitRequest request = jit_request(source, dev);
      const JitProgram compiled = default_jit_cache().compile(request);
      program = std::make_unique<cuda::LoadedProgram>(compiled);
      jit_kernel = program->kernel(source.kernel_name);
    }
    stream->synchronize();
    key = state_key(job, want_jit);
    ready = true;
  }

  std::size_t generic_shared_bytes() const {
    return shared_basis_bytes(view) + sizeof(float) * static_cast<std::size_t>(view.components);
  }
};

// Device states outlive a job, per device (DevicePool): allocating and freeing the basis matrix,
// the result buffers and the streams cost milliseconds per GPU and request, serialised across GPUs
// by the driver. At most 2 kept per device (two jobs at once on one device are rare: tests with two
// workers per GPU).
using DeviceStateLease = cuda::DeviceLease<DeviceState, 2>;

void check_shared_fits(std::size_t bytes, int device) {
  int optin = 0;
  MOLACCEL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<std::size_t>(optin))
    throw Error(fmt::format("orbital basis set needs {} bytes of shared memory, the GPU has {} per block "
                            "(use the cpu backend for this basis set)", bytes, optin));
}

// Launches the single-orbital kernel (generic or JIT) for orbital `o` over planes, into dst.
void launch_orbital(DeviceState& st, const GpuJob& job, std::size_t o, std::size_t p0, std::size_t planes,
                    float* dst) {
  const GridSpec& grid = *job.grid;
  OrbitalGridArgs g = grid_args(grid, p0, job.basis->components);
  g.planes = static_cast<int>(planes);
  const dim3 block(kPointsPerBlock);
  const dim3 blocks(static_cast<unsigned>((grid.counts[2] + kPointsPerBlock - 1) / kPointsPerBlock),
                    static_cast<unsigned>(grid.counts[1]), static_cast<unsigned>(planes));
  const float* coef = st.coefficients.data() + o * job.basis->components;
  if (st.jit_kernel) {
    const std::size_t shared = sizeof(float) * job.basis->components;
    const detail::CullLayout& l = st.jit_cull;
    const std::size_t first_brick = p0 / static_cast<std::size_t>(l.bx);
    const std::size_t last_brick = (p0 + planes - 1) / static_cast<std::size_t>(l.bx);
    const dim3 jit_blocks(static_cast<unsigned>((grid.counts[2] + l.bz - 1) / l.bz),
                          static_cast<unsigned>((grid.counts[1] + l.by - 1) / l.by),
                          static_cast<unsigned>(last_brick - first_brick + 1));
    cuda::launch(st.jit_kernel, jit_blocks, block, shared, *st.stream, st.atom_xyz_sorted.data(), st.atom_base.data(),
                 st.atom_cut2.data(), st.type_first.data(), st.view.atoms, coef, g, dst);
  } else {
    const std::size_t shared = st.generic_shared_bytes();
    check_shared_fits(shared, st.device);
    MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(generic_orbital_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared)));
    generic_orbital_kernel<<<blocks, block, shared, *st.stream>>>(st.view, coef, g, dst);
    MOLACCEL_CUDA_CHECK_LAUNCH("generic_orbital_kernel");
  }
}

// Sparse path over planes [p0, p0 + planes) of the grid into dst (density: dst[p]; orbitals:
// dst[o * dst_pitch + p], p relative to the first plane).
void launch_sparse(DeviceState& st, const GpuJob& job, std::size_t p0, std::size_t planes, float* dst,
                   std::size_t dst_pitch) {
  const GridSpec& grid = *job.grid;
  const OrbitalGridArgs g = grid_args(grid, p0, job.basis->components);
  const BrickShape shape = brick_shape(planes, grid.counts[1], grid.counts[2]);
  const std::size_t bricks = static_cast<std::size_t>(shape.nbx) * shape.nby * shape.nbz;
  const std::size_t dynamic = sparse_dynamic_bytes(st.view);
  const float* weights = job.weights ? st.weights.data() : nullptr;
  const int orbitals = static_cast<int>(job.orbitals);
  auto run = [&](auto kernel, int r) {
    cudaFuncAttributes attr{};
    MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&attr, kernel));
    check_shared_fits(attr.sharedSizeBytes + dynamic, st.device);
    MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic)));
    kernel<<<static_cast<unsigned>(bricks), kSparseThreads, dynamic, *st.stream>>>(
        st.view, st.shell_atom.data(), g, static_cast<int>(planes), shape, st.coefficients_t.data(), st.orbitals_padded,
        orbitals, weights, dst, dst_pitch);
    MOLACCEL_CUDA_CHECK_LAUNCH(r == 4 ? "sparse_contract_kernel<4>" : "sparse_contract_kernel<12>");
  };
  if (contraction_width(job.orbitals) == 4) run(sparse_contract_kernel<4>, 4);
  else run(sparse_contract_kernel<12>, 12);
}

// Compute of planes [p, p + planes) into dst (outputs x points of those planes).
void launch_planes(DeviceState& st, const GpuJob& job, std::size_t p, std::size_t planes, float* dst) {
  const std::size_t points = planes * job.grid->counts[1] * job.grid->counts[2];
  if (use_matrix_path(job)) {
    launch_sparse(st, job, p, planes, dst, points);
  } else {
    for (std::size_t o = 0; o < job.orbitals; ++o) launch_orbital(st, job, o, p, planes, dst + o * points);
  }
}

// Host copy of one finished chunk (pinned staging, outputs x points) into the job's output rows,
// on a few threads (a single thread copies ~5-10 GB/s, slower than the device-to-host DMA).
void drain_chunk(const float* staging, const GpuJob& job, std::size_t p, std::size_t points, std::size_t outputs) {
  const std::size_t plane_points = job.grid->counts[1] * job.grid->counts[2];
  const std::size_t n_points = job.grid->point_count();
  const std::size_t kPiece = std::clamp<std::size_t>(job.tuning.drain_piece_mib, 1, 64) << 18;  // floats
  const std::size_t pieces_per_output = (points + kPiece - 1) / kPiece;
  const int threads = std::max(1, std::min(job.tuning.drain_threads, cpu_info().logical_cores));
  parallel_for(outputs * pieces_per_output, threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const std::size_t o = i / pieces_per_output, first = (i % pieces_per_output) * kPiece;
      const std::size_t n = std::min(kPiece, points - first);
      std::memcpy(job.out + o * n_points + p * plane_points + first, staging + o * points + first, n * sizeof(float));
    }
  });
}

// One tile, pipelined over chunks of planes: the kernels of chunk c+1 run while chunk c is copied
// to a pinned buffer and chunk c-1 is copied from pinned memory into the output. The only host
// waits are on copy events (one per chunk, not per orbital). Chunks depend on the tile only, so
// the values do not depend on how many GPUs share the grid.
// Into page-locked output (molaccel::allocate_host_buffer, cudaHostAlloc) the copy engine writes
// each chunk straight into its rows: no staging buffer, no host copy, so several GPUs are not
// limited by the host threads' memcpy bandwidth.
void run_tile_direct(DeviceState& st, const GpuJob& job, const std::vector<std::pair<std::size_t, std::size_t>>& chunks) {
  const std::size_t plane_points = job.grid->counts[1] * job.grid->counts[2];
  const std::size_t n_points = job.grid->point_count();
  const std::size_t outputs = job.weights ? 1 : job.orbitals;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const std::size_t slot = c % 2;
    const std::size_t points = chunks[c].second * plane_points;
    if (c >= 2) MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.stream, st.copied[slot]->get(), 0));
    launch_planes(st, job, chunks[c].first, chunks[c].second, st.results[slot].data());
    st.computed[slot]->record(*st.stream);
    MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.copy_stream, st.computed[slot]->get(), 0));
    MOLACCEL_CUDA_TRY(cudaMemcpy2DAsync(job.out + chunks[c].first * plane_points, n_points * sizeof(float),
                                        st.results[slot].data(), points * sizeof(float), points * sizeof(float),
                                        outputs, cudaMemcpyDeviceToHost, *st.copy_stream));
    st.copied[slot]->record(*st.copy_stream);
  }
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(*st.copy_stream));
}

void run_tile(DeviceState& st, const GpuJob& job, std::size_t plane_begin, std::size_t plane_end, std::size_t step) {
  const std::size_t plane_points = job.grid->counts[1] * job.grid->counts[2];
  const std::size_t outputs = job.weights ? 1 : job.orbitals;
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // first plane, planes
  for (std::size_t p = plane_begin; p < plane_end; p += step) chunks.emplace_back(p, std::min(step, plane_end - p));
  const std::size_t capacity = std::min(step, plane_end - plane_begin) * plane_points * outputs;
  const bool direct = cuda::is_page_locked(job.out);
  for (std::size_t b = 0; b < 2 && b < chunks.size(); ++b) {
    st.results[b].resize(capacity);
    if (!direct) st.ensure_staging(static_cast<int>(b), capacity);
  }
  if (direct) return run_tile_direct(st, job, chunks);
  auto drain = [&](std::size_t c) {
    st.copied[c % 2]->synchronize();
    drain_chunk(st.staging[c % 2].data(), job, chunks[c].first, chunks[c].second * plane_points, outputs);
  };
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const std::size_t slot = c % 2;
    const std::size_t points = chunks[c].second * plane_points;
    // The result buffer of this slot is free once the copy of chunk c-2 has finished.
    if (c >= 2) MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.stream, st.copied[slot]->get(), 0));
    launch_planes(st, job, chunks[c].first, chunks[c].second, st.results[slot].data());
    st.computed[slot]->record(*st.stream);
    MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.copy_stream, st.computed[slot]->get(), 0));
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(st.staging[slot].data(), st.results[slot].data(), points * outputs * sizeof(float),
                                      cudaMemcpyDeviceToHost, *st.copy_stream));
    st.copied[slot]->record(*st.copy_stream);
    if (c >= 1) drain(c - 1);  // staging[slot ^ 1] is free again for chunk c+1 after this
  }
  drain(chunks.size() - 1);
}

}  // namespace

void precompile(const GpuJob& job, int device) {
  if (!job.jit || use_matrix_path(job)) return;
  const detail::CullLayout& brick = job.tuning.jit_brick;
  // Once per basis (request cache id), variant and device: generating the source and looking it
  // up in the JIT cache is request-invariant host work.
  static std::mutex mutex;
  static std::vector<std::string> done;
  const std::string key = job.basis_id == 0 ? std::string()
                                            : fmt::format(fmt::runtime("{}/{}/{}"), job.basis_id, device, brick.name());
  if (!key.empty()) {
    std::lock_guard lock(mutex);
    if (std::find(done.begin(), done.end(), key) != done.end()) return;
  }
  (void)default_jit_cache().compile(jit_request(jit_source_for(*job.basis, brick), device));
  if (!key.empty()) {
    std::lock_guard lock(mutex);
    if (done.size() >= 64) done.erase(done.begin());
    done.push_back(key);
  }
}

namespace {

// MOLACCEL_TRACE=orbital: per tile or share, the device, its planes or chunks, when it started
// and ended (ms on the process clock) and the set-up it paid, to see what does not shrink with
// more GPUs.
bool trace_on() { return trace_enabled("orbital"); }

// The worker's device state for this job: taken from the per-device pool on the job's first tile
// and initialised, unless it already holds this request's basis, coefficients and path.
DeviceState& job_state(WorkerContext& ctx, const GpuJob& job) {
  bool fresh = false;  // first tile of this job on this worker
  DeviceState& st = ctx.local<DeviceStateLease>().get(ctx.worker().device, &fresh);
  if (fresh) st.chunk_planes = 0;
  if (!st.ready || (fresh && (st.key.empty() || st.key != state_key(job, job.jit))))
    st.init(job, ctx.worker().device, job.jit);
  return st;
}

std::string kernel_name(const DeviceState& st, const GpuJob& job) {
  if (use_matrix_path(job)) {
    const std::string kind = "cuda/sparse-basis-matrix";
    return job.weights ? kind + "+density" : kind;
  }
  return st.jit_kernel ? "cuda/jit-cull-" + st.jit_cull.name() : std::string("cuda/generic");
}

// Planes [plane_begin, plane_end) as one pipelined tile; out of GPU memory halves the planes per
// launch and redoes the tile.
void run_tile_adaptive(WorkerContext& ctx, DeviceState& st, const GpuJob& job, std::size_t plane_begin,
                       std::size_t plane_end) {
  const GridSpec& grid = *job.grid;
  const std::size_t plane_points = grid.counts[1] * grid.counts[2];
  const std::size_t outputs = job.weights ? 1 : job.orbitals;
  const std::size_t tile_planes = plane_end - plane_begin;
  // Chunks: about a third of the tile (so copies overlap kernels), at most ~8M values (32 MiB).
  std::size_t step = std::max<std::size_t>(1, std::min((tile_planes + 2) / 3, (8u << 20) / std::max<std::size_t>(1, plane_points * outputs)));
  if (st.chunk_planes > 0) step = std::min(step, st.chunk_planes);
  for (;;) {
    try {
      run_tile(st, job, plane_begin, plane_end, step);
      return;
    } catch (const CudaError& e) {
      if (!e.is_out_of_memory() || step == 1) throw;
      cudaGetLastError();  // clear the sticky allocation error
      cudaStreamSynchronize(*st.stream);
      cudaStreamSynchronize(*st.copy_stream);
      for (int b = 0; b < 2; ++b) st.results[b].reset();
      step = std::max<std::size_t>(1, step / 2);
      st.chunk_planes = step;
      log_warn("orbital: out of GPU memory on {}, retrying with {} plane(s) per launch", ctx.worker().name(), step);
    } catch (...) {
      // The tile goes to another worker; this worker's next tile must not race a copy still in flight.
      cudaStreamSynchronize(*st.stream);
      cudaStreamSynchronize(*st.copy_stream);
      throw;
    }
  }
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> plan_chunks(const GpuJob& job) {
  const GridSpec& grid = *job.grid;
  const std::size_t nx = grid.counts[0];
  const std::size_t plane_points = std::max<std::size_t>(1, grid.counts[1] * grid.counts[2]);
  const std::size_t outputs = job.weights ? 1 : std::max<std::size_t>(1, job.orbitals);
  std::size_t granule = 1;  // planes of the kernel's bricks
  if (use_matrix_path(job)) {
    granule = 4;
  } else if (job.jit) {
    granule = static_cast<std::size_t>(job.tuning.jit_brick.bx);
  }
  const std::size_t by_memory = std::max<std::size_t>(1, (8u << 20) / (plane_points * outputs));
  const std::size_t target = std::max<std::size_t>(1, job.tuning.chunks_per_grid);
  std::size_t planes = std::min(by_memory, (nx + target - 1) / target);
  planes = std::max(planes, std::min(granule, by_memory));
  if (planes >= granule) planes = planes / granule * granule;
  std::vector<std::pair<std::size_t, std::size_t>> chunks;
  for (std::size_t p = 0; p < nx; p += planes) chunks.emplace_back(p, std::min(planes, nx - p));
  // Claim order: the most expensive chunks first, so that the last chunks the GPUs take are cheap
  // and the shares end together. Estimated cost of a plane: per atom whose largest screening
  // sphere reaches it, the area of the sphere's cut (r^2 - d^2, d = distance of the atom to the
  // plane). Only the order changes: a chunk's values do not depend on who computes it or when.
  const detail::PackedBasis& basis = *job.basis;
  const auto& a1 = grid.axes[1];
  const auto& a2 = grid.axes[2];
  double normal[3] = {a1[1] * a2[2] - a1[2] * a2[1], a1[2] * a2[0] - a1[0] * a2[2], a1[0] * a2[1] - a1[1] * a2[0]};
  const double norm = std::sqrt(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2]);
  if (norm > 0 && chunks.size() > 1) {
    for (double& v : normal) v /= norm;
    double step = 0, origin = 0;
    for (int d = 0; d < 3; ++d) {
      step += grid.axes[0][static_cast<std::size_t>(d)] * normal[d];
      origin += grid.origin[static_cast<std::size_t>(d)] * normal[d];
    }
    std::vector<double> plane_cost(nx, 0.0);
    for (std::size_t a = 0; a < basis.atom_count(); ++a) {
      float cut = 0;
      for (int sh = basis.atom_first_shell[a]; sh < basis.atom_first_shell[a + 1]; ++sh)
        cut = std::max(cut, basis.shells[static_cast<std::size_t>(sh)].cutoff_r2);
      double h = 0;
      for (int d = 0; d < 3; ++d) h += basis.atom_xyz[3 * a + static_cast<std::size_t>(d)] * normal[d];
      for (std::size_t i = 0; i < nx; ++i) {
        const double dist = origin + static_cast<double>(i) * step - h;
        plane_cost[i] += std::max(0.0, static_cast<double>(cut) - dist * dist);
      }
    }
    std::vector<double> cost(chunks.size(), 0.0);
    for (std::size_t c = 0; c < chunks.size(); ++c)
      for (std::size_t i = chunks[c].first; i < chunks[c].first + chunks[c].second; ++i) cost[c] += plane_cost[i];
    std::vector<std::size_t> order(chunks.size());
    for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return cost[x] > cost[y]; });
    std::vector<std::pair<std::size_t, std::size_t>> sorted;
    for (const std::size_t c : order) sorted.push_back(chunks[c]);
    chunks = std::move(sorted);
  }
  return chunks;
}

std::string evaluate_chunks(WorkerContext& ctx, const GpuJob& job, detail::ChunkQueue& queue) {
  cuda::DeviceGuard guard(ctx.worker().device);
  const bool trace = trace_on();
  const double entered = trace ? now_seconds() : 0.0;
  DeviceState& st = job_state(ctx, job);
  const double initialised = trace ? now_seconds() : 0.0;
  const GridSpec& grid = *job.grid;
  const std::size_t plane_points = grid.counts[1] * grid.counts[2];
  const std::size_t n_points = grid.point_count();
  const std::size_t outputs = job.weights ? 1 : job.orbitals;
  const bool direct = cuda::is_page_locked(job.out);
  struct Pending {
    std::size_t chunk, slot;
  };
  std::vector<Pending> pending;  // claimed chunks whose copies are not known to be finished (<= 2)
  std::size_t claimed = 0;
  std::string first_chunks;
  auto finish_front = [&] {
    const Pending p = pending.front();
    st.copied[p.slot]->synchronize();
    if (!direct) {
      const auto& [p0, planes] = queue.chunk(p.chunk);
      drain_chunk(st.staging[p.slot].data(), job, p0, planes * plane_points, outputs);
    }
    pending.erase(pending.begin());
    queue.done(ctx.worker());
  };
  bool fallback = false;  // out of GPU memory: the rest of the share chunk by chunk, adaptively
  try {
    std::size_t largest = 0;
    for (std::size_t c = 0; c < queue.size(); ++c) largest = std::max(largest, queue.chunk(c).second);
    const std::size_t capacity = largest * plane_points * outputs;
    for (int b = 0; b < 2; ++b) {
      st.results[b].resize(capacity);
      if (!direct) st.ensure_staging(b, capacity);
    }
    for (std::size_t k = 0;; ++k) {
      // A result buffer (and staging buffer) is free again once the chunk that used it is out.
      if (pending.size() == 2) finish_front();
      std::size_t c = 0;
      if (!queue.take(ctx.worker(), c)) break;
      const std::size_t slot = k % 2;
      pending.push_back({c, slot});
      ++claimed;
      const auto [p0, planes] = queue.chunk(c);
      if (trace && first_chunks.size() < 200) first_chunks += fmt::format(fmt::runtime(" {}"), c);
      const std::size_t points = planes * plane_points;
      launch_planes(st, job, p0, planes, st.results[slot].data());
      st.computed[slot]->record(*st.stream);
      MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.copy_stream, st.computed[slot]->get(), 0));
      if (direct)
        MOLACCEL_CUDA_TRY(cudaMemcpy2DAsync(job.out + p0 * plane_points, n_points * sizeof(float), st.results[slot].data(),
                                            points * sizeof(float), points * sizeof(float), outputs,
                                            cudaMemcpyDeviceToHost, *st.copy_stream));
      else
        MOLACCEL_CUDA_TRY(cudaMemcpyAsync(st.staging[slot].data(), st.results[slot].data(),
                                          points * outputs * sizeof(float), cudaMemcpyDeviceToHost, *st.copy_stream));
      st.copied[slot]->record(*st.copy_stream);
      // Ordinary output: the host copies the previous chunk out of its staging buffer while this
      // one computes and copies.
      if (!direct && pending.size() == 2) finish_front();
    }
    while (!pending.empty()) finish_front();
  } catch (const CudaError& e) {
    cudaStreamSynchronize(*st.stream);
    cudaStreamSynchronize(*st.copy_stream);
    for (const auto& p : pending) queue.give_back(p.chunk);
    pending.clear();
    if (!e.is_out_of_memory()) throw;
    cudaGetLastError();  // clear the sticky allocation error
    for (int b = 0; b < 2; ++b) st.results[b].reset();
    log_warn("orbital: out of GPU memory on {}, the rest of its share chunk by chunk", ctx.worker().name());
    fallback = true;
  } catch (...) {
    // The chunks go to another worker; its copies must not race ours.
    cudaStreamSynchronize(*st.stream);
    cudaStreamSynchronize(*st.copy_stream);
    for (const auto& p : pending) queue.give_back(p.chunk);
    throw;
  }
  if (fallback) {
    std::size_t c = 0;
    while (queue.take(ctx.worker(), c)) {
      const auto [p0, planes] = queue.chunk(c);
      try {
        run_tile_adaptive(ctx, st, job, p0, p0 + planes);
      } catch (...) {
        queue.give_back(c);
        throw;
      }
      queue.done(ctx.worker());
      ++claimed;
    }
  }
  if (trace)
    trace_message("orbital", fmt::format(fmt::runtime("gpu{}: share of {} chunks ({}) from {:.3f} ms, set-up {:.3f} ms, "
                                                      "done at {:.3f} ms"),
                                         ctx.worker().device, claimed, first_chunks, std::fmod(entered * 1e3, 1e5),
                                         (initialised - entered) * 1e3, std::fmod(now_seconds() * 1e3, 1e5)));
  return kernel_name(st, job);
}

std::string evaluate_planes(WorkerContext& ctx, const GpuJob& job, std::size_t plane_begin, std::size_t plane_end) {
  cuda::DeviceGuard guard(ctx.worker().device);
  const bool trace = trace_on();
  const double entered = trace ? now_seconds() : 0.0;
  DeviceState& st = job_state(ctx, job);
  const double initialised = trace ? now_seconds() : 0.0;
  struct TraceLine {
    bool on;
    int device;
    std::size_t p0, p1;
    double entered, initialised;
    ~TraceLine() {
      if (on)
        trace_message("orbital", fmt::format(fmt::runtime("gpu{}: planes [{}, {}) from {:.3f} ms, set-up {:.3f} ms, "
                                                          "done at {:.3f} ms"),
                                             device, p0, p1, std::fmod(entered * 1e3, 1e5), (initialised - entered) * 1e3,
                                             std::fmod(now_seconds() * 1e3, 1e5)));
    }
  } trace_line{trace, ctx.worker().device, plane_begin, plane_end, entered, initialised};
  run_tile_adaptive(ctx, st, job, plane_begin, plane_end);
  return kernel_name(st, job);
}


double time_kernel(int device, const GpuJob& job, const std::string& kind, int repeats) {
  MOLACCEL_EXPECTS(kind == "jit" || kind == "generic" || kind == "density", "time_kernel: jit, generic or density");
  const bool density = kind == "density";
  MOLACCEL_EXPECTS(!density || job.weights != nullptr, "density timing needs a job with weights");
  cuda::DeviceGuard guard(device);
  DeviceState st;
  GpuJob local = job;
  local.jit = kind == "jit";
  st.init(local, device, local.jit);
  const GridSpec& grid = *job.grid;
  const std::size_t n_points = grid.point_count();
  st.result.resize(n_points);
  std::vector<float> times;
  for (int r = 0; r < repeats + 1; ++r) {  // first run warms up (JIT load, caches)
    cuda::Event start, stop;
    start.record(*st.stream);
    if (density) launch_sparse(st, local, 0, grid.counts[0], st.result.data(), n_points);
    else launch_orbital(st, local, 0, 0, grid.counts[0], st.result.data());
    stop.record(*st.stream);
    stop.synchronize();
    if (r > 0) times.push_back(stop.elapsed_ms_since(start));
  }
  std::sort(times.begin(), times.end());
  return times.empty() ? 0.0 : times[times.size() / 2];
}

}  // namespace molaccel::orbital::cuda_backend

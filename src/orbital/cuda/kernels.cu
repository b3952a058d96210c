// The orbital CUDA kernels (the JIT kernel is generated: jit_source.cpp):
//  * generic kernel: one thread per grid point, the packed basis and the orbital's Cartesian
//    coefficients staged in shared memory, loops over atoms/shells/primitives with screening;
//  * sparse basis-matrix kernel (many orbitals, densities): per brick of 128 points, the shells
//    that survive screening somewhere in the brick, their basis values in shared memory and a
//    register-tiled contraction with the gathered coefficient rows, fused with the density sum.
#include "orbital/cuda/kernels.cuh"

#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::orbital::cuda_backend {

namespace {

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

struct SharedBasis {
  double* atom_xyz;
  int* atom_first_shell;
  int4* shells;
  float* shell_cut;
  float4* primitives;
};

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

// h and i shells (l = 5, 6): their components in Gaussian order, x power ascending, then y
// (kCartesianPowers in basis_functions.hpp), so the monomials follow from two loops; f(c, m) is
// called with each component index and its monomial.
template <class F>
__device__ __forceinline__ void for_each_high_monomial(int l, float x, float y, float z, F f) {
  int c = 0;
  float xp = 1.0f;
  for (int a = 0; a <= l; ++a, xp *= x) {
    float yp = 1.0f;
    for (int b = 0; a + b <= l; ++b, yp *= y) {
      float zp = 1.0f;
      for (int e = a + b; e < l; ++e) zp *= z;
      f(c++, xp * yp * zp);
    }
  }
}

// sum_c coef[c] * monomial_c(dx, dy, dz) in basis component order.
__device__ __forceinline__ float angular_sum(int l, const float* c, float x, float y, float z) {
  switch (l) {
    case 0:
      return c[0];
    case 1:
      return c[0] * x + c[1] * y + c[2] * z;
    case 2:
      return c[0] * x * x + c[1] * y * y + c[2] * z * z + c[3] * x * y + c[4] * x * z + c[5] * y * z;
    case 3:
      return c[0] * x * x * x + c[1] * y * y * y + c[2] * z * z * z + c[3] * x * y * y + c[4] * x * x * y +
             c[5] * x * x * z + c[6] * x * z * z + c[7] * y * z * z + c[8] * y * y * z + c[9] * x * y * z;
    case 4:
      return c[0] * x * x * x * x + c[1] * y * y * y * y + c[2] * z * z * z * z + c[3] * x * x * x * y +
             c[4] * x * x * x * z + c[5] * y * y * y * x + c[6] * y * y * y * z + c[7] * z * z * z * x +
             c[8] * z * z * z * y + c[9] * x * x * y * y + c[10] * x * x * z * z + c[11] * y * y * z * z +
             c[12] * x * x * y * z + c[13] * y * y * x * z + c[14] * z * z * x * y;
    default: {
      float sum = 0.0f;
      for_each_high_monomial(l, x, y, z, [&](int k, float m) { sum += c[k] * m; });
      return sum;
    }
  }
}

// Monomials of one shell, written to column `p` of the basis matrix (pitch = points per row).
__device__ __forceinline__ void store_monomials(int l, float radial, float x, float y, float z, float* b,
                                                std::size_t pitch) {
  switch (l) {
    case 0:
      b[0] = radial;
      break;
    case 1:
      b[0] = radial * x;
      b[pitch] = radial * y;
      b[2 * pitch] = radial * z;
      break;
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
    case 4: {
      const float v[15] = {x * x * x * x, y * y * y * y, z * z * z * z, x * x * x * y, x * x * x * z,
                           y * y * y * x, y * y * y * z, z * z * z * x, z * z * z * y, x * x * y * y,
                           x * x * z * z, y * y * z * z, x * x * y * z, y * y * x * z, z * z * x * y};
      for (int c = 0; c < 15; ++c) b[c * pitch] = radial * v[c];
      break;
    }
    default:
      for_each_high_monomial(l, x, y, z, [&](int c, float m) { b[c * pitch] = radial * m; });
  }
}

// Generic kernel: one orbital, one point per thread, basis and coefficients in shared memory.
__global__ void __launch_bounds__(kPointsPerBlock)
    generic_orbital_kernel(BasisView basis, const float* coefficients, OrbitalGridArgs g, float* out) {
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
static_assert(kSparseK >= (max_angular_momentum + 1) * (max_angular_momentum + 2) / 2,
              "a chunk holds at least one whole shell of the highest l");

template <int R>
__global__ void __launch_bounds__(kSparseThreads, 1)
    sparse_contract_kernel(BasisView basis, const int* __restrict__ shell_atom, OrbitalGridArgs g, int planes,
                           BrickShape shape, const float* __restrict__ ct, int orbitals_padded, int orbitals,
                           const float* __restrict__ weights, float* __restrict__ out,
                           std::size_t out_pitch) {
  constexpr int kTileO = 16 * R;
  __shared__ __align__(16) float bs[kSparseK][kBrickPoints];
  __shared__ __align__(16) float cs[kSparseK][kTileO];
  __shared__ float rho[kBrickPoints];
  __shared__ int warp_count[kSparseThreads / 32];
  __shared__ int n_active_s, n_chunks_s;
  extern __shared__ int dyn[];
  int* active = dyn;                              // shell_count
  int* active_nc = active + basis.shell_count;    // shell_count
  int* comp_off = active_nc + basis.shell_count;  // shell_count + 1 (component offset of active shell j)
  int* chunk_begin = comp_off + basis.shell_count + 1;  // shell_count + 1
  int* comp_all = chunk_begin + basis.shell_count + 1;  // components

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int brick = blockIdx.x;
  const int bk = brick % shape.nbz, bj = (brick / shape.nbz) % shape.nby,
            bi = brick / (shape.nbz * shape.nby);
  const int i0 = bi * shape.bx, j0 = bj * shape.by, k0 = bk * shape.bz;  // i0 relative to g.plane_begin

  // Bounding sphere of the brick (all of its points, in range or not).
  double center[3];
  {
    const double ci = g.plane_begin + i0 + 0.5 * (shape.bx - 1), cj = j0 + 0.5 * (shape.by - 1),
                 ck = k0 + 0.5 * (shape.bz - 1);
    for (int d = 0; d < 3; ++d)
      center[d] = g.origin[d] + ci * g.axes[0][d] + cj * g.axes[1][d] + ck * g.axes[2][d];
  }
  double radius = 0.0;
  {
    const int ext[3] = {shape.bx - 1, shape.by - 1, shape.bz - 1};
    for (int e = 0; e < 3; ++e)
      radius += 0.5 * ext[e] *
                sqrt(g.axes[e][0] * g.axes[e][0] + g.axes[e][1] * g.axes[e][1] + g.axes[e][2] * g.axes[e][2]);
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
      const int qi = i0 + pp / (shape.by * shape.bz), qj = j0 + (pp / shape.bz) % shape.by,
                qk = k0 + pp % shape.bz;
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
          if (o < orbitals)
            out[static_cast<std::size_t>(o) * out_pitch + static_cast<std::size_t>(idx)] = acc[r][q];
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

}  // namespace

void check_shared_fits(std::size_t bytes, int device) {
  int optin = 0;
  MOLACCEL_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<std::size_t>(optin))
    throw Error(
        fmt::format("orbital basis set needs {} bytes of shared memory, the GPU has {} per block "
                    "(use the cpu backend for this basis set)",
                    bytes, optin));
}

void launch_generic_kernel(const BasisView& basis, const float* coefficients, const OrbitalGridArgs& g,
                           dim3 blocks, cudaStream_t stream, int device, float* out) {
  const std::size_t shared = generic_shared_bytes(basis);
  check_shared_fits(shared, device);
  MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(generic_orbital_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared)));
  generic_orbital_kernel<<<blocks, dim3(kPointsPerBlock), shared, stream>>>(basis, coefficients, g, out);
  MOLACCEL_CUDA_CHECK_LAUNCH("generic_orbital_kernel");
}

void launch_sparse_kernel(int width, const BasisView& basis, const int* shell_atom, const OrbitalGridArgs& g,
                          int planes, const BrickShape& shape, const float* ct, int orbitals_padded,
                          int orbitals, const float* weights, float* out, std::size_t out_pitch,
                          cudaStream_t stream, int device) {
  const std::size_t bricks = static_cast<std::size_t>(shape.nbx) * shape.nby * shape.nbz;
  const std::size_t dynamic = sparse_dynamic_bytes(basis);
  auto run = [&](auto kernel, const char* name) {
    cudaFuncAttributes attr{};
    MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&attr, kernel));
    check_shared_fits(attr.sharedSizeBytes + dynamic, device);
    MOLACCEL_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic)));
    kernel<<<static_cast<unsigned>(bricks), kSparseThreads, dynamic, stream>>>(
        basis, shell_atom, g, planes, shape, ct, orbitals_padded, orbitals, weights, out, out_pitch);
    MOLACCEL_CUDA_CHECK_LAUNCH(name);
  };
  if (width == 4)
    run(sparse_contract_kernel<4>, "sparse_contract_kernel<4>");
  else
    run(sparse_contract_kernel<12>, "sparse_contract_kernel<12>");
}

}  // namespace molaccel::orbital::cuda_backend

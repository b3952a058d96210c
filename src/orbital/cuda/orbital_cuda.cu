// CUDA backends of the orbital engine.
//  * generic kernel: one thread per grid point, the packed basis and the orbital's Cartesian
//    coefficients staged in shared memory, loops over atoms/shells/primitives with screening;
//  * JIT kernel: source from generate_jit_source() (basis folded in), compiled by NVRTC through
//    the runtime's JitCache and launched with cuda::launch;
//  * many orbitals / densities: basis values once per point into a (components x points) matrix,
//    then a register-tiled contraction with the coefficient matrix, fused with the density sum.
#include <algorithm>
#include <cfloat>
#include <memory>
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

// Basis values of `points` consecutive grid points starting at linear index `first_point`
// (plane-major), into b[component * pitch + point]; screened shells are written as zeros.
__global__ void __launch_bounds__(kPointsPerBlock) basis_values_kernel(BasisView basis, OrbitalGridArgs g,
                                                                       std::size_t first_point, int points,
                                                                       float* b, std::size_t pitch) {
  extern __shared__ __align__(16) unsigned char smem[];
  const SharedBasis s = stage_basis(basis, smem);
  __syncthreads();
  const int local = blockIdx.x * blockDim.x + threadIdx.x;
  if (local >= static_cast<int>(pitch)) return;
  float* column = b + local;
  if (local >= points) {
    for (int c = 0; c < basis.components; ++c) column[c * pitch] = 0.0f;
    return;
  }
  const std::size_t linear = first_point + local;
  const std::size_t plane = static_cast<std::size_t>(g.ny) * g.nz;
  const int i = static_cast<int>(linear / plane);
  const int j = static_cast<int>((linear % plane) / g.nz);
  const int k = static_cast<int>(linear % g.nz);
  double p[3];
  grid_point(g, i, j, k, p);
  for (int a = 0; a < basis.atoms; ++a) {
    const float x = static_cast<float>(p[0] - s.atom_xyz[3 * a]);
    const float y = static_cast<float>(p[1] - s.atom_xyz[3 * a + 1]);
    const float z = static_cast<float>(p[2] - s.atom_xyz[3 * a + 2]);
    const float r2 = x * x + y * y + z * z;
    for (int sh = s.atom_first_shell[a]; sh < s.atom_first_shell[a + 1]; ++sh) {
      const int4 shell = s.shells[sh];
      const float radial = r2 < s.shell_cut[sh] ? shell_radial(s, shell, r2) : 0.0f;
      store_monomials(shell.x, radial, x, y, z, column + shell.w * pitch, pitch);
    }
  }
}

// Contraction psi[o][p] = sum_c C[c][o] * B[c][p]: tiles of 128 points x (16 x R) orbitals,
// 256 threads with 8 points x R orbitals each (strided, so shared-memory reads are conflict-free
// or broadcasts), 8 components per shared-memory step loaded as float4. Density mode
// (weights != nullptr) sums w_o psi^2 over all orbital tiles in the block, so psi never leaves
// registers. B has `components_padded` rows (zero-padded), Ct is components_padded x
// orbitals_padded (orbitals_padded a multiple of 16 R).
constexpr int kTileP = 128, kTileK = 8;
template <int R>
__global__ void __launch_bounds__(256) contract_kernel(const float* __restrict__ b, std::size_t pitch,
                                                       const float* __restrict__ ct, int components_padded,
                                                       int orbitals_padded, const float* __restrict__ weights,
                                                       int points, float* __restrict__ out, std::size_t out_pitch) {
  constexpr int kTileO = 16 * R;
  __shared__ __align__(16) float bs[kTileK][kTileP];
  __shared__ __align__(16) float cs[kTileK][kTileO];
  __shared__ float rho[kTileP];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int p0 = blockIdx.x * kTileP;
  if (weights)
    for (int i = threadIdx.x; i < kTileP; i += blockDim.x) rho[i] = 0.0f;
  for (int o0 = 0; o0 < orbitals_padded; o0 += kTileO) {
    float acc[R][8];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[r][q] = 0.0f;
    for (int k0 = 0; k0 < components_padded; k0 += kTileK) {
      __syncthreads();
      {  // 8 x 128 floats of B: one float4 per thread
        const int kk = threadIdx.x / 32, pp = (threadIdx.x % 32) * 4;
        *reinterpret_cast<float4*>(&bs[kk][pp]) =
            *reinterpret_cast<const float4*>(&b[static_cast<std::size_t>(k0 + kk) * pitch + p0 + pp]);
      }
      for (int i = threadIdx.x; i < kTileK * kTileO / 4; i += blockDim.x) {
        const int kk = i / (kTileO / 4), oo = (i % (kTileO / 4)) * 4;
        *reinterpret_cast<float4*>(&cs[kk][oo]) =
            *reinterpret_cast<const float4*>(&ct[static_cast<std::size_t>(k0 + kk) * orbitals_padded + o0 + oo]);
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTileK; ++kk) {
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
    if (weights) {
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        float sum = 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) sum += weights[o0 + ty + 16 * r] * acc[r][q] * acc[r][q];
        atomicAdd(&rho[tx + 16 * q], sum);
      }
    } else {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const int p = p0 + tx + 16 * q;
          if (p < points) out[static_cast<std::size_t>(o0 + ty + 16 * r) * out_pitch + p] = acc[r][q];
        }
    }
  }
  if (weights) {
    __syncthreads();
    for (int i = threadIdx.x; i < kTileP; i += blockDim.x)
      if (p0 + i < points) out[p0 + i] = rho[i];
  }
}

// Orbitals per thread of the contraction: 4 (tiles of 64) for few orbitals, 12 (tiles of 192,
// e.g. C60's 180 occupied orbitals in one pass over the basis matrix) for many.
inline int contraction_width(std::size_t orbitals) { return orbitals <= 64 ? 4 : 12; }

// ---------------------------------------------------------------------------------------------
// Per-worker device state: the basis, coefficients and (for JIT) the loaded program, uploaded
// once per job and worker.
// ---------------------------------------------------------------------------------------------
struct DeviceState {
  bool ready = false;
  int device = -1;
  cuda::DeviceBuffer<double> atom_xyz;
  cuda::DeviceBuffer<int> atom_first_shell;
  cuda::DeviceBuffer<int4> shells;
  cuda::DeviceBuffer<float> shell_cut;
  cuda::DeviceBuffer<float4> primitives;
  cuda::DeviceBuffer<float> coefficients;     // orbitals x components (row per orbital)
  cuda::DeviceBuffer<float> coefficients_t;   // components_padded x orbitals_padded
  cuda::DeviceBuffer<float> weights;          // orbitals_padded
  cuda::DeviceBuffer<int2> atom_type_base;
  cuda::DeviceBuffer<float> basis_matrix;
  cuda::DeviceBuffer<float> result;
  std::unique_ptr<cuda::Stream> stream;
  std::unique_ptr<cuda::LoadedProgram> program;
  cudaKernel_t jit_kernel = nullptr;
  int jit_points_per_thread = 1;
  BasisView view{};
  int components_padded = 0, orbitals_padded = 0;
  std::size_t chunk_points = 0;  // basis-matrix columns per step (shrinks on out-of-memory)

  void init(const GpuJob& job, int dev, bool want_jit) {
    device = dev;
    const auto& basis = *job.basis;
    stream = std::make_unique<cuda::Stream>();
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
    const bool matrix_path = job.weights != nullptr || job.orbitals > 4;
    if (matrix_path) {
      components_padded = (basis.components + kTileK - 1) / kTileK * kTileK;
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
      // Basis matrix: at most ~512 MiB or a quarter of free memory.
      std::size_t free_bytes = 0, total = 0;
      MOLACCEL_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
      const std::size_t budget = std::min<std::size_t>(512u << 20, free_bytes / 4);
      chunk_points = std::max<std::size_t>(kTileP, budget / (sizeof(float) * components_padded) / kTileP * kTileP);
    } else if (want_jit) {
      const auto source = detail::generate_jit_source(basis);
      std::vector<int2> tb;
      for (std::size_t a = 0; a < basis.atom_count(); ++a) {
        const int first = basis.atom_first_shell[a];
        const int base = first < basis.atom_first_shell[a + 1] ? basis.shells[static_cast<std::size_t>(first)].first_component : 0;
        tb.push_back(make_int2(source.atom_type[a], base));
      }
      atom_type_base.upload(tb, *stream);
      JitRequest request;
      request.source = source.source;
      request.program_name = "molaccel_orbital_jit.cu";
      request.kernel_names = {source.kernel_name};
      cudaDeviceProp prop{};
      MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, dev));
      request.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
      const JitProgram compiled = default_jit_cache().compile(request);
      program = std::make_unique<cuda::LoadedProgram>(compiled);
      jit_kernel = program->kernel(source.kernel_name);
      jit_points_per_thread = source.points_per_thread;
    }
    stream->synchronize();
    ready = true;
  }

  std::size_t generic_shared_bytes() const {
    return shared_basis_bytes(view) + sizeof(float) * static_cast<std::size_t>(view.components);
  }
};

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
  const OrbitalGridArgs g = grid_args(grid, p0, job.basis->components);
  const dim3 block(kPointsPerBlock);
  const dim3 blocks(static_cast<unsigned>((grid.counts[2] + kPointsPerBlock - 1) / kPointsPerBlock),
                    static_cast<unsigned>(grid.counts[1]), static_cast<unsigned>(planes));
  const float* coef = st.coefficients.data() + o * job.basis->components;
  if (st.jit_kernel) {
    const std::size_t shared = sizeof(float) * job.basis->components;
    const std::size_t per_block = static_cast<std::size_t>(kPointsPerBlock) * st.jit_points_per_thread;
    const dim3 jit_blocks(static_cast<unsigned>((grid.counts[2] + per_block - 1) / per_block),
                          static_cast<unsigned>(grid.counts[1]), static_cast<unsigned>(planes));
    cuda::launch(st.jit_kernel, jit_blocks, block, shared, *st.stream, st.atom_xyz.data(), st.atom_type_base.data(),
                 st.view.atoms, coef, g, dst);
  } else {
    const std::size_t shared = st.generic_shared_bytes();
    check_shared_fits(shared, st.device);
    MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(generic_orbital_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared)));
    generic_orbital_kernel<<<blocks, block, shared, *st.stream>>>(st.view, coef, g, dst);
    MOLACCEL_CUDA_CHECK_LAUNCH("generic_orbital_kernel");
  }
}

// Basis matrix + contraction over points [first, first + count) of the grid into dst
// (density: dst[p]; orbitals: dst[o * dst_pitch + p]).
void launch_matrix(DeviceState& st, const GpuJob& job, std::size_t first, std::size_t count, float* dst,
                   std::size_t dst_pitch) {
  const GridSpec& grid = *job.grid;
  const OrbitalGridArgs g = grid_args(grid, 0, job.basis->components);
  const std::size_t shared = shared_basis_bytes(st.view);
  check_shared_fits(shared, st.device);
  MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(basis_values_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared)));
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(st.chunk_points, count - done);
    const std::size_t pitch = (n + kTileP - 1) / kTileP * kTileP;
    if (st.basis_matrix.size() < pitch * st.components_padded) {
      st.basis_matrix.resize(pitch * st.components_padded);
      st.basis_matrix.fill_zero(*st.stream);  // padded component rows stay zero
    }
    basis_values_kernel<<<static_cast<unsigned>(pitch / kPointsPerBlock), kPointsPerBlock, shared, *st.stream>>>(
        st.view, g, first + done, static_cast<int>(n), st.basis_matrix.data(), pitch);
    MOLACCEL_CUDA_CHECK_LAUNCH("basis_values_kernel");
    const unsigned blocks = static_cast<unsigned>(pitch / kTileP);
    const float* weights = job.weights ? st.weights.data() : nullptr;
    if (contraction_width(job.orbitals) == 4)
      contract_kernel<4><<<blocks, 256, 0, *st.stream>>>(st.basis_matrix.data(), pitch, st.coefficients_t.data(),
                                                          st.components_padded, st.orbitals_padded, weights,
                                                          static_cast<int>(n), dst + done, dst_pitch);
    else
      contract_kernel<12><<<blocks, 256, 0, *st.stream>>>(st.basis_matrix.data(), pitch, st.coefficients_t.data(),
                                                           st.components_padded, st.orbitals_padded, weights,
                                                           static_cast<int>(n), dst + done, dst_pitch);
    MOLACCEL_CUDA_CHECK_LAUNCH("contract_kernel");
    done += n;
  }
}

int current_device() {
  int dev = 0;
  MOLACCEL_CUDA_TRY(cudaGetDevice(&dev));
  return dev;
}

}  // namespace

std::string evaluate_planes(WorkerContext& ctx, const GpuJob& job, std::size_t plane_begin, std::size_t plane_end) {
  cuda::DeviceGuard guard(ctx.worker().device);
  DeviceState& st = ctx.local<DeviceState>();
  if (!st.ready) st.init(job, ctx.worker().device, job.jit);
  const GridSpec& grid = *job.grid;
  const std::size_t plane_points = grid.counts[1] * grid.counts[2];
  const std::size_t n_points = grid.point_count();
  const bool matrix_path = job.weights != nullptr || job.orbitals > 4;
  // Out of memory: halve the planes per launch and retry inside the tile.
  std::size_t step = plane_end - plane_begin;
  for (std::size_t p = plane_begin; p < plane_end;) {
    const std::size_t planes = std::min(step, plane_end - p);
    try {
      const std::size_t points = planes * plane_points;
      const std::size_t outputs = job.weights ? 1 : job.orbitals;
      st.result.resize(points * outputs);
      if (matrix_path) {
        launch_matrix(st, job, p * plane_points, points, st.result.data(), points);
      } else {
        for (std::size_t o = 0; o < job.orbitals; ++o) launch_orbital(st, job, o, p, planes, st.result.data() + o * points);
      }
      // Results back to the host rows of this tile: one strided copy per output field.
      MOLACCEL_CUDA_TRY(cudaMemcpy2DAsync(job.out + p * plane_points, n_points * sizeof(float), st.result.data(),
                                          points * sizeof(float), points * sizeof(float), outputs,
                                          cudaMemcpyDeviceToHost, *st.stream));
      st.stream->synchronize();
      p += planes;
    } catch (const CudaError& e) {
      if (!e.is_out_of_memory() || (step == 1 && st.chunk_points <= kTileP)) throw;
      cudaGetLastError();  // clear the sticky allocation error
      st.result.reset();
      st.basis_matrix.reset();
      if (step > 1) step = std::max<std::size_t>(1, step / 2);
      else st.chunk_points = std::max<std::size_t>(kTileP, st.chunk_points / 2);
      log_warn("orbital: out of GPU memory on {}, retrying with {} plane(s) per launch", ctx.worker().name(), step);
    }
  }
  if (matrix_path) return job.weights ? "cuda/basis-matrix+density" : "cuda/basis-matrix";
  return st.jit_kernel ? "cuda/jit" : "cuda/generic";
}

double time_kernel(int device, const GpuJob& job, const std::string& kind, int repeats) {
  cuda::DeviceGuard guard(device);
  DeviceState st;
  GpuJob local = job;
  local.jit = kind == "jit";
  st.init(local, device, local.jit);
  const GridSpec& grid = *job.grid;
  const std::size_t n_points = grid.point_count();
  MOLACCEL_EXPECTS(kind != "density" || st.chunk_points > 0, "density timing needs a job with weights");
  st.result.resize(n_points);
  std::vector<float> times;
  for (int r = 0; r < repeats + 1; ++r) {  // first run warms up (JIT load, caches)
    cuda::Event start, stop;
    start.record(*st.stream);
    if (kind == "density") launch_matrix(st, local, 0, n_points, st.result.data(), n_points);
    else launch_orbital(st, local, 0, 0, grid.counts[0], st.result.data());
    stop.record(*st.stream);
    stop.synchronize();
    if (r > 0) times.push_back(stop.elapsed_ms_since(start));
  }
  std::sort(times.begin(), times.end());
  (void)current_device;
  return times.empty() ? 0.0 : times[times.size() / 2];
}

}  // namespace molaccel::orbital::cuda_backend

// The CPU kernel as it was before 2026-11-22 (round 3), kept in the benchmark only, to time the
// current kernel against it in the same process (bench_orbital_cpu). Compiled for AVX-512 with the
// library's previous flags (-O3 -fopenmp-simd); not part of the library.
#define MOLACCEL_ISA_NAMESPACE previous_kernel
// CPU kernel, compiled once per instruction set (MOLACCEL_ISA_NAMESPACE): points are processed in
// blocks of kLanes consecutive points of a grid row, so every inner loop runs over the lanes and
// vectorises. Per block: basis values of the shells inside their screening radius (once), then
// the contraction with the orbitals' Cartesian coefficients (one orbital or many, or a density).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "orbital/basis_functions.hpp"
#include "orbital/cpu/cpu_kernel.hpp"

#ifndef MOLACCEL_ISA_NAMESPACE
#define MOLACCEL_ISA_NAMESPACE isa_scalar
#endif

namespace molaccel::orbital::cpu::MOLACCEL_ISA_NAMESPACE {

namespace {

constexpr int kLanes = 16;

// exp(x) for x <= 0 in fp32, branch-free: the argument is clamped at -87.3 so the result stays a
// normal float (no denormal slow path on underflow; the clamped value, ~1e-38, is far below any
// screening tolerance). Range reduction x = n ln2 + r with ln2 split in two, degree-6 Taylor on
// |r| <= ln2/2 (truncation error < 2e-7 relative), scale by 2^n through the exponent bits.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.3f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

struct Scratch {
  std::vector<float> basis;           // components x kLanes
  std::vector<int> active_shells;     // packed shells evaluated for this block
  std::vector<float> accumulator;     // orbitals x kLanes (orbital mode)
};

}  // namespace

void evaluate_rows(const KernelArgs& args, std::size_t row_begin, std::size_t row_end) {
  const detail::PackedBasis& basis = *args.basis;
  const GridSpec& grid = *args.grid;
  const std::size_t nz = grid.counts[2];
  const std::size_t n_points = grid.point_count();
  const std::size_t n_components = static_cast<std::size_t>(basis.components);
  thread_local Scratch scratch;
  scratch.basis.resize(n_components * kLanes);
  scratch.active_shells.reserve(basis.shells.size());
  const std::size_t n_atoms = basis.atom_count();

  // Cartesian powers per component, by l, for the angular loop.
  int powers[5][15][3];
  for (int l = 0; l <= 4; ++l) {
    const auto& p = detail::cartesian_powers(l);
    for (std::size_t c = 0; c < p.size(); ++c) {
      powers[l][c][0] = p[c].x;
      powers[l][c][1] = p[c].y;
      powers[l][c][2] = p[c].z;
    }
  }

  alignas(64) float dx[kLanes], dy[kLanes], dz[kLanes], r2[kLanes], radial[kLanes];
  alignas(64) float xp[5][kLanes], yp[5][kLanes], zp[5][kLanes];
  alignas(64) float psi[kLanes], rho[kLanes];

  for (std::size_t row = row_begin; row < row_end; ++row) {
    const std::size_t i = row / grid.counts[1], j = row % grid.counts[1];
    double base[3];
    for (int d = 0; d < 3; ++d)
      base[d] = grid.origin[d] + static_cast<double>(i) * grid.axes[0][d] + static_cast<double>(j) * grid.axes[1][d];
    for (std::size_t k0 = 0; k0 < nz; k0 += kLanes) {
      const std::size_t lanes = std::min<std::size_t>(kLanes, nz - k0);
      scratch.active_shells.clear();
      for (std::size_t a = 0; a < n_atoms; ++a) {
        // Offsets in double, rounded once: fp32 r^2 then carries only its own rounding error even
        // for points far from the origin (a tight exponent amplifies errors in r^2).
        const double ax = base[0] - basis.atom_xyz[3 * a], ay = base[1] - basis.atom_xyz[3 * a + 1],
                     az = base[2] - basis.atom_xyz[3 * a + 2];
        float r2_min = INFINITY;
        for (int lane = 0; lane < kLanes; ++lane) {
          const double k = static_cast<double>(k0 + std::min<std::size_t>(static_cast<std::size_t>(lane), lanes - 1));
          dx[lane] = static_cast<float>(ax + k * grid.axes[2][0]);
          dy[lane] = static_cast<float>(ay + k * grid.axes[2][1]);
          dz[lane] = static_cast<float>(az + k * grid.axes[2][2]);
          r2[lane] = dx[lane] * dx[lane] + dy[lane] * dy[lane] + dz[lane] * dz[lane];
          r2_min = std::min(r2_min, r2[lane]);
        }
        bool powers_ready = false;
        for (int s = basis.atom_first_shell[a]; s < basis.atom_first_shell[a + 1]; ++s) {
          const detail::PackedShell& shell = basis.shells[static_cast<std::size_t>(s)];
          if (r2_min >= shell.cutoff_r2) continue;
          for (int lane = 0; lane < kLanes; ++lane) radial[lane] = 0;
          for (int q = 0; q < shell.primitive_count; ++q) {
            const std::size_t p = static_cast<std::size_t>(shell.first_primitive + q);
            if (r2_min >= basis.cutoff_r2[p]) continue;
            const float alpha = -basis.exponent[p], coef = basis.coefficient[p];
#pragma omp simd
            for (int lane = 0; lane < kLanes; ++lane) radial[lane] += coef * exp_nonpositive(alpha * r2[lane]);
          }
          if (!powers_ready && basis.max_l > 0) {
            for (int lane = 0; lane < kLanes; ++lane) {
              xp[0][lane] = yp[0][lane] = zp[0][lane] = 1.0f;
              xp[1][lane] = dx[lane];
              yp[1][lane] = dy[lane];
              zp[1][lane] = dz[lane];
            }
            for (int e = 2; e <= basis.max_l; ++e)
              for (int lane = 0; lane < kLanes; ++lane) {
                xp[e][lane] = xp[e - 1][lane] * dx[lane];
                yp[e][lane] = yp[e - 1][lane] * dy[lane];
                zp[e][lane] = zp[e - 1][lane] * dz[lane];
              }
            powers_ready = true;
          }
          float* out = &scratch.basis[static_cast<std::size_t>(shell.first_component) * kLanes];
          if (shell.l == 0) {
            for (int lane = 0; lane < kLanes; ++lane) out[lane] = radial[lane];
          } else {
            const int n_comp = detail::cartesian_count(shell.l);
            for (int c = 0; c < n_comp; ++c) {
              const float* px = xp[powers[shell.l][c][0]];
              const float* py = yp[powers[shell.l][c][1]];
              const float* pz = zp[powers[shell.l][c][2]];
#pragma omp simd
              for (int lane = 0; lane < kLanes; ++lane) out[c * kLanes + lane] = radial[lane] * px[lane] * py[lane] * pz[lane];
            }
          }
          scratch.active_shells.push_back(s);
        }
      }
      // Contraction with the orbital coefficients over the active shells only.
      for (int lane = 0; lane < kLanes; ++lane) rho[lane] = 0;
      for (std::size_t o = 0; o < args.orbitals; ++o) {
        const float* coef = args.coefficients + o * n_components;
        for (int lane = 0; lane < kLanes; ++lane) psi[lane] = 0;
        for (int s : scratch.active_shells) {
          const detail::PackedShell& shell = basis.shells[static_cast<std::size_t>(s)];
          const int n_comp = detail::cartesian_count(shell.l);
          for (int c = 0; c < n_comp; ++c) {
            const float w = coef[shell.first_component + c];
            const float* b = &scratch.basis[static_cast<std::size_t>(shell.first_component + c) * kLanes];
#pragma omp simd
            for (int lane = 0; lane < kLanes; ++lane) psi[lane] += w * b[lane];
          }
        }
        if (args.weights) {
          const float w = args.weights[o];
          for (int lane = 0; lane < kLanes; ++lane) rho[lane] += w * psi[lane] * psi[lane];
        } else {
          float* dst = args.out + o * n_points + row * nz + k0;
          for (std::size_t lane = 0; lane < lanes; ++lane) dst[lane] = psi[lane];
        }
      }
      if (args.weights) {
        float* dst = args.out + row * nz + k0;
        for (std::size_t lane = 0; lane < lanes; ++lane) dst[lane] = rho[lane];
      }
    }
  }
}

}  // namespace molaccel::orbital::cpu::MOLACCEL_ISA_NAMESPACE

// CPU kernel, compiled once per instruction set (MOLACCEL_ISA_NAMESPACE). Points are processed in
// tiles of one plane held in one native vector register (GCC vector extensions): 4 rows x 4 columns
// with AVX-512 (16 lanes), 2 x 4 with AVX2, 2 x 2 in the baseline SSE2 build; tiles are aligned to
// the grid. Every arithmetic step is a vector instruction (exp() and offset loops written as
// `omp simd` lane loops were compiled to scalar code by GCC 12). Per tile:
//  1. atom culling: an atom is skipped when the tile's bounding sphere is beyond the atom's largest
//     screening radius (every point would have screened out all of its primitives); the distances
//     of all atoms to the tile centre come from per-row terms, |w + s u|^2 = A + s (2B + s |u|^2);
//  2. per kept atom, one exp() per distinct exponent (PackedBasis::groups: the s and p shells of a
//     Pople sp shell share their exponentials), groups in decreasing screening radius, stopping at
//     the first one out of reach; then each shell within reach sums its primitives' coefficients
//     times their group's exponential;
//  3. one orbital: psi += radial x (sum_c C_c x^i y^j z^k), the angular sum per shell unrolled for
//     its l at compile time; several orbitals or a density: basis values of the active shells
//     (once), then the contraction with the orbitals, four at a time.
// Screening decisions are per tile, from the distance of the tile's bounding sphere to the atom (a
// lower bound on every point's distance), so a primitive is skipped only where every point of the
// tile is beyond its radius. Tiles are aligned to the grid (rows j0 = j - j % kRows), so a value
// never depends on how the rows were split among threads or tiles.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "orbital/basis_functions.hpp"
#include "orbital/cpu/cpu_kernel.hpp"

#ifndef MOLACCEL_ISA_NAMESPACE
#define MOLACCEL_ISA_NAMESPACE isa_scalar
#endif

namespace molaccel::orbital::cpu::MOLACCEL_ISA_NAMESPACE {

namespace {

// One native register per value: 16 lanes (4 x 4 tile) with AVX-512, 8 (2 x 4) with AVX2, 4
// (2 x 2) in the baseline SSE2 build. (A 64-byte vector type in the narrower builds was 2-4x
// slower: GCC 12 lowers scalar broadcasts, compare-and-select and integer shifts of a vector wider
// than the registers lane by lane.)
#if defined(__AVX512F__)
constexpr int kLanes = 16, kRows = 4;
#elif defined(__AVX2__)
constexpr int kLanes = 8, kRows = 2;
#else
constexpr int kLanes = 4, kRows = 2;
#endif
constexpr int kCols = kLanes / kRows;  // tile: kRows rows x kCols columns (k fastest)
static_assert(static_cast<int>(kTileRows) % kRows == 0, "strips of kTileRows rows hold whole tiles");
static_assert(::molaccel::orbital::max_angular_momentum == 6, "the shell switches below cover l = 0..6");

using V = float __attribute__((vector_size(kLanes * 4)));
using VI = std::int32_t __attribute__((vector_size(kLanes * 4)));

inline V splat(float s) {
  return V{} + s;
}
inline V max_with(V x, float lo) {
  return x < lo ? splat(lo) : x;
}
inline V shift_left_23(V t) {
  return std::bit_cast<V>(std::bit_cast<VI>(t) << 23);
}

// exp(x) for x <= 0 in fp32, branch-free: the argument is clamped at -87.3 so the result stays a
// normal float (exp(-87.3) = 1.3e-38 > FLT_MIN; no denormal slow path on underflow; the clamped
// value is far below any screening tolerance). x = n ln2 + r with n = round(x log2 e) (the 1.5 x
// 2^23 shifter, with the exponent bias 127 folded in, so the bits of t hold n + 127 and shifting
// them left by 23 gives 2^n), ln2 split in two, |r| <= ln2/2, and p(r) = 1 + r q(r) with q of
// degree 4 fitted for minimax relative error on that interval (9.2e-8 in exact arithmetic). Max
// relative error of the fp32 evaluation against double exp over [-87.3, 0]: 1.6e-7 with FMA,
// 1.8e-7 without (tests/orbital/test_cpu.cpp checks < 2e-7); a degree-6 Taylor polynomial, one
// FMA more, measured 2.3e-7 / 2.5e-7.
inline V exp_nonpositive(V x) {
  x = max_with(x, -87.3f);
  const V shifter = splat(12582912.0f + 127.0f);
  const V t = x * splat(1.44269504088896341f) + shifter;
  const V n = t - shifter;
  const V r = (x - n * splat(0.693145751953125f)) - n * splat(1.42860682030941723e-06f);
  V p = splat(8.290280588e-03f);
  p = p * r + splat(4.189818352e-02f);
  p = p * r + splat(1.666763872e-01f);
  p = p * r + splat(4.999914765e-01f);
  p = p * r + splat(9.999997020e-01f);
  p = p * r + splat(1.0f);
  return p * shift_left_23(t);
}

// Cartesian powers in basis order: kCartesianPowers (basis_functions.hpp).
constexpr auto& kPowers = ::molaccel::orbital::detail::kCartesianPowers;
constexpr int kMaxL = ::molaccel::orbital::max_angular_momentum;

struct Powers {
  V x[kMaxL + 1], y[kMaxL + 1], z[kMaxL + 1];  // x[e] = dx^e (x[0] unused: monomials skip zero powers)
};

template <int I, int J, int K>
inline V monomial(const Powers& p) {
  if constexpr (I + J + K == 0) {
    return splat(1.0f);
  } else if constexpr (I > 0) {
    V m = p.x[I];
    if constexpr (J > 0) m *= p.y[J];
    if constexpr (K > 0) m *= p.z[K];
    return m;
  } else if constexpr (J > 0) {
    V m = p.y[J];
    if constexpr (K > 0) m *= p.z[K];
    return m;
  } else {
    return p.z[K];
  }
}

// sum_c C[c] x^i y^j z^k over the Cartesian components of shell type L.
template <int L, std::size_t... C>
inline V angular_sum(const float* coef, const Powers& p, std::index_sequence<C...>) {
  return ((splat(coef[C]) * monomial<kPowers[L][C][0], kPowers[L][C][1], kPowers[L][C][2]>(p)) + ...);
}
template <int L>
inline V angular_sum(const float* coef, const Powers& p) {
  return angular_sum<L>(coef, p, std::make_index_sequence<static_cast<std::size_t>((L + 1) * (L + 2) / 2)>{});
}

// out[c] = radial x^i y^j z^k for the Cartesian components of shell type L.
template <int L, std::size_t... C>
inline void basis_values(V radial, const Powers& p, V* out, std::index_sequence<C...>) {
  ((out[C] = radial * monomial<kPowers[L][C][0], kPowers[L][C][1], kPowers[L][C][2]>(p)), ...);
}
template <int L>
inline void basis_values(V radial, const Powers& p, V* out) {
  basis_values<L>(radial, p, out,
                  std::make_index_sequence<static_cast<std::size_t>((L + 1) * (L + 2) / 2)>{});
}

struct Scratch {
  std::vector<V> basis;            // one vector per Cartesian component (several orbitals / density)
  std::vector<int> active_shells;  // shells with basis values in this tile
  std::vector<int> active_components;
  std::vector<V> exps;  // per exponent group of the current atom
  // Squared distances from a tile centre within which an atom, group, shell or primitive may be
  // non-zero somewhere in the tile: (sqrt(cutoff_r2) + tile radius)^2.
  std::vector<double> atom_reach2, group_reach2, shell_reach2, primitive_reach2;
  // Per atom, for the current tile row: w = row base - atom, A = |w|^2, B = w . u (u: column step).
  std::vector<double> wx, wy, wz, wa, wb;
  std::vector<int> kept;
};

// Flush-to-zero and denormals-are-zero while the kernel runs: a product of a tiny exponential and a
// small coefficient or angular factor (|value| < 1.2e-38, far below any tolerance) then costs no
// microcode assist. Restored on exit.
class FlushDenormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  FlushDenormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | 0x8040u);
  }
  ~FlushDenormals() {
    _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
#endif
};

}  // namespace

void evaluate_rows(const KernelArgs& args, std::size_t row_begin, std::size_t row_end) {
  const detail::PackedBasis& basis = *args.basis;
  const GridSpec& grid = *args.grid;
  const std::size_t ny = grid.counts[1], nz = grid.counts[2];
  const std::size_t n_points = grid.point_count();
  const std::size_t n_atoms = basis.atom_count();
  const bool single = args.orbitals == 1 && args.weights == nullptr;
  if (row_begin >= row_end) return;
  const FlushDenormals flush;

  thread_local Scratch scratch;
  if (!single) scratch.basis.resize(static_cast<std::size_t>(basis.components));
  scratch.active_shells.reserve(basis.shells.size());
  scratch.active_components.reserve(static_cast<std::size_t>(basis.components));
  std::size_t max_groups = 0;
  for (std::size_t a = 0; a < n_atoms; ++a)
    max_groups = std::max<std::size_t>(
        max_groups, static_cast<std::size_t>(basis.atom_first_group[a + 1] - basis.atom_first_group[a]));
  scratch.exps.resize(std::max<std::size_t>(max_groups, 1));

  // Lane offsets from the tile centre (double, rounded once) and the tile's bounding radius.
  V t[3];
  double radius = 0;
  for (int lane = 0; lane < kLanes; ++lane) {
    const double a = (lane / kCols) - 0.5 * (kRows - 1), b = (lane % kCols) - 0.5 * (kCols - 1);
    double len2 = 0;
    for (int d = 0; d < 3; ++d) {
      const double v = a * grid.axes[1][d] + b * grid.axes[2][d];
      t[d][lane] = static_cast<float>(v);
      len2 += v * v;
    }
    radius = std::max(radius, std::sqrt(len2));
  }
  // Same margin as the GPU culling: 1e-3 bohr covers the rounding of the double distances and of
  // the fp32 offsets, so an atom, shell or primitive is dropped only where every point of the tile
  // is beyond its screening radius (where the per-point rule would have dropped it too).
  radius += 1e-3;
  auto reach2 = [radius](float cutoff_r2) {
    const double reach = std::sqrt(static_cast<double>(cutoff_r2)) + radius;
    return reach * reach;
  };
  auto fill = [&](std::vector<double>& dst, const auto& src, auto cut) {
    dst.resize(src.size());
    for (std::size_t x = 0; x < src.size(); ++x) dst[x] = reach2(cut(src[x]));
  };
  fill(scratch.atom_reach2, basis.atom_cutoff_r2, [](float c) { return c; });
  fill(scratch.group_reach2, basis.groups, [](const detail::ExponentGroup& g) { return g.cutoff_r2; });
  fill(scratch.shell_reach2, basis.shells, [](const detail::PackedShell& s) { return s.cutoff_r2; });
  fill(scratch.primitive_reach2, basis.cutoff_r2, [](float c) { return c; });
  for (auto* v : {&scratch.wx, &scratch.wy, &scratch.wz, &scratch.wa, &scratch.wb}) v->resize(n_atoms);
  scratch.kept.resize(n_atoms);

  const double* __restrict atom_reach2 = scratch.atom_reach2.data();
  const double* __restrict group_reach2 = scratch.group_reach2.data();
  const double* __restrict shell_reach2 = scratch.shell_reach2.data();
  const double* __restrict primitive_reach2 = scratch.primitive_reach2.data();
  double* __restrict wx = scratch.wx.data();
  double* __restrict wy = scratch.wy.data();
  double* __restrict wz = scratch.wz.data();
  double* __restrict wa = scratch.wa.data();
  double* __restrict wb = scratch.wb.data();
  int* __restrict kept = scratch.kept.data();
  V* __restrict exps = scratch.exps.data();
  V* __restrict basis_values_out = scratch.basis.data();
  const detail::ExponentGroup* __restrict groups = basis.groups.data();
  const detail::PackedShell* __restrict shells = basis.shells.data();
  const float* __restrict prim_coef = basis.coefficient.data();
  const int* __restrict prim_group = basis.primitive_group.data();
  const int* __restrict atom_first_shell = basis.atom_first_shell.data();
  const int* __restrict atom_first_group = basis.atom_first_group.data();
  const double* __restrict atom_xyz = basis.atom_xyz.data();
  const double u[3] = {grid.axes[2][0], grid.axes[2][1], grid.axes[2][2]};
  const double uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];

  alignas(64) float lanes_out[kLanes];
  const std::size_t first_tile_row = row_begin - (row_begin % ny) % kRows;  // aligned to j
  for (std::size_t tile_row = first_tile_row; tile_row < row_end;) {
    const std::size_t i = tile_row / ny, j0 = tile_row % ny;
    // Rows of this tile that exist (inside the plane) and are ours.
    const std::size_t rows_in_plane = std::min<std::size_t>(kRows, ny - j0);
    const std::size_t r_lo = row_begin > tile_row ? row_begin - tile_row : 0;
    const std::size_t r_hi = std::min<std::size_t>(rows_in_plane, row_end - tile_row);
    // Tile centre at column k0: row_base + s u with s = k0 + (kCols - 1) / 2.
    double row_base[3];
    for (int d = 0; d < 3; ++d)
      row_base[d] = grid.origin[d] + static_cast<double>(i) * grid.axes[0][d] +
                    (static_cast<double>(j0) + 0.5 * (kRows - 1)) * grid.axes[1][d];
    for (std::size_t a = 0; a < n_atoms; ++a) {
      wx[a] = row_base[0] - atom_xyz[3 * a];
      wy[a] = row_base[1] - atom_xyz[3 * a + 1];
      wz[a] = row_base[2] - atom_xyz[3 * a + 2];
      wa[a] = wx[a] * wx[a] + wy[a] * wy[a] + wz[a] * wz[a];
      wb[a] = 2.0 * (wx[a] * u[0] + wy[a] * u[1] + wz[a] * u[2]);
    }
    for (std::size_t k0 = 0; k0 < nz; k0 += kCols) {
      const std::size_t cols = std::min<std::size_t>(kCols, nz - k0);
      const double s = static_cast<double>(k0) + 0.5 * (kCols - 1);
      // Atoms within reach of the tile: |w + s u|^2 = A + s (2B + s |u|^2); branch-free compaction.
      int n_kept = 0;
      for (std::size_t a = 0; a < n_atoms; ++a) {
        const double d2 = wa[a] + s * (wb[a] + s * uu);
        kept[n_kept] = static_cast<int>(a);
        n_kept += d2 < atom_reach2[a] ? 1 : 0;
      }
      V psi = V{};
      if (!single) scratch.active_shells.clear();
      for (int ka = 0; ka < n_kept; ++ka) {
        const std::size_t a = static_cast<std::size_t>(kept[ka]);
        const double cx = wx[a] + s * u[0], cy = wy[a] + s * u[1], cz = wz[a] + s * u[2];
        const double d2 = cx * cx + cy * cy + cz * cz;
        // Offsets point - atom: centre - atom rounded once, plus the lane offset (|t| <= 0.3 bohr
        // for a 4 x 4 tile at 0.14 bohr spacing): error <= 2^-24 (|centre - atom| + 2|t|), about
        // that of rounding the double offset itself; next to a nucleus <= ~4e-8 bohr.
        const V dx = splat(static_cast<float>(cx)) + t[0], dy = splat(static_cast<float>(cy)) + t[1],
                dz = splat(static_cast<float>(cz)) + t[2];
        const V r2 = dx * dx + dy * dy + dz * dz;
        // Exponentials of the groups within reach (a prefix: sorted by decreasing cutoff).
        const int g0 = atom_first_group[a], g1 = atom_first_group[a + 1];
        for (int g = g0; g < g1 && d2 < group_reach2[g]; ++g)
          exps[g - g0] = exp_nonpositive(r2 * splat(-groups[g].exponent));
        Powers p;
        bool powers_ready = false;
        for (int sh = atom_first_shell[a]; sh < atom_first_shell[a + 1]; ++sh) {
          if (d2 >= shell_reach2[sh]) continue;
          const detail::PackedShell& shell = shells[sh];
          // A primitive within reach has its group within reach (group cutoff = max of its
          // primitives'), so its exponential is in exps.
          V radial = V{};
          for (int q = shell.first_primitive; q < shell.first_primitive + shell.primitive_count; ++q)
            if (d2 < primitive_reach2[q]) radial += splat(prim_coef[q]) * exps[prim_group[q]];
          if (shell.l > 0 && !powers_ready) {
            p.x[1] = dx;
            p.y[1] = dy;
            p.z[1] = dz;
            for (int e = 2; e <= basis.max_l; ++e) {
              p.x[e] = p.x[e - 1] * dx;
              p.y[e] = p.y[e - 1] * dy;
              p.z[e] = p.z[e - 1] * dz;
            }
            powers_ready = true;
          }
          if (single) {
            const float* c = args.coefficients + shell.first_component;
            switch (shell.l) {
              case 0:
                psi += radial * splat(c[0]);
                break;
              case 1:
                psi += radial * angular_sum<1>(c, p);
                break;
              case 2:
                psi += radial * angular_sum<2>(c, p);
                break;
              case 3:
                psi += radial * angular_sum<3>(c, p);
                break;
              case 4:
                psi += radial * angular_sum<4>(c, p);
                break;
              case 5:
                psi += radial * angular_sum<5>(c, p);
                break;
              default:
                psi += radial * angular_sum<6>(c, p);
                break;
            }
          } else {
            V* out = basis_values_out + shell.first_component;
            switch (shell.l) {
              case 0:
                out[0] = radial;
                break;
              case 1:
                basis_values<1>(radial, p, out);
                break;
              case 2:
                basis_values<2>(radial, p, out);
                break;
              case 3:
                basis_values<3>(radial, p, out);
                break;
              case 4:
                basis_values<4>(radial, p, out);
                break;
              case 5:
                basis_values<5>(radial, p, out);
                break;
              default:
                basis_values<6>(radial, p, out);
                break;
            }
            scratch.active_shells.push_back(sh);
          }
        }
      }

      auto store = [&](float* dst_plane, V value) {
        std::memcpy(lanes_out, &value, sizeof(lanes_out));
        for (std::size_t r = r_lo; r < r_hi; ++r)
          std::memcpy(dst_plane + (tile_row + r) * nz + k0, lanes_out + r * kCols, cols * sizeof(float));
      };
      if (single) {
        store(args.out, psi);
        continue;
      }
      // Contraction with the orbital coefficients over the active components only, four orbitals
      // at a time (four independent accumulators share each basis vector: the FMA chains overlap).
      scratch.active_components.clear();
      for (int sh : scratch.active_shells) {
        const detail::PackedShell& shell = shells[sh];
        for (int c = 0; c < detail::cartesian_count(shell.l); ++c)
          scratch.active_components.push_back(shell.first_component + c);
      }
      const int* __restrict comps = scratch.active_components.data();
      const std::size_t n_comps = scratch.active_components.size();
      const std::size_t stride = static_cast<std::size_t>(basis.components);
      V rho = V{};
      auto finish = [&](std::size_t o, V value) {
        if (args.weights)
          rho += splat(args.weights[o]) * value * value;
        else
          store(args.out + o * n_points, value);
      };
      std::size_t o = 0;
      for (; o + 4 <= args.orbitals; o += 4) {
        const float* __restrict c0 = args.coefficients + o * stride;
        const float* __restrict c1 = c0 + stride;
        const float* __restrict c2 = c1 + stride;
        const float* __restrict c3 = c2 + stride;
        V v0 = V{}, v1 = V{}, v2 = V{}, v3 = V{};
        for (std::size_t x = 0; x < n_comps; ++x) {
          const int c = comps[x];
          const V b = basis_values_out[c];
          v0 += splat(c0[c]) * b;
          v1 += splat(c1[c]) * b;
          v2 += splat(c2[c]) * b;
          v3 += splat(c3[c]) * b;
        }
        finish(o, v0);
        finish(o + 1, v1);
        finish(o + 2, v2);
        finish(o + 3, v3);
      }
      for (; o < args.orbitals; ++o) {
        const float* __restrict c0 = args.coefficients + o * stride;
        V v0 = V{};
        for (std::size_t x = 0; x < n_comps; ++x) v0 += splat(c0[comps[x]]) * basis_values_out[comps[x]];
        finish(o, v0);
      }
      if (args.weights) store(args.out, rho);
    }
    tile_row += rows_in_plane;
  }
}

void exp_nonpositive(const float* x, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += kLanes) {
    alignas(64) float lanes[kLanes] = {};
    const std::size_t m = std::min<std::size_t>(kLanes, n - i);
    std::memcpy(lanes, x + i, m * sizeof(float));
    const V y = exp_nonpositive(std::bit_cast<V>(lanes));
    std::memcpy(out + i, &y, m * sizeof(float));
  }
}

}  // namespace molaccel::orbital::cpu::MOLACCEL_ISA_NAMESPACE

// The CPU target of issue 6 (>= 10x gau2grid per core on the same points), measured side by side:
// our CPU kernel (the variant the library picks; one thread), its AVX2 build (on AVX-512
// machines), the same evaluation through the library (evaluate_orbitals_into, one thread) and gau2grid
// (Debian libgg-dev), on a slab of central planes of the C60 6-31G* benchmark grid (172^3 points at
// 0.075 A), HOMO. Runs are interleaved (ours, avx2, library, gau2grid, ours, ...) after
// one warm-up each, so machine noise hits all of them alike; a ratio is the median of the
// per-round ratios, next to the ratio of the medians.
//
//   bench_orbital_cpu [--planes N (2)] [--rounds R (7)] [--ours-only (for profiling)]
//                     [--density N: the density of the top N orbitals instead (no gau2grid row)]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "c60_wavefunction.hpp"
#include "common/harness.hpp"
#include "gau2grid_baseline.hpp"
#include "molaccel/orbital.hpp"
#include "orbital/basis_functions.hpp"
#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/packed_basis.hpp"

using namespace molaccel;
using namespace molaccel::orbital;

namespace {

double seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bench::Timing timing_of(const std::vector<double>& v) {
  bench::Timing t;
  t.median_s = median(v);
  t.min_s = *std::min_element(v.begin(), v.end());
  t.max_s = *std::max_element(v.begin(), v.end());
  t.repeats = static_cast<int>(v.size());
  return t;
}

[[maybe_unused]] double max_relative_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0, scale = 0;
  for (std::size_t p = 0; p < a.size(); ++p) {
    worst = std::max(worst, std::abs(static_cast<double>(a[p]) - b[p]));
    scale = std::max(scale, std::abs(b[p]));
  }
  return scale > 0 ? worst / scale : worst;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t planes = 2;
  int rounds = 7;
  bool ours_only = false;
  std::size_t density_orbitals = 0;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--planes") == 0 && a + 1 < argc)
      planes = std::stoul(argv[++a]);
    else if (std::strcmp(argv[a], "--rounds") == 0 && a + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++a]));
    else if (std::strcmp(argv[a], "--ours-only") == 0)
      ours_only = true;
    else if (std::strcmp(argv[a], "--density") == 0 && a + 1 < argc)
      density_orbitals = std::stoul(argv[++a]);
    else {
      std::fprintf(stderr, "usage: bench_orbital_cpu [--planes N] [--rounds R] [--ours-only]\n");
      return 2;
    }
  }
  const std::size_t n_orbitals = 180;
  const Wavefunction wfn = bench_data::c60_631gs(n_orbitals);
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.075);
  const detail::PackedBasis basis = detail::pack_basis(wfn, 1e-9);
  const OrbitalRef homo{Spin::alpha, n_orbitals - 1};
  std::vector<OrbitalRef> refs{homo};
  if (density_orbitals > 0) {
    refs.clear();
    for (std::size_t o = n_orbitals - std::min(density_orbitals, n_orbitals); o < n_orbitals; ++o)
      refs.push_back({Spin::alpha, o});
  }
  const std::vector<float> weights(refs.size(), 2.0f);
  const float* weights_ptr = density_orbitals > 0 ? weights.data() : nullptr;
  const auto coefficients = detail::cartesian_coefficients(wfn, refs);
  const std::string size = fmt::format("{}x{}x{}", grid.counts[0], grid.counts[1], grid.counts[2]);

  // Slab of planes through the middle (the same points as bench_orbital_c60's CPU rows).
  GridSpec slab = grid;
  for (int d = 0; d < 3; ++d) slab.origin[d] += static_cast<double>(grid.counts[0] / 2) * grid.axes[0][d];
  slab.counts[0] = planes;
  const std::size_t slab_points = slab.point_count();
  const std::size_t rows = slab.counts[0] * slab.counts[1];
  const std::string what =
      density_orbitals > 0 ? fmt::format("density-of-{}-orbitals", refs.size()) : "one-orbital";
  std::printf(
      "C60 6-31G*, %s, %zu central planes of %s (%zu points), one thread, %s; %.1f exp()/point after "
      "screening (per point)\n",
      what.c_str(), planes, size.c_str(), slab_points, cpu_info().model.c_str(),
      detail::exp_per_point(basis, slab));

  {
    // exp() evaluations per point that the CPU kernel's 4 x 4 tiles compute: one per distinct
    // exponent of an atom within reach of the tile's bounding sphere, for all 16 lanes (the same
    // rule as src/orbital/cpu/orbital_cpu_kernel.cpp; edge tiles counted whole).
    double radius = 0;
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) {
        double len2 = 0;
        for (int d = 0; d < 3; ++d) {
          const double v = (a - 1.5) * slab.axes[1][d] + (b - 1.5) * slab.axes[2][d];
          len2 += v * v;
        }
        radius = std::max(radius, std::sqrt(len2));
      }
    radius += 1e-3;
    double exps = 0, per_point_prims = 0;
    std::size_t tiles = 0;
    for (std::size_t i = 0; i < slab.counts[0]; ++i)
      for (std::size_t j = 0; j < slab.counts[1]; j += 4)
        for (std::size_t k = 0; k < slab.counts[2]; k += 4, ++tiles)
          for (std::size_t at = 0; at < basis.atom_count(); ++at) {
            double d2 = 0;
            for (int d = 0; d < 3; ++d) {
              const double c = slab.origin[d] + i * slab.axes[0][d] + (j + 1.5) * slab.axes[1][d] +
                               (k + 1.5) * slab.axes[2][d];
              d2 += (c - basis.atom_xyz[3 * at + d]) * (c - basis.atom_xyz[3 * at + d]);
            }
            const double dist = std::sqrt(d2);
            for (int g = basis.atom_first_group[at]; g < basis.atom_first_group[at + 1]; ++g) {
              const double reach =
                  std::sqrt(static_cast<double>(basis.groups[static_cast<std::size_t>(g)].cutoff_r2)) +
                  radius;
              if (dist < reach) exps += 16;
            }
            for (int sh = basis.atom_first_shell[at]; sh < basis.atom_first_shell[at + 1]; ++sh) {
              const auto& shell = basis.shells[static_cast<std::size_t>(sh)];
              for (int q = 0; q < shell.primitive_count; ++q) {
                const double reach =
                    std::sqrt(static_cast<double>(
                        basis.cutoff_r2[static_cast<std::size_t>(shell.first_primitive + q)])) +
                    radius;
                if (dist < reach) per_point_prims += 16;
              }
            }
          }
    std::printf(
        "CPU kernel, 4x4 tiles: %.1f exp()/point evaluated (one per distinct exponent and atom in reach; "
        "%.1f primitives/point in reach)\n",
        exps / (16.0 * tiles), per_point_prims / (16.0 * tiles));
  }

  struct Contender {
    std::string name;
    std::function<void()> run;
    std::vector<double> times;
  };
  std::vector<Contender> contenders;
  const auto& variant = cpu::select_variant();
  std::vector<float> ours(slab_points);
  const cpu::KernelArgs args{&basis, coefficients.data(), refs.size(), weights_ptr, &slab, ours.data()};
  contenders.push_back({variant.name, [&] { variant.kernel(args, 0, rows); }, {}});
  // The other compiled variants this CPU can run (informational: machines without AVX-512).
  std::vector<float> other(slab_points);
  const cpu::KernelArgs other_args{&basis, coefficients.data(), refs.size(), weights_ptr,
                                   &slab,  other.data()};
  if (variant.name == "cpu/avx512")
    contenders.push_back({"cpu/avx2", [&] { cpu::isa_avx2::evaluate_rows(other_args, 0, rows); }, {}});
  // The same orbital through the library (evaluate_orbitals_into), one CPU thread: the kernel plus
  // the basis packing and the scheduler.
  const Resources one_thread = Resources::cpu(1);
  std::vector<float> through_library(slab_points);
  EvaluateOptions library_options;
  library_options.backend = Backend::cpu;
  if (density_orbitals == 0)
    contenders.push_back({"library-1thread",
                          [&] {
                            evaluate_orbitals_into(one_thread, wfn, slab, refs, through_library.data(),
                                                   through_library.size(), library_options);
                          },
                          {}});
  std::vector<double> gg(slab_points);
#if MOLACCEL_HAVE_GAU2GRID
  // gau2grid (gau2grid_baseline.hpp, as in bench_orbital_c60): every primitive, double precision,
  // no screening.
  if (density_orbitals == 0)
    contenders.push_back(
        {"gau2grid", [&] { bench_data::gau2grid_orbital(basis, coefficients.data(), slab, gg.data()); }, {}});
#else
  std::printf("gau2grid not found at build time: its rows are skipped (install libgg-dev)\n");
#endif

  if (ours_only) contenders.resize(1);
  for (auto& c : contenders) c.run();  // warm-up
  for (int r = 0; r < rounds; ++r)
    for (std::size_t c = 0; c < contenders.size(); ++c)
      contenders[c].times.push_back(seconds(contenders[c].run));

  bench::print_header();
  const double ours_median = median(contenders[0].times);
  for (std::size_t c = 0; c < contenders.size(); ++c) {
    bench::Row row;
    row.benchmark = fmt::format("orbital/c60-631gs/{}/{}-1core", what, contenders[c].name);
    row.device = cpu_info().model;
    row.size = fmt::format("{} planes of {}", planes, size);
    row.timing = timing_of(contenders[c].times);
    row.work = static_cast<double>(slab_points);
    row.work_unit = "pt";
    if (c > 0) {
      std::vector<double> per_round;
      for (int r = 0; r < rounds; ++r) per_round.push_back(contenders[c].times[r] / contenders[0].times[r]);
      if (contenders[c].name == "library-1thread")
        row.note = fmt::format("{:.2f}x the kernel's time (packing, scheduling)", median(per_round));
      else
        row.note =
            fmt::format("ours is {:.2f}x faster (median of {} interleaved rounds; ratio of medians {:.2f}x)",
                        median(per_round), rounds, median(contenders[c].times) / ours_median);
      if (contenders[c].name == "gau2grid") row.note += "; target >= 10x";
    }
    bench::print_row(row);
  }
  if (ours_only) return 0;
  if (density_orbitals == 0)
    std::printf(
        "library result bit for bit the kernel's: %s\n",
        std::memcmp(ours.data(), through_library.data(), ours.size() * sizeof(float)) == 0 ? "yes" : "NO");
#if MOLACCEL_HAVE_GAU2GRID
  if (density_orbitals == 0)
    std::printf("max |ours - gau2grid| = %.1e of max |psi|\n", max_relative_difference(ours, gg));
#endif
  return 0;
}

// The seed's benchmark: C60 with 6-31G* (Cartesian d: 900 basis functions) on VMD's
// high-resolution grid (0.075 A spacing, 3 A padding). The 6-31G* carbon basis is typed in below
// (Hehre, Ditchfield, Pople 1972; d exponent 0.8, Hariharan and Pople 1973). The MO coefficients
// are a generated set: 180 random vectors orthonormalised in the overlap metric (fixed seed), all
// doubly occupied; the grid work depends on the basis and the geometry, not on the values.
//
// Rows: GPU JIT and generic kernels for one orbital, the density of all 180 orbitals, our CPU path
// per core and on all cores, and gau2grid (Debian libgg-dev) per core on the same points.
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "c60_wavefunction.hpp"
#include "common/harness.hpp"
#include "gau2grid_baseline.hpp"
#include "molaccel/orbital.hpp"
#include "orbital/basis_functions.hpp"
#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/evaluate_on_pool.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/tuning.hpp"
#if MOLACCEL_HAVE_CUDA
#include "device_timing.hpp"
#include "orbital/cuda/orbital_cuda.hpp"
#endif

using namespace molaccel;
using namespace molaccel::orbital;

using bench_data::c60_631gs;

namespace {

// --tuning k=v settings (detail::set_tuning), applied over the library's tuning for each problem.
std::vector<std::string> tuning_settings;

detail::Tuning tuned(std::size_t orbitals, bool density) {
  detail::Tuning t = detail::tuning_for(0, {orbitals, density});
  for (const auto& s : tuning_settings) detail::set_tuning(t, s);
  return t;
}

#if MOLACCEL_HAVE_CUDA
// One kernel over the whole grid with the results left in device memory
// (cuda_backend::evaluate_on_device), a fresh device state per call as a new request has;
// milliseconds per run, the median of `repeats` CUDA-event timings. kind: "jit", "generic" or
// "density" (a job with weights).
double kernel_ms(int device, const cuda_backend::GpuJob& job, const std::string& kind, int repeats) {
  cuda_backend::GpuJob local = job;
  local.jit = kind == "jit";
  WorkerInfo info;
  info.kind = WorkerInfo::Kind::gpu;
  info.device = device;
  WorkerContext ctx(info);
  return orbital_bench::median_device_ms(
      device, job.grid->point_count() * (local.weights ? 1 : local.orbitals),
      [&](float* out) { return cuda_backend::evaluate_on_device(ctx, local, out); }, repeats);
}
#endif

// The library call, with the benchmark's tuning when one was given (else the public API).
[[maybe_unused]] void orbitals_into(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                                    const std::vector<OrbitalRef>& refs, float* out, std::size_t size,
                                    const EvaluateOptions& options, EvaluationInfo* info) {
  if (tuning_settings.empty())
    evaluate_orbitals_into(resources, wfn, grid, refs, out, size, options, info);
  else
    detail::evaluate_orbitals_tuned(resources, wfn, grid, refs, out, size, options, tuned(refs.size(), false),
                                    info);
}

[[maybe_unused]] void density_into(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                                   float* out, std::size_t size, const EvaluateOptions& options,
                                   EvaluationInfo* info) {
  const std::size_t occupied = wfn.alpha.count();  // every generated orbital is doubly occupied
  if (tuning_settings.empty())
    evaluate_density_into(resources, wfn, grid, DensityKind::total, out, size, options, info);
  else
    detail::evaluate_density_tuned(resources, wfn, grid, DensityKind::total, out, size, options,
                                   tuned(occupied, true), info);
}

}  // namespace

// --batch N: N orbitals (HOMO-N+1 .. HOMO), one grid each, through the library (evaluate_orbitals_into
// into one reused buffer) on 1, 2, ... all visible GPUs (gpu:0, gpu:0,1, ...): time per batch, the
// speed-up over one GPU, and whether the values are bitwise identical whatever the GPU count. The
// path for N > 4 orbitals is the sparse basis matrix.
int run_batch(const Wavefunction& wfn, const GridSpec& grid, std::size_t batch, int repeats) {
#if MOLACCEL_HAVE_CUDA
  const auto gpus = gpu_list();
  if (gpus.empty()) {
    std::printf("batch: no GPU (%s)\n", gpu_absence_reason().c_str());
    return 0;
  }
  const std::size_t points = grid.point_count();
  const std::size_t n = wfn.alpha.count();
  batch = std::min(batch, n);
  std::vector<OrbitalRef> refs;
  for (std::size_t o = n - batch; o < n; ++o) refs.push_back({Spin::alpha, o});
  std::vector<float> out(points * batch), first(points * batch);
  std::printf("batch: %zu orbitals x %zu points = %.0f MB of results per batch, %zu GPU(s) visible: %s\n",
              batch, points, 4.0 * points * batch / 1e6, gpus.size(), gpus[0].name.c_str());
  std::printf("%-22s %5s %10s %9s %11s %10s %s\n", "path", "gpus", "ms/batch", "speed-up", "efficiency",
              "GB/s out", "identical to 1 GPU / chunks (tiles) per GPU");
  EvaluateOptions options;  // every row: the GPU backends (JIT where the path has one)
  options.backend = Backend::cuda_jit;
  bool all_identical = true;
  // "pinned": the matrix path into page-locked output (allocate_host_buffer): the GPUs' copy
  // engines write the result directly, with no host-side copy.
  auto pinned = allocate_host_buffer(points * batch * sizeof(float));
  std::vector<float> matrix_first;
  for (const char* path : {"matrix", "pinned"}) {
    if (std::string(path) == "pinned" && !pinned.page_locked) continue;
    float* dst = std::string(path) == "pinned" ? reinterpret_cast<float*>(pinned.data.get()) : out.data();
    double one_gpu_ms = 0;
    for (std::size_t g = 1; g <= gpus.size(); ++g) {
      const Resources resources = bench::first_gpus(g);
      EvaluationInfo info;
      std::fill(dst, dst + out.size(), -1.0f);
      orbitals_into(resources, wfn, grid, refs, dst, out.size(), options, &info);  // warm-up
      const auto timing = bench::measure(
          [&] { orbitals_into(resources, wfn, grid, refs, dst, out.size(), options, &info); }, 1, repeats);
      const double ms = timing.median_s * 1e3;
      if (dst != out.data()) std::copy(dst, dst + out.size(), out.begin());
      bool identical = true;
      if (g == 1 && std::string(path) == "matrix")
        first = matrix_first = out;
      else if (std::string(path) == "pinned")
        identical = std::memcmp(matrix_first.data(), out.data(), out.size() * sizeof(float)) == 0;
      else
        identical = std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) == 0;
      all_identical = all_identical && identical;
      if (g == 1) one_gpu_ms = ms;
      std::string tiles;
      for (std::size_t w = 0; w < info.job.tiles_per_worker.size(); ++w)
        tiles += (w ? "," : "") + std::to_string(info.job.tiles_per_worker[w]);
      std::printf("%-22s %5zu %10.2f %8.2fx %10.0f%% %10.1f %s / %s (%s)\n",
                  std::string(path) == "pinned" ? "matrix, page-locked out" : "sparse basis matrix", g, ms,
                  one_gpu_ms / ms, 100.0 * one_gpu_ms / ms / static_cast<double>(g),
                  4.0 * points * batch / timing.median_s / 1e9, identical ? "yes" : "NO", tiles.c_str(),
                  info.backend.c_str());
    }
  }
  // The density of all occupied orbitals: a batch of 180 orbitals reduced on the GPUs, so only one
  // grid (20 MB) crosses to the host; its scaling is that of the GPU work. Into one reused buffer
  // (evaluate_density_into), like the orbital rows: no 20 MB allocation and page faults per call.
  {
    std::vector<float> density_first, density(points);
    double one_gpu_ms = 0;
    for (std::size_t g = 1; g <= gpus.size(); ++g) {
      const Resources resources = bench::first_gpus(g);
      EvaluationInfo info;
      std::fill(density.begin(), density.end(), -1.0f);
      density_into(resources, wfn, grid, density.data(), density.size(), options, &info);
      const auto timing = bench::measure(
          [&] { density_into(resources, wfn, grid, density.data(), density.size(), options, &info); }, 1,
          repeats);
      const double ms = timing.median_s * 1e3;
      if (g == 1) one_gpu_ms = ms, density_first = density;
      const bool identical =
          std::memcmp(density_first.data(), density.data(), density.size() * sizeof(float)) == 0;
      all_identical = all_identical && identical;
      std::string tiles;
      for (std::size_t w = 0; w < info.job.tiles_per_worker.size(); ++w)
        tiles += (w ? "," : "") + std::to_string(info.job.tiles_per_worker[w]);
      std::printf("%-22s %5zu %10.2f %8.2fx %10.0f%% %10.1f %s / %s (%s)\n", "density, 180 orbitals", g, ms,
                  one_gpu_ms / ms, 100.0 * one_gpu_ms / ms / static_cast<double>(g),
                  4.0 * points / timing.median_s / 1e9, identical ? "yes" : "NO", tiles.c_str(),
                  info.backend.c_str());
    }
  }
  std::printf("batch results bitwise identical across GPU counts: %s\n", all_identical ? "yes" : "NO");
  return all_identical ? 0 : 1;
#else
  (void)wfn, (void)grid, (void)batch, (void)repeats;
  std::printf("batch: this build has no CUDA\n");
  return 0;
#endif
}

int main(int argc, char** argv) {
  bool quick = false, density_only = false;
  std::size_t batch = 0;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--density-kernel") {  // only the one-launch density kernel rows
      density_only = true;
    } else if (arg == "--batch") {
      batch = 32;
      if (a + 1 < argc && std::isdigit(static_cast<unsigned char>(argv[a + 1][0])))
        batch = std::stoul(argv[++a]);
    } else if (arg == "--tuning" && a + 1 < argc) {
      tuning_settings.push_back(argv[++a]);
      try {
        detail::Tuning check;
        detail::set_tuning(check, tuning_settings.back());  // reject a bad setting before any work
      } catch (const Error& e) {
        std::fprintf(stderr, "bench_orbital_c60: %s\n", e.what());
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: bench_orbital_c60 [--quick] [--batch [N]] [--density-kernel] [--tuning k=v]...\n"
                   "  --tuning: basis_matrix=0|1, jit_brick=BXxBYxBZ[/P], chunks=N, drain_threads=N, "
                   "drain_piece_mib=N (src/orbital/tuning.hpp)\n");
      return 2;
    }
  }
  const std::size_t n_orbitals = 180;
  const Wavefunction wfn = c60_631gs(n_orbitals);
  if (batch > 0) return run_batch(wfn, automatic_grid(wfn, 3.0, 0.075), batch, quick ? 3 : 5);
  const double deviation = orthonormality_deviation(wfn, wfn.alpha);
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.075);
  const std::size_t points = grid.point_count();
  const detail::PackedBasis basis = detail::pack_basis(wfn, 1e-9);
  const double exps = detail::exp_per_point(basis, grid);
  const OrbitalRef homo{Spin::alpha, n_orbitals - 1};
  const std::string size = fmt::format("{}x{}x{}", grid.counts[0], grid.counts[1], grid.counts[2]);
  std::printf(
      "C60 6-31G*: %d basis functions (Cartesian d), %zu primitives, %zu generated orthonormal orbitals "
      "(max |C^T S C - I| = %.1e)\n",
      wfn.function_count(), basis.exponent.size(), n_orbitals, deviation);
  std::printf(
      "grid %s = %zu points (0.075 A, 3 A padding); exp() per point: %.1f after screening (1e-9), %zu "
      "without\n",
      size.c_str(), points, exps, basis.exponent.size());
  bench::print_header();

  const auto coefficients = detail::cartesian_coefficients(wfn, {homo});
#if MOLACCEL_HAVE_CUDA
  const auto gpus = gpu_list();
  if (!gpus.empty()) {
    const auto& gpu = gpus[0];
    // SFU: 16 ex2 per clock per SM on sm_80/sm_90; FMA: 128 fp32 lanes per SM, 2 flops each.
    const double clock_hz = gpu.clock_khz * 1e3;
    const double sfu_exp_per_s = 16.0 * gpu.sm_count * clock_hz;
    const double fma_flops = 2.0 * 128.0 * gpu.sm_count * clock_hz;
    cuda_backend::GpuJob job;
    job.basis = &basis;
    job.coefficients = coefficients.data();
    job.orbitals = 1;
    job.grid = &grid;
    job.tuning = tuned(1, false);
    double jit_ms = 0, generic_ms = 0;
    const std::vector<const char*> kinds =
        density_only ? std::vector<const char*>{} : std::vector<const char*>{"jit", "generic"};
    for (const char* kind : kinds) {
      const auto timing =
          bench::measure_with([&] { return kernel_ms(gpu.index, job, kind, 3) * 1e-3; }, 1, quick ? 3 : 5);
      if (std::string(kind) == "jit") jit_ms = timing.median_s * 1e3;
      if (std::string(kind) == "generic") generic_ms = timing.median_s * 1e3;
      bench::Row row;
      row.benchmark = fmt::format("orbital/c60-631gs/one-orbital/cuda-{}", kind);
      row.device = gpu.name;
      row.size = size;
      row.timing = timing;
      row.work = static_cast<double>(points) * exps;
      row.work_unit = "exp";
      row.bytes = 4.0 * points;
      row.limit = sfu_exp_per_s;
      row.limit_name = "SFU ex2 throughput";
      row.note =
          fmt::format("{:.3f} ms, {} points/s, SFU-bound time {:.3f} ms", timing.median_s * 1e3,
                      bench::human_rate(points / timing.median_s, "pt"), points * exps / sfu_exp_per_s * 1e3);
      bench::print_row(row);
    }
    if (!density_only)
      std::printf(
          "JIT speed-up over the generic kernel: %.2fx (target >= 3x; target <= 0.5 ms per orbital)\n",
          generic_ms / jit_ms);
    // Atoms per block that the JIT kernel keeps (same rule as the kernel, on the CPU).
    {
      const int bx = job.tuning.jit_brick.bx, by = job.tuning.jit_brick.by, bz = job.tuning.jit_brick.bz;
      double radius = 0;
      const int ext[3] = {bx - 1, by - 1, bz - 1};
      for (int e = 0; e < 3; ++e)
        radius += 0.5 * ext[e] *
                  std::sqrt(grid.axes[e][0] * grid.axes[e][0] + grid.axes[e][1] * grid.axes[e][1] +
                            grid.axes[e][2] * grid.axes[e][2]);
      double kept = 0;
      std::size_t bricks = 0;
      for (std::size_t bi = 0; bi < grid.counts[0]; bi += bx)
        for (std::size_t bj = 0; bj < grid.counts[1]; bj += by)
          for (std::size_t bk = 0; bk < grid.counts[2]; bk += bz, ++bricks)
            for (std::size_t a = 0; a < basis.atom_count(); ++a) {
              double d2 = 0;
              for (int d = 0; d < 3; ++d) {
                const double c = grid.origin[d] + (bi + 0.5 * (bx - 1)) * grid.axes[0][d] +
                                 (bj + 0.5 * (by - 1)) * grid.axes[1][d] +
                                 (bk + 0.5 * (bz - 1)) * grid.axes[2][d];
                d2 += (c - basis.atom_xyz[3 * a + d]) * (c - basis.atom_xyz[3 * a + d]);
              }
              float cut = 0;
              for (int sh = basis.atom_first_shell[a]; sh < basis.atom_first_shell[a + 1]; ++sh)
                cut = std::max(cut, basis.shells[static_cast<std::size_t>(sh)].cutoff_r2);
              const double gap = std::max(0.0, std::sqrt(d2) - radius - 1e-3);
              if (gap * gap < cut) kept += 1;
            }
      std::printf("JIT, %dx%dx%d bricks: %.1f of %zu atoms per block on average\n", bx, by, bz, kept / bricks,
                  basis.atom_count());
    }
    // Density of the 180 orbitals: basis matrix + contraction (a GEMM with a fused square-sum).
    const std::vector<OrbitalRef> all = [&] {
      std::vector<OrbitalRef> v;
      for (std::size_t o = 0; o < n_orbitals; ++o) v.push_back({Spin::alpha, o});
      return v;
    }();
    const auto all_coefficients = detail::cartesian_coefficients(wfn, all);
    const std::vector<float> weights(n_orbitals, 2.0f);
    cuda_backend::GpuJob density = job;
    density.coefficients = all_coefficients.data();
    density.orbitals = n_orbitals;
    density.weights = weights.data();
    density.tuning = tuned(n_orbitals, true);
    // Components per 4x4x8 brick that the sparse path keeps (same conservative sphere test).
    {
      double kept = 0;
      std::size_t bricks = 0;
      double radius = 0;
      const int ext[3] = {3, 3, 7};
      for (int e = 0; e < 3; ++e)
        radius += 0.5 * ext[e] *
                  std::sqrt(grid.axes[e][0] * grid.axes[e][0] + grid.axes[e][1] * grid.axes[e][1] +
                            grid.axes[e][2] * grid.axes[e][2]);
      for (std::size_t bi = 0; bi < (grid.counts[0] + 3) / 4; ++bi)
        for (std::size_t bj = 0; bj < (grid.counts[1] + 3) / 4; ++bj)
          for (std::size_t bk = 0; bk < (grid.counts[2] + 7) / 8; ++bk, ++bricks) {
            const double ci = bi * 4 + 1.5, cj = bj * 4 + 1.5, ck = bk * 8 + 3.5;
            for (std::size_t a = 0; a < basis.atom_count(); ++a) {
              double d2 = 0;
              for (int d = 0; d < 3; ++d) {
                const double c =
                    grid.origin[d] + ci * grid.axes[0][d] + cj * grid.axes[1][d] + ck * grid.axes[2][d];
                d2 += (c - basis.atom_xyz[3 * a + d]) * (c - basis.atom_xyz[3 * a + d]);
              }
              const double gap = std::max(0.0, std::sqrt(d2) - radius - 1e-3);
              for (int sh = basis.atom_first_shell[a]; sh < basis.atom_first_shell[a + 1]; ++sh) {
                const auto& shell = basis.shells[static_cast<std::size_t>(sh)];
                if (gap * gap < shell.cutoff_r2) kept += (shell.l + 1) * (shell.l + 2) / 2;
              }
            }
          }
      std::printf(
          "sparse density path: %.1f of %d components per 4x4x8 brick on average (%.1f%% of the dense "
          "flops)\n",
          kept / bricks, basis.components, 100.0 * kept / bricks / basis.components);
    }
    {
      const char* kind = "density";
      const auto timing = bench::measure_with([&] { return kernel_ms(gpu.index, density, kind, 1) * 1e-3; },
                                              1, quick ? 2 : 3);
      const double padded_components = std::ceil(basis.components / 8.0) * 8.0;
      const double flops = 2.0 * points * padded_components * std::ceil(n_orbitals / 192.0) * 192.0;
      bench::Row row;
      row.benchmark = "orbital/c60-631gs/density-180/cuda";
      row.device = gpu.name;
      row.size = size;
      row.timing = timing;
      row.work = flops;
      row.work_unit = "flop";
      row.bytes = 2.0 * 4.0 * points * padded_components;
      row.limit = fma_flops;
      row.limit_name = "fp32 FMA peak";
      row.note = fmt::format("{:.2f} ms (target <= 25 ms), sparse (flop/s dense-equivalent), {}",
                             timing.median_s * 1e3, bench::human_rate(points / timing.median_s, "pt"));
      bench::print_row(row);
    }
  } else {
    std::printf("no GPU: %s (GPU rows skipped)\n", gpu_absence_reason().c_str());
  }
#endif
  if (density_only) return 0;

  // CPU per core: our kernel on a slab of planes through the middle, one thread.
  const std::size_t slab_planes = quick ? 2 : 4;
  GridSpec slab = grid;
  for (int d = 0; d < 3; ++d) slab.origin[d] += static_cast<double>(grid.counts[0] / 2) * grid.axes[0][d];
  slab.counts[0] = slab_planes;
  const std::size_t slab_points = slab.point_count();
  const auto& variant = cpu::select_variant();
  std::vector<float> ours(slab_points);
  cpu::KernelArgs args{&basis, coefficients.data(), 1, nullptr, &slab, ours.data()};
  const auto cpu_timing =
      bench::measure([&] { variant.kernel(args, 0, slab.counts[0] * slab.counts[1]); }, 1, quick ? 2 : 3);
  [[maybe_unused]] const double ours_per_core = slab_points / cpu_timing.median_s;  // gau2grid row
  {
    bench::Row row;
    row.benchmark = fmt::format("orbital/c60-631gs/one-orbital/{}-1core", variant.name);
    row.device = cpu_info().model;
    row.size = fmt::format("{} planes of {}", slab_planes, size);
    row.timing = cpu_timing;
    row.work = static_cast<double>(slab_points);
    row.work_unit = "pt";
    row.note = fmt::format("{:.1f} exp/point", detail::exp_per_point(basis, slab));
    bench::print_row(row);
  }
  if (!quick) {
    EvaluateOptions options;
    options.backend = Backend::cpu;
    const auto resources = Resources::cpu(0);
    const auto timing =
        bench::measure([&] { (void)evaluate_orbitals(resources, wfn, grid, {homo}, options); }, 1, 3);
    bench::Row row;
    row.benchmark =
        fmt::format("orbital/c60-631gs/one-orbital/{}-{}cores", variant.name, resources.cpu_threads());
    row.device = cpu_info().model;
    row.size = size;
    row.timing = timing;
    row.work = static_cast<double>(points);
    row.work_unit = "pt";
    row.note = "VMD: 30.64 s on one SSE core (2010)";
    bench::print_row(row);
  }
#if MOLACCEL_HAVE_GAU2GRID
  {
    // gau2grid (gau2grid_baseline.hpp): every primitive, double precision, no screening.
    std::vector<double> psi(slab_points);
    auto run = [&] { bench_data::gau2grid_orbital(basis, coefficients.data(), slab, psi.data()); };
    const auto timing = bench::measure(run, 1, quick ? 2 : 3);
    double worst = 0, scale = 0;
    for (std::size_t p = 0; p < slab_points; ++p) {
      worst = std::max(worst, std::abs(psi[p] - ours[p]));
      scale = std::max(scale, std::abs(psi[p]));
    }
    bench::Row row;
    row.benchmark = "orbital/c60-631gs/one-orbital/gau2grid-1core";
    row.device = cpu_info().model;
    row.size = fmt::format("{} planes of {}", slab_planes, size);
    row.timing = timing;
    row.work = static_cast<double>(slab_points);
    row.work_unit = "pt";
    row.note =
        fmt::format("ours/gau2grid per core: {:.1f}x (target >= 10x); max diff {:.1e} of max",
                    ours_per_core / (slab_points / timing.median_s), scale > 0 ? worst / scale : worst);
    bench::print_row(row);
  }
#else
  std::printf("gau2grid not found at build time: baseline row skipped (install libgg-dev)\n");
#endif
  return 0;
}

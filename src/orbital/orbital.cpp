// Front of the orbital engine: validates a request, packs the basis once, and runs grid planes as
// tiles of the runtime scheduler on CPU and GPU workers (a failed GPU tile is redone elsewhere).
#include <algorithm>
#include <mutex>

#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/reference/reference.hpp"
#if MOLACCEL_HAVE_CUDA
#include "orbital/cuda/orbital_cuda.hpp"
#endif

namespace molaccel::orbital {

namespace {

void validate(const Wavefunction& wfn, const GridSpec& grid, const std::vector<OrbitalRef>& orbitals) {
  if (grid.point_count() == 0) throw InputError("grid", 0, "the grid has no points");
  for (const auto& ref : orbitals) {
    const OrbitalSet& set = ref.spin == Spin::alpha ? wfn.alpha : wfn.beta;
    if (ref.index >= set.count())
      throw InputError(wfn.source, 0, fmt::format("orbital {} does not exist ({} orbitals)", ref.index + 1, set.count()));
  }
}

Backend resolve(Backend backend, const Resources& resources) {
  if (backend == Backend::automatic) return resources.uses_gpu() ? Backend::cuda_jit : Backend::cpu;
  if ((backend == Backend::cuda_generic || backend == Backend::cuda_jit)) {
#if !MOLACCEL_HAVE_CUDA
    MOLACCEL_THROW(NotCompiled, "the CUDA orbital backends (this build has no CUDA)");
#endif
    if (!resources.uses_gpu())
      throw DeviceUnavailable(fmt::format("backend {} needs a GPU but the resources are {}", to_string(backend),
                                          resources.describe()));
  }
  return backend;
}

// One request for the fast backends: orbital values (weights empty) or a weighted density.
std::vector<float> run_fast(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                            const std::vector<OrbitalRef>& orbitals, const std::vector<float>& weights,
                            Backend backend, const EvaluateOptions& options, EvaluationInfo* info) {
  // The cpu backend on GPU resources: a CPU-only pool, so every tile runs threaded on the CPU.
  if (backend == Backend::cpu && resources.uses_gpu())
    return run_fast(Resources::cpu(resources.cpu_threads()), wfn, grid, orbitals, weights, backend, options, info);
  const double start = now_seconds();
  const detail::PackedBasis basis = detail::pack_basis(wfn, options.screening_tolerance);
  const std::vector<float> coefficients = detail::cartesian_coefficients(wfn, orbitals);
  const bool density = !weights.empty() || orbitals.empty();
  const std::size_t n_points = grid.point_count();
  std::vector<float> out(density ? n_points : n_points * orbitals.size(), 0.0f);
  if (orbitals.empty()) return out;

  const std::size_t planes = grid.counts[0];
  const std::size_t plane_points = grid.counts[1] * grid.counts[2];
  std::size_t per_tile = options.planes_per_tile;
  if (per_tile == 0) {
    // GPU tiles: ~2M points keep a GPU busy; CPU tiles: a few planes for load balance.
    per_tile = resources.uses_gpu() ? std::max<std::size_t>(1, (2u << 20) / std::max<std::size_t>(1, plane_points)) : 2;
  }
  const TileRange tiles{planes, std::max<std::size_t>(1, per_tile)};
  const cpu::Variant& variant = cpu::select_variant();
  std::string gpu_kernel;
  std::mutex name_mutex;

  cpu::KernelArgs cpu_args;
  cpu_args.basis = &basis;
  cpu_args.coefficients = coefficients.data();
  cpu_args.orbitals = orbitals.size();
  cpu_args.weights = density ? weights.data() : nullptr;
  cpu_args.grid = &grid;
  cpu_args.out = out.data();

  JobOptions job;
  job.name = density ? "orbital density" : "orbital grid";
  job.inject_fault = options.inject_fault;
  const JobStats stats = run_tiles(
      resources, tiles.count(),
      [&](WorkerContext& ctx, std::size_t tile) {
        const std::size_t p0 = tiles.begin(tile), p1 = tiles.end(tile);
        if (ctx.worker().kind == WorkerInfo::Kind::cpu || backend == Backend::cpu) {
          const std::size_t row0 = p0 * grid.counts[1], row1 = p1 * grid.counts[1];
          parallel_for(row1 - row0, ctx.worker().cpu_threads, 1, [&](std::size_t b, std::size_t e) {
            variant.kernel(cpu_args, row0 + b, row0 + e);
          });
          return;
        }
#if MOLACCEL_HAVE_CUDA
        cuda_backend::GpuJob gpu;
        gpu.basis = &basis;
        gpu.coefficients = coefficients.data();
        gpu.orbitals = orbitals.size();
        gpu.weights = cpu_args.weights;
        gpu.grid = &grid;
        gpu.out = out.data();
        gpu.jit = backend == Backend::cuda_jit;
        const std::string name = cuda_backend::evaluate_planes(ctx, gpu, p0, p1);
        std::lock_guard lock(name_mutex);
        if (gpu_kernel.empty()) gpu_kernel = name;
#else
        MOLACCEL_THROW(NotCompiled, "the CUDA orbital backends (this build has no CUDA)");
#endif
      },
      job);
  if (info) {
    info->job = stats;
    std::string used;
    bool any_cpu = backend == Backend::cpu;
    const auto& workers = resources.pool().workers();
    for (std::size_t w = 0; w < workers.size() && w < stats.tiles_per_worker.size(); ++w)
      any_cpu = any_cpu || (workers[w].kind == WorkerInfo::Kind::cpu && stats.tiles_per_worker[w] > 0);
    if (!gpu_kernel.empty()) used = gpu_kernel;
    if (any_cpu) used += (used.empty() ? "" : "+") + variant.name;
    info->backend = used;
    info->seconds = now_seconds() - start;
    info->exp_per_point = detail::exp_per_point(basis, grid);
    info->exp_per_point_unscreened = static_cast<double>(basis.exponent.size());
  }
  return out;
}

}  // namespace

std::vector<float> evaluate_orbitals(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                                     const std::vector<OrbitalRef>& orbitals, const EvaluateOptions& options,
                                     EvaluationInfo* info) {
  validate(wfn, grid, orbitals);
  const Backend backend = resolve(options.backend, resources);
  if (backend == Backend::reference) {
    const double start = now_seconds();
    const auto values = reference::evaluate_orbitals(wfn, grid, orbitals, resources.cpu_threads());
    if (info) {
      info->backend = "reference";
      info->seconds = now_seconds() - start;
    }
    return std::vector<float>(values.begin(), values.end());
  }
  return run_fast(resources, wfn, grid, orbitals, {}, backend, options, info);
}

std::vector<float> evaluate_density(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                                    DensityKind kind, const EvaluateOptions& options, EvaluationInfo* info) {
  validate(wfn, grid, {});
  const Backend backend = resolve(options.backend, resources);
  if (backend == Backend::reference) {
    const double start = now_seconds();
    const auto values = reference::evaluate_density(wfn, grid, kind, resources.cpu_threads());
    if (info) {
      info->backend = "reference";
      info->seconds = now_seconds() - start;
    }
    return std::vector<float>(values.begin(), values.end());
  }
  const detail::DensityTerms terms = detail::density_terms(wfn, kind);
  if (terms.orbitals.empty()) return std::vector<float>(grid.point_count(), 0.0f);
  return run_fast(resources, wfn, grid, terms.orbitals, terms.weights, backend, options, info);
}

}  // namespace molaccel::orbital

// Front of the orbital engine: validates a request, packs the basis once, and runs grid planes as
// tiles of the runtime scheduler on CPU and GPU workers (a failed GPU tile is redone elsewhere).
#include <algorithm>
#include <mutex>

#include "orbital/basis_functions.hpp"
#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/evaluate_on_pool.hpp"
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

// Where a request runs: a worker pool (GPU workers and/or a CPU worker) and the CPU threads.
struct Target {
  WorkerPool* pool = nullptr;
  bool gpu = false;         // the pool has GPU workers
  int cpu_threads = 1;
  const Resources* resources = nullptr;  // for progress bars, when there is one
  std::string describe;
};

Target target_of(const Resources& resources) {
  return {&resources.pool(), resources.uses_gpu(), resources.cpu_threads(), &resources, resources.describe()};
}

Target target_of(WorkerPool& pool) {
  Target t;
  t.pool = &pool;
  for (const auto& w : pool.workers()) {
    t.gpu = t.gpu || w.kind == WorkerInfo::Kind::gpu;
    if (w.kind == WorkerInfo::Kind::cpu) t.cpu_threads = std::max(t.cpu_threads, w.cpu_threads);
    t.describe += (t.describe.empty() ? "" : ", ") + w.name();
  }
  return t;
}

Backend resolve(Backend backend, const Target& target) {
  if (backend == Backend::automatic) return target.gpu ? Backend::cuda_jit : Backend::cpu;
  if ((backend == Backend::cuda_generic || backend == Backend::cuda_jit)) {
#if !MOLACCEL_HAVE_CUDA
    MOLACCEL_THROW(NotCompiled, "the CUDA orbital backends (this build has no CUDA)");
#endif
    if (!target.gpu)
      throw DeviceUnavailable(fmt::format("backend {} needs a GPU but the resources are {}", to_string(backend),
                                          target.describe));
  }
  return backend;
}

// Grid planes per scheduler tile. GPU tiles: about 16 per grid (at most ~2M points each), so that
// 2 to 4 GPUs share a grid with at most one tile of imbalance; the count depends on the grid only,
// never on the number of workers, so the tiling (and with it every value, bit for bit) is the
// same whatever the GPU count. CPU tiles: 2 planes, for load balance.
std::size_t planes_per_tile(const GridSpec& grid, bool gpu, std::size_t requested) {
  if (requested > 0) return requested;
  if (!gpu) return 2;
  const std::size_t planes = grid.counts[0];
  const std::size_t plane_points = std::max<std::size_t>(1, grid.counts[1] * grid.counts[2]);
  const std::size_t largest = std::max<std::size_t>(1, (2u << 20) / plane_points);
  return std::clamp<std::size_t>((planes + 15) / 16, 1, largest);
}

// One request for the fast backends: orbital values (weights empty) or a weighted density, into
// `out` (orbitals x points, or points for a density; every value is written).
void run_fast(const Target& target, const Wavefunction& wfn, const GridSpec& grid,
              const std::vector<OrbitalRef>& orbitals, const std::vector<float>& weights, Backend backend,
              const EvaluateOptions& options, EvaluationInfo* info, float* out) {
  // The cpu backend on GPU resources: a CPU-only pool, so every tile runs threaded on the CPU.
  if (backend == Backend::cpu && target.gpu) {
    const Resources cpu = Resources::cpu(target.cpu_threads);
    return run_fast(target_of(cpu), wfn, grid, orbitals, weights, backend, options, info, out);
  }
  const double start = now_seconds();
  const auto expanded = detail::expand_shells(wfn);  // once for the basis and the coefficients
  const detail::PackedBasis basis = detail::pack_basis(wfn, expanded, options.screening_tolerance);
  const std::vector<float> coefficients = detail::cartesian_coefficients(wfn, expanded, orbitals);
  const bool density = !weights.empty() || orbitals.empty();
  const std::size_t n_points = grid.point_count();
  if (orbitals.empty()) {
    std::fill(out, out + n_points, 0.0f);
    return;
  }

  const TileRange tiles{grid.counts[0], planes_per_tile(grid, target.gpu, options.planes_per_tile)};
  const cpu::Variant& variant = cpu::select_variant();
  std::string gpu_kernel;
  std::mutex name_mutex;

  cpu::KernelArgs cpu_args;
  cpu_args.basis = &basis;
  cpu_args.coefficients = coefficients.data();
  cpu_args.orbitals = orbitals.size();
  cpu_args.weights = density ? weights.data() : nullptr;
  cpu_args.grid = &grid;
  cpu_args.out = out;

#if MOLACCEL_HAVE_CUDA
  cuda_backend::GpuJob gpu;
  gpu.basis = &basis;
  gpu.coefficients = coefficients.data();
  gpu.orbitals = orbitals.size();
  gpu.weights = cpu_args.weights;
  gpu.grid = &grid;
  gpu.out = out;
  gpu.jit = backend == Backend::cuda_jit;
  // The JIT program is compiled once here (the GPU workers then find it in the JIT cache's memory
  // and only load it), not by the first tile of each worker.
  if (target.gpu && backend != Backend::cpu) {
    for (const auto& w : target.pool->workers())
      if (w.kind == WorkerInfo::Kind::gpu) {
        cuda_backend::precompile(gpu, w.device);
        break;
      }
  }
#endif

  JobOptions job;
  job.name = density ? "orbital density" : "orbital grid";
  job.inject_fault = options.inject_fault;
  const TileFunction tile_fn = [&](WorkerContext& ctx, std::size_t tile) {
    const std::size_t p0 = tiles.begin(tile), p1 = tiles.end(tile);
    if (ctx.worker().kind == WorkerInfo::Kind::cpu || backend == Backend::cpu) {
      // Work items: strips of cpu::kTileRows rows of one plane (the kernel's tiles; a single row
      // would cost a whole tile).
      const std::size_t ny = grid.counts[1];
      const std::size_t strips = (ny + cpu::kTileRows - 1) / cpu::kTileRows;
      parallel_for((p1 - p0) * strips, ctx.worker().cpu_threads, 1, [&](std::size_t b, std::size_t e) {
        for (std::size_t u = b; u < e; ++u) {
          const std::size_t plane = p0 + u / strips;
          const std::size_t r0 = plane * ny + (u % strips) * cpu::kTileRows;
          variant.kernel(cpu_args, r0, std::min(r0 + cpu::kTileRows, (plane + 1) * ny));
        }
      });
      return;
    }
#if MOLACCEL_HAVE_CUDA
    const std::string name = cuda_backend::evaluate_planes(ctx, gpu, p0, p1);
    std::lock_guard lock(name_mutex);
    if (gpu_kernel.empty()) gpu_kernel = name;
#else
    MOLACCEL_THROW(NotCompiled, "the CUDA orbital backends (this build has no CUDA)");
#endif
  };
  const JobStats stats = target.resources ? run_tiles(*target.resources, tiles.count(), tile_fn, job)
                                          : target.pool->run(tiles.count(), tile_fn, job);
  if (info) {
    info->job = stats;
    std::string used;
    bool any_cpu = backend == Backend::cpu;
    const auto& workers = target.pool->workers();
    for (std::size_t w = 0; w < workers.size() && w < stats.tiles_per_worker.size(); ++w)
      any_cpu = any_cpu || (workers[w].kind == WorkerInfo::Kind::cpu && stats.tiles_per_worker[w] > 0);
    if (!gpu_kernel.empty()) used = gpu_kernel;
    if (any_cpu) used += (used.empty() ? "" : "+") + variant.name;
    info->backend = used;
    info->seconds = now_seconds() - start;
    info->exp_per_point = detail::exp_per_point(basis, grid);
    info->exp_per_point_unscreened = static_cast<double>(basis.exponent.size());
  }
}

void check_output(const float* out, std::size_t size, std::size_t needed) {
  if (out == nullptr || size < needed)
    throw Error(fmt::format("orbital: output buffer of {} values, {} needed", out ? size : 0, needed));
}

void orbitals_into(const Target& target, const Wavefunction& wfn, const GridSpec& grid,
                   const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                   const EvaluateOptions& options, EvaluationInfo* info) {
  validate(wfn, grid, orbitals);
  check_output(out, size, grid.point_count() * orbitals.size());
  const Backend backend = resolve(options.backend, target);
  if (backend == Backend::reference) {
    const double start = now_seconds();
    const auto values = reference::evaluate_orbitals(wfn, grid, orbitals, target.cpu_threads);
    std::copy(values.begin(), values.end(), out);
    if (info) {
      info->backend = "reference";
      info->seconds = now_seconds() - start;
    }
    return;
  }
  run_fast(target, wfn, grid, orbitals, {}, backend, options, info, out);
}

void density_into(const Target& target, const Wavefunction& wfn, const GridSpec& grid, DensityKind kind,
                  float* out, std::size_t size, const EvaluateOptions& options, EvaluationInfo* info) {
  validate(wfn, grid, {});
  check_output(out, size, grid.point_count());
  const Backend backend = resolve(options.backend, target);
  if (backend == Backend::reference) {
    const double start = now_seconds();
    const auto values = reference::evaluate_density(wfn, grid, kind, target.cpu_threads);
    std::copy(values.begin(), values.end(), out);
    if (info) {
      info->backend = "reference";
      info->seconds = now_seconds() - start;
    }
    return;
  }
  const detail::DensityTerms terms = detail::density_terms(wfn, kind);
  run_fast(target, wfn, grid, terms.orbitals, terms.weights, backend, options, info, out);
}

}  // namespace

std::vector<float> evaluate_orbitals(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                                     const std::vector<OrbitalRef>& orbitals, const EvaluateOptions& options,
                                     EvaluationInfo* info) {
  validate(wfn, grid, orbitals);
  std::vector<float> out(grid.point_count() * orbitals.size());
  orbitals_into(target_of(resources), wfn, grid, orbitals, out.data(), out.size(), options, info);
  return out;
}

void evaluate_orbitals_into(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                            const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                            const EvaluateOptions& options, EvaluationInfo* info) {
  orbitals_into(target_of(resources), wfn, grid, orbitals, out, size, options, info);
}

std::vector<float> evaluate_density(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                                    DensityKind kind, const EvaluateOptions& options, EvaluationInfo* info) {
  validate(wfn, grid, {});
  std::vector<float> out(grid.point_count());
  density_into(target_of(resources), wfn, grid, kind, out.data(), out.size(), options, info);
  return out;
}

namespace detail {

void evaluate_orbitals_on_pool(WorkerPool& pool, const Wavefunction& wfn, const GridSpec& grid,
                               const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                               const EvaluateOptions& options, EvaluationInfo* info) {
  orbitals_into(target_of(pool), wfn, grid, orbitals, out, size, options, info);
}

void evaluate_density_on_pool(WorkerPool& pool, const Wavefunction& wfn, const GridSpec& grid, DensityKind kind,
                              float* out, std::size_t size, const EvaluateOptions& options, EvaluationInfo* info) {
  density_into(target_of(pool), wfn, grid, kind, out, size, options, info);
}

}  // namespace detail

}  // namespace molaccel::orbital

// Front of the orbital engine: validates a request, takes the packed basis and coefficients from
// the request cache, and runs grid planes on the runtime scheduler's CPU and GPU workers: on GPUs
// as the chunk pool (chunk_queue.hpp: one share per worker claiming chunks; a failed share's
// chunks are redone elsewhere), otherwise as tiles of planes.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "orbital/basis_functions.hpp"
#include "orbital/chunk_queue.hpp"
#include "orbital/cpu/cpu_kernel.hpp"
#include "orbital/evaluate_on_pool.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital/tuning.hpp"
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
      throw InputError(wfn.source, 0,
                       fmt::format("orbital {} does not exist ({} orbitals)", ref.index + 1, set.count()));
  }
}

// Where a request runs: a worker pool (GPU workers and/or a CPU worker) and the CPU threads.
struct Target {
  WorkerPool* pool = nullptr;
  bool gpu = false;  // the pool has GPU workers
  int cpu_threads = 1;
  const Resources* resources = nullptr;  // for progress bars, when there is one
  // Only for error messages: Resources::describe() queries the driver for every GPU's
  // properties, host time that a request should not pay.
  std::string describe() const {
    if (resources) return resources->describe();
    std::string d;
    for (const auto& w : pool->workers()) d += (d.empty() ? "" : ", ") + w.name();
    return d;
  }
};

Target target_of(const Resources& resources) {
  return {&resources.pool(), resources.uses_gpu(), resources.cpu_threads(), &resources};
}

Target target_of(WorkerPool& pool) {
  Target t;
  t.pool = &pool;
  for (const auto& w : pool.workers()) {
    t.gpu = t.gpu || w.kind == WorkerInfo::Kind::gpu;
    if (w.kind == WorkerInfo::Kind::cpu) t.cpu_threads = std::max(t.cpu_threads, w.cpu_threads);
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
      throw DeviceUnavailable(fmt::format("backend {} needs a GPU but the resources are {}",
                                          to_string(backend), target.describe()));
  }
  return backend;
}

// Grid planes per scheduler tile when the chunk pool does not run (CPU pools, or tiles asked for
// through EvaluateOptions::planes_per_tile): 2 planes by default, for load balance.
std::size_t planes_per_tile(std::size_t requested) {
  return requested > 0 ? requested : 2;
}

// Request-invariant host preparation, kept across requests (a batch of requests asks for the same
// basis set and orbitals again and again; on a GPU this host work is time no GPU count shrinks):
// the packed basis (per basis set and screening tolerance), its exp()-per-point estimate per grid,
// and the Cartesian coefficients per selection of orbitals. Entries are found by exact comparison
// of their inputs (no hashing: a changed coefficient or position is a miss), the last few kept.
class RequestCache {
 public:
  struct Prepared {
    std::shared_ptr<const detail::PackedBasis> basis;
    std::shared_ptr<const std::vector<float>> coefficients;
    std::uint64_t basis_id = 0, coefficients_id = 0;
  };

  static RequestCache& instance() {
    static RequestCache* cache = new RequestCache;  // never destroyed (used until exit)
    return *cache;
  }

  Prepared get(const Wavefunction& wfn, double tolerance, const std::vector<OrbitalRef>& orbitals) {
    std::vector<double> basis_key = basis_signature(wfn, tolerance);
    const std::size_t n = static_cast<std::size_t>(wfn.function_count());
    Prepared out;
    std::shared_ptr<BasisEntry> basis;
    {
      std::lock_guard lock(mutex_);
      basis = find_basis(basis_key);
      if (basis) {
        for (const auto& c : coefficients_)
          if (c->basis_id == basis->id && same_rows(c->rows, wfn, orbitals, n)) {
            out.basis = basis->basis;
            out.basis_id = basis->id;
            out.coefficients = c->coefficients;
            out.coefficients_id = c->id;
            return out;
          }
      }
    }
    std::vector<double> rows;  // the selected MO coefficients, as given (layout: see same_rows)
    rows.reserve(orbitals.size() * (n + 2));
    for (const auto& ref : orbitals) {
      const OrbitalSet& set = ref.spin == Spin::alpha ? wfn.alpha : wfn.beta;
      rows.push_back(ref.spin == Spin::alpha ? 0.0 : 1.0);
      rows.push_back(static_cast<double>(ref.index));
      rows.insert(rows.end(), set.coefficients.begin() + static_cast<std::ptrdiff_t>(ref.index * n),
                  set.coefficients.begin() + static_cast<std::ptrdiff_t>((ref.index + 1) * n));
    }
    std::vector<detail::ExpandedShell> expanded;
    if (!basis) {
      expanded = detail::expand_shells(wfn);
      auto entry = std::make_shared<BasisEntry>();
      entry->key = std::move(basis_key);
      entry->expanded = expanded;
      entry->basis =
          std::make_shared<const detail::PackedBasis>(detail::pack_basis(wfn, expanded, tolerance));
      entry->id = ++next_id_;
      std::lock_guard lock(mutex_);
      bases_.insert(bases_.begin(), entry);
      if (bases_.size() > 4) bases_.pop_back();
      basis = entry;
    }
    auto coefficients = std::make_shared<CoefficientEntry>();
    coefficients->basis_id = basis->id;
    coefficients->coefficients = std::make_shared<const std::vector<float>>(
        detail::cartesian_coefficients(wfn, basis->expanded, orbitals));
    out.basis = basis->basis;
    out.basis_id = basis->id;
    out.coefficients = coefficients->coefficients;
    if (rows.size() * sizeof(double) > (64u << 20)) return out;  // too large to keep: id 0, not reused
    coefficients->rows = std::move(rows);
    coefficients->id = ++next_id_;
    {
      std::lock_guard lock(mutex_);
      coefficients_.insert(coefficients_.begin(), coefficients);
      if (coefficients_.size() > 8) coefficients_.pop_back();
    }
    out.coefficients_id = coefficients->id;
    return out;
  }

  // detail::exp_per_point (4096 sample points x atoms x shells), once per basis entry and grid.
  double exp_per_point(std::uint64_t basis_id, const detail::PackedBasis& basis, const GridSpec& grid) {
    {
      std::lock_guard lock(mutex_);
      for (const auto& e : exp_)
        if (e.basis_id == basis_id && std::memcmp(&e.grid, &grid, sizeof(GridSpec)) == 0) return e.value;
    }
    const double value = detail::exp_per_point(basis, grid);
    std::lock_guard lock(mutex_);
    exp_.insert(exp_.begin(), ExpEntry{basis_id, grid, value});
    if (exp_.size() > 8) exp_.pop_back();
    return value;
  }

 private:
  struct BasisEntry {
    std::vector<double> key;
    std::vector<detail::ExpandedShell> expanded;
    std::shared_ptr<const detail::PackedBasis> basis;
    std::uint64_t id = 0;
  };
  struct CoefficientEntry {
    std::uint64_t basis_id = 0;
    std::vector<double> rows;
    std::shared_ptr<const std::vector<float>> coefficients;
    std::uint64_t id = 0;
  };
  struct ExpEntry {
    std::uint64_t basis_id;
    GridSpec grid;
    double value;
  };

  // Per orbital: spin (0 alpha, 1 beta), index, its n MO coefficients; compared in place.
  static bool same_rows(const std::vector<double>& rows, const Wavefunction& wfn,
                        const std::vector<OrbitalRef>& orbitals, std::size_t n) {
    if (rows.size() != orbitals.size() * (n + 2)) return false;
    const double* r = rows.data();
    for (const auto& ref : orbitals) {
      const OrbitalSet& set = ref.spin == Spin::alpha ? wfn.alpha : wfn.beta;
      if (r[0] != (ref.spin == Spin::alpha ? 0.0 : 1.0) || r[1] != static_cast<double>(ref.index))
        return false;
      if (n > 0 && std::memcmp(r + 2, set.coefficients.data() + ref.index * n, n * sizeof(double)) != 0)
        return false;
      r += n + 2;
    }
    return true;
  }
  static bool same(const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
  }
  // Everything pack_basis reads: atom positions, shells (atom, l, pure, exponents, contraction
  // coefficients) and the tolerance.
  static std::vector<double> basis_signature(const Wavefunction& wfn, double tolerance) {
    std::vector<double> key{tolerance, static_cast<double>(wfn.atoms.size()),
                            static_cast<double>(wfn.shells.size())};
    for (const Atom& a : wfn.atoms) key.insert(key.end(), a.position.begin(), a.position.end());
    for (const Shell& sh : wfn.shells) {
      key.push_back(sh.atom);
      key.push_back(sh.l);
      key.push_back(sh.pure ? 1.0 : 0.0);
      key.push_back(static_cast<double>(sh.exponents.size()));
      key.insert(key.end(), sh.exponents.begin(), sh.exponents.end());
      key.push_back(static_cast<double>(sh.coefficients.size()));
      key.insert(key.end(), sh.coefficients.begin(), sh.coefficients.end());
    }
    return key;
  }
  std::shared_ptr<BasisEntry> find_basis(const std::vector<double>& key) {
    for (const auto& b : bases_)
      if (same(b->key, key)) return b;
    return nullptr;
  }

  std::mutex mutex_;
  std::atomic<std::uint64_t> next_id_{0};
  std::vector<std::shared_ptr<BasisEntry>> bases_;
  std::vector<std::shared_ptr<CoefficientEntry>> coefficients_;
  std::vector<ExpEntry> exp_;
};

// GPU pools take the chunk pool (chunk_queue.hpp) unless tiles of a given size are asked for
// (EvaluateOptions::planes_per_tile: tests cut bricks with it).
bool use_chunk_pool(const Target& target, Backend backend, const EvaluateOptions& options) {
  return target.gpu && backend != Backend::cpu && options.planes_per_tile == 0;
}

// One request for the fast backends: orbital values (weights empty) or a weighted density, into
// `out` (orbitals x points, or points for a density; every value is written). `tuning`: the GPU
// settings a test or benchmark asks for (nullptr: detail::tuning_for).
void run_fast(const Target& target, const Wavefunction& wfn, const GridSpec& grid,
              const std::vector<OrbitalRef>& orbitals, const std::vector<float>& weights, Backend backend,
              const EvaluateOptions& options, EvaluationInfo* info, float* out,
              const detail::Tuning* tuning) {
  // The cpu backend on GPU resources: a CPU-only pool, so every tile runs threaded on the CPU.
  if (backend == Backend::cpu && target.gpu) {
    const Resources cpu = Resources::cpu(target.cpu_threads);
    return run_fast(target_of(cpu), wfn, grid, orbitals, weights, backend, options, info, out, tuning);
  }
  const double start = now_seconds();
  const bool density = !weights.empty() || orbitals.empty();
  const std::size_t n_points = grid.point_count();
  if (orbitals.empty()) {
    std::fill(out, out + n_points, 0.0f);
    return;
  }
  const RequestCache::Prepared prepared =
      RequestCache::instance().get(wfn, options.screening_tolerance, orbitals);
  const detail::PackedBasis& basis = *prepared.basis;
  const std::vector<float>& coefficients = *prepared.coefficients;
  const bool trace = trace_enabled("orbital");
  const double prepared_at = trace ? now_seconds() : 0.0;

  const bool pool_mode = use_chunk_pool(target, backend, options);
  const TileRange tiles{grid.counts[0], planes_per_tile(options.planes_per_tile)};
  const cpu::Variant& variant = cpu::select_variant();
  std::string gpu_kernel;
  [[maybe_unused]] std::mutex name_mutex;  // GPU kernel name, written by GPU workers only

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
  gpu.jit_when_ready = options.backend == Backend::automatic;  // a new basis: generic while JIT compiles
  gpu.basis_id = prepared.basis_id;
  gpu.coefficients_id = prepared.coefficients_id;
  int first_gpu = -1;
  for (const auto& w : target.pool->workers())
    if (w.kind == WorkerInfo::Kind::gpu) {
      first_gpu = w.device;
      break;
    }
  gpu.tuning = tuning ? *tuning : detail::tuning_for(first_gpu, {orbitals.size(), density});
  // The JIT program is compiled once here (the GPU workers then find it in the JIT cache's memory
  // and only load it), not by the first tile of each worker.
  if (target.gpu && backend != Backend::cpu && first_gpu >= 0) cuda_backend::precompile(gpu, first_gpu);
#endif

  JobOptions job;
  job.name = density ? "orbital density" : "orbital grid";
  job.inject_fault = options.inject_fault;
  const double compiled_at = trace ? now_seconds() : 0.0;

  // Chunk pool: one share (scheduler tile) per worker; the shares claim the chunks.
  std::unique_ptr<detail::ChunkQueue> queue;
  if (pool_mode) {
#if MOLACCEL_HAVE_CUDA
    queue = std::make_unique<detail::ChunkQueue>(cuda_backend::plan_chunks(gpu),
                                                 target.pool->workers().size(), options.inject_fault);
#endif
  }
  // Planes [p0, p1) on a CPU worker. Work items: strips of cpu::kTileRows rows of one plane (the
  // kernel's tiles; a single row would cost a whole tile).
  const auto cpu_planes = [&](const WorkerContext& ctx, std::size_t p0, std::size_t p1) {
    const std::size_t ny = grid.counts[1];
    const std::size_t strips = (ny + cpu::kTileRows - 1) / cpu::kTileRows;
    parallel_for((p1 - p0) * strips, ctx.worker().cpu_threads, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t u = b; u < e; ++u) {
        const std::size_t plane = p0 + u / strips;
        const std::size_t r0 = plane * ny + (u % strips) * cpu::kTileRows;
        variant.kernel(cpu_args, r0, std::min(r0 + cpu::kTileRows, (plane + 1) * ny));
      }
    });
  };
  // A share that fails has given its chunks back (chunk_queue.hpp) and ends without an error for
  // the scheduler: the failure is the chunks', which other workers redo.
  const TileFunction share_fn = [&](WorkerContext& ctx, std::size_t) {
    try {
      if (ctx.worker().kind == WorkerInfo::Kind::cpu) {
        std::size_t c = 0;
        while (queue->take(ctx.worker(), c)) {
          try {
            cpu_planes(ctx, queue->chunk(c).first, queue->chunk(c).first + queue->chunk(c).second);
          } catch (...) {
            queue->give_back(c, &ctx.worker());
            throw;
          }
          queue->done(ctx.worker());
        }
        return;
      }
#if MOLACCEL_HAVE_CUDA
      const std::string name = cuda_backend::evaluate_chunks(ctx, gpu, *queue);
      std::lock_guard lock(name_mutex);
      if (gpu_kernel.empty()) gpu_kernel = name;
#endif
    } catch (const Cancelled&) {
      throw;
    } catch (...) {
      std::string what = "unknown error";
      try {
        throw;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      log_warn("{}: a share failed on {}, its chunks go to other workers: {}", job.name, ctx.worker().name(),
               what);
      queue->fail(std::current_exception());
    }
  };
  const TileFunction tile_fn = [&](WorkerContext& ctx, std::size_t tile) {
    const std::size_t p0 = tiles.begin(tile), p1 = tiles.end(tile);
    if (ctx.worker().kind == WorkerInfo::Kind::cpu || backend == Backend::cpu) {
      cpu_planes(ctx, p0, p1);
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
  const std::size_t n_tiles = queue ? target.pool->workers().size() : tiles.count();
  const TileFunction& fn = queue ? share_fn : tile_fn;
  const auto run_round = [&] {
    return target.resources ? run_tiles(*target.resources, n_tiles, fn, job)
                            : target.pool->run(n_tiles, fn, job);
  };
  JobStats stats = run_round();
  // Chunks left when every share has ended (given back by failed shares): another round of
  // shares, as long as rounds make progress (ChunkQueue::progress).
  while (queue && queue->left() > 0) {
    const std::size_t before = queue->progress();
    const JobStats round = run_round();
    stats.retries += round.retries;
    stats.seconds += round.seconds;
    if (queue->progress() == before) queue->rethrow_last_failure();
  }
  if (queue) {  // report chunks (the shares are one per worker)
    stats.retries += queue->failures();
    stats.tiles = queue->size();
    std::vector<std::size_t> done = queue->done_per_worker();
    done.resize(stats.tiles_per_worker.size(), 0);
    stats.tiles_per_worker = std::move(done);
  }
  if (trace) {
    // Also the time since the previous request ended: what the caller and the entry checks took.
    static std::atomic<double> last_end{0.0};
    const double end = now_seconds(), previous = last_end.exchange(end);
    trace_message("orbital",
                  fmt::format(fmt::runtime("request: {} {}, {:.3f} ms after the previous one, preparation "
                                           "{:.3f} ms, JIT {:.3f} ms, {} {}, run {:.3f} ms"),
                              orbitals.size(), density ? "orbitals (density)" : "orbitals",
                              previous > 0 ? (start - previous) * 1e3 : 0.0, (prepared_at - start) * 1e3,
                              (compiled_at - prepared_at) * 1e3, stats.tiles, queue ? "chunks" : "tiles",
                              (end - compiled_at) * 1e3));
  }
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
    info->exp_per_point = RequestCache::instance().exp_per_point(prepared.basis_id, basis, grid);
    info->exp_per_point_unscreened = static_cast<double>(basis.exponent.size());
  }
}

void check_output(const float* out, std::size_t size, std::size_t needed) {
  if (out == nullptr || size < needed)
    throw Error(fmt::format("orbital: output buffer of {} values, {} needed", out ? size : 0, needed));
}

void orbitals_into(const Target& target, const Wavefunction& wfn, const GridSpec& grid,
                   const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                   const EvaluateOptions& options, EvaluationInfo* info,
                   const detail::Tuning* tuning = nullptr) {
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
  run_fast(target, wfn, grid, orbitals, {}, backend, options, info, out, tuning);
}

void density_into(const Target& target, const Wavefunction& wfn, const GridSpec& grid, DensityKind kind,
                  float* out, std::size_t size, const EvaluateOptions& options, EvaluationInfo* info,
                  const detail::Tuning* tuning = nullptr) {
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
  run_fast(target, wfn, grid, terms.orbitals, terms.weights, backend, options, info, out, tuning);
}

}  // namespace

std::vector<float> evaluate_orbitals(const Resources& resources, const Wavefunction& wfn,
                                     const GridSpec& grid, const std::vector<OrbitalRef>& orbitals,
                                     const EvaluateOptions& options, EvaluationInfo* info) {
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

void evaluate_density_into(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                           DensityKind kind, float* out, std::size_t size, const EvaluateOptions& options,
                           EvaluationInfo* info) {
  density_into(target_of(resources), wfn, grid, kind, out, size, options, info);
}

namespace detail {

void evaluate_orbitals_on_pool(WorkerPool& pool, const Wavefunction& wfn, const GridSpec& grid,
                               const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                               const EvaluateOptions& options, EvaluationInfo* info, const Tuning* tuning) {
  orbitals_into(target_of(pool), wfn, grid, orbitals, out, size, options, info, tuning);
}

void evaluate_density_on_pool(WorkerPool& pool, const Wavefunction& wfn, const GridSpec& grid,
                              DensityKind kind, float* out, std::size_t size, const EvaluateOptions& options,
                              EvaluationInfo* info, const Tuning* tuning) {
  density_into(target_of(pool), wfn, grid, kind, out, size, options, info, tuning);
}

void evaluate_orbitals_tuned(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                             const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                             const EvaluateOptions& options, const Tuning& tuning, EvaluationInfo* info) {
  orbitals_into(target_of(resources), wfn, grid, orbitals, out, size, options, info, &tuning);
}

void evaluate_density_tuned(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                            DensityKind kind, float* out, std::size_t size, const EvaluateOptions& options,
                            const Tuning& tuning, EvaluationInfo* info) {
  density_into(target_of(resources), wfn, grid, kind, out, size, options, info, &tuning);
}

PreparedRequest prepare_request(const Wavefunction& wfn, double screening_tolerance,
                                const std::vector<OrbitalRef>& orbitals) {
  const RequestCache::Prepared p = RequestCache::instance().get(wfn, screening_tolerance, orbitals);
  return {p.basis, p.coefficients, p.basis_id, p.coefficients_id};
}

}  // namespace detail

}  // namespace molaccel::orbital

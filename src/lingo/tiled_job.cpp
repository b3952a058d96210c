// The tiled job of tiled_job.hpp: preparing a request for its engine, the per-tile operations on
// each kind of worker, and the tile shapes of dense jobs.
#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

#include "lingo/reference/reference.hpp"
#include "lingo/similarity_math.hpp"
#include "lingo/tiled_job.hpp"
#include "runtime/host_resources.hpp"

namespace molaccel::lingo::detail {

std::vector<std::uint8_t> convert_block(const std::vector<float>& block, OutputType type) {
  std::vector<std::uint8_t> bytes(block.size() * element_bytes(type));
  if (type == OutputType::fp32) {
    if (!block.empty()) std::memcpy(bytes.data(), block.data(), bytes.size());
  } else if (type == OutputType::fp16) {
    for (std::size_t i = 0; i < block.size(); ++i) {
      const std::uint16_t h = detail::float_to_half_bits(block[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  } else {
    for (std::size_t i = 0; i < block.size(); ++i) bytes[i] = detail::similarity_to_u8(block[i]);
  }
  return bytes;
}

Job::Job(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
         const ComputeOptions& options, bool need_sorted_cpu)
    : queries_(queries),
      db_(db ? *db : queries),
      self_(db == nullptr),
      options_(options),
      resources_(pick_resources(resources, options.backend)) {
  if (db && db->q != queries.q)
    throw InputError("--q", 0, fmt::format("queries use q={} but the database q={}", queries.q, db->q));
  if (db_.size() > 0xfffffffful || queries.size() > 0xfffffffful)
    throw InputError("<input>", 0, "more than 2^32-1 molecules");
  const double t0 = now_seconds();
  engine_ = resolve_engine();
  if (engine_ != Engine::reference) {
    encoding_ = detail::encode(queries_, self_ ? nullptr : &db_, resources_.cpu_threads());
    if (resources_.uses_cpu()) {
      chunk_ = options.tile_columns > 0 && options.tile_columns < cpu::kDefaultChunk ? options.tile_columns
                                                                                     : cpu::kDefaultChunk;
      cpu_dense_ =
          cpu::build_database(encoding_.database, options.metric, false, chunk_, resources_.cpu_threads());
      if (need_sorted_cpu)
        cpu_sorted_ =
            cpu::build_database(encoding_.database, options.metric, true, chunk_, resources_.cpu_threads());
      cpu::select_score_chunk(&cpu_variant_);
    }
#ifdef MOLACCEL_HAVE_CUDA
    if (engine_ == Engine::cuda) gpu_ = std::make_unique<cuda_backend::GpuJob>(encoding_, options.metric);
#endif
  }
  prepare_seconds_ = now_seconds() - t0;
}

std::string Job::backend_name() const {
  switch (engine_) {
    case Engine::reference:
      return "reference";
    case Engine::cpu:
      return "cpu/" + cpu_variant_;
    case Engine::cuda: {
      std::string s = "cuda:";
      for (std::size_t i = 0; i < resources_.gpus().size(); ++i)
        s += (i ? "," : "") + std::to_string(resources_.gpus()[i]);
#ifdef MOLACCEL_HAVE_CUDA
      s += "/" + gpu_->kernel_name();
#endif
      if (resources_.uses_cpu()) s += "+cpu/" + cpu_variant_;
      return s;
    }
  }
  return "?";
}

std::size_t Job::default_tile_cols(std::size_t fallback) const {
  if (options_.tile_columns) return round_up(options_.tile_columns, std::max<std::size_t>(chunk_, 1));
  return fallback;
}

std::size_t Job::gpu_column_cap() const {
  if (engine_ != Engine::cuda) return std::numeric_limits<std::size_t>::max();
  std::size_t free_bytes = std::numeric_limits<std::size_t>::max();
  for (int gpu : resources_.gpus())  // only this job's GPUs: no context is created on the others
    free_bytes = std::min(free_bytes, molaccel::detail::gpu_free_memory(gpu));
  if (free_bytes == std::numeric_limits<std::size_t>::max() || db_.size() == 0)
    return std::numeric_limits<std::size_t>::max();
  double lingos = 0;
  for (auto m : db_.magnitudes) lingos += m;
  const double per_molecule = 20.0 * lingos / static_cast<double>(db_.size()) + 48.0;
  const auto cap = static_cast<std::size_t>(static_cast<double>(free_bytes / 4) / per_molecule);
  return std::max(chunk_, cap / chunk_ * chunk_);
}

std::size_t Job::dense_budget() const {
#ifdef MOLACCEL_HAVE_CUDA
  if (gpu_) return gpu_->dense_budget(resources_.gpus().front());
#endif
  return std::size_t{1} << 22;  // CPU: 16 MiB of floats per tile
}

JobStats Job::run(const Grid& grid, const std::string& name,
                  const std::function<void(WorkerContext&, const Rect&)>& fn) const {
  JobOptions job = options_.job;
  job.name = name;
  return run_tiles(
      resources_, grid.tiles.size(), [&](WorkerContext& ctx, std::size_t t) { fn(ctx, grid.rect(t)); }, job);
}

void Job::dense(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const {
  if (engine_ == Engine::reference) return dense_serial(rect, out, ld);  // the oracle: one thread
#ifdef MOLACCEL_HAVE_CUDA
  if (ctx.worker().kind == WorkerInfo::Kind::gpu) return gpu_->dense(ctx, rect, out, ld);
#endif
  dense_cpu(ctx, rect, out, ld);
}

void Job::dense_stream(WorkerContext& ctx, const Rect& rect, OutputType type, const RowSink& sink) const {
#ifdef MOLACCEL_HAVE_CUDA
  if (engine_ == Engine::cuda && ctx.worker().kind == WorkerInfo::Kind::gpu)
    return gpu_->dense_stream(ctx, rect, type, sink);
#endif
  std::vector<float> block(rect.rows() * rect.cols());
  dense(ctx, rect, block.data(), rect.cols());
  const auto bytes = convert_block(block, type);
  if (rect.rows() > 0) sink(0, rect.rows(), bytes.data());
}

std::vector<Hit> Job::top_k(WorkerContext& ctx, const Rect& rect, std::size_t k) const {
#ifdef MOLACCEL_HAVE_CUDA
  if (engine_ == Engine::cuda && ctx.worker().kind == WorkerInfo::Kind::gpu) return gpu_->top_k(ctx, rect, k);
#endif
  std::vector<Hit> hits;
  std::mutex mutex;
  const int threads = engine_ == Engine::reference ? 1 : ctx.worker().cpu_threads;
  parallel_for(rect.rows(), threads, 1, [&](std::size_t b, std::size_t e) {
    std::vector<float> row(rect.cols());
    std::vector<Hit> local;
    for (std::size_t r = rect.row_begin + b; r < rect.row_begin + e; ++r) {
      Rect one{r, r + 1, rect.col_begin, rect.col_end};
      dense_serial(one, row.data(), rect.cols());
      select_top_k(row.data(), one, k, local);
    }
    std::lock_guard<std::mutex> lock(mutex);
    hits.insert(hits.end(), local.begin(), local.end());
  });
  return hits;
}

std::vector<Hit> Job::threshold(WorkerContext& ctx, const Rect& rect, float t, RunInfo& info,
                                std::mutex& info_mutex) const {
#ifdef MOLACCEL_HAVE_CUDA
  if (engine_ == Engine::cuda && ctx.worker().kind == WorkerInfo::Kind::gpu) {
    auto hits = gpu_->threshold(ctx, rect, t, self_);
    std::lock_guard<std::mutex> lock(info_mutex);
    info.pairs += rect.rows() * rect.cols();
    return hits;
  }
#endif
  if (engine_ != Engine::reference && cpu_sorted_ && rect.col_begin == 0 && rect.col_end == db_.size()) {
    auto result = cpu::score_threshold(*cpu_sorted_, encoding_.query_set(), options_.metric, t, self_,
                                       rect.row_begin, rect.row_end, ctx.worker().cpu_threads);
    std::lock_guard<std::mutex> lock(info_mutex);
    info.pairs += result.evaluated;
    info.pairs_skipped += result.skipped;
    return std::move(result.hits);
  }
  std::vector<float> block(rect.rows() * rect.cols());
  dense(ctx, rect, block.data(), rect.cols());
  std::vector<Hit> hits;
  for (std::size_t r = rect.row_begin; r < rect.row_end; ++r)
    for (std::size_t c = rect.col_begin; c < rect.col_end; ++c) {
      if (self_ && c <= r) continue;
      const float s = block[(r - rect.row_begin) * rect.cols() + (c - rect.col_begin)];
      if (s >= t) hits.push_back({static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(c), s});
    }
  std::lock_guard<std::mutex> lock(info_mutex);
  info.pairs += rect.rows() * rect.cols();
  return hits;
}

void Job::fill_info(RunInfo* info, const JobStats& stats, double t0) const {
  if (!info) return;
  info->backend = backend_name();
  info->job = stats;
  info->seconds = now_seconds() - t0;
  info->prepare_seconds = prepare_seconds_;
}

Resources Job::pick_resources(const Resources& resources, Backend backend) {
  if (backend == Backend::reference) return Resources::cpu(1);
  if (backend == Backend::cpu && resources.uses_gpu()) return Resources::cpu(resources.cpu_threads());
  return resources;
}

Engine Job::resolve_engine() const {
  switch (options_.backend) {
    case Backend::reference:
      return Engine::reference;
    case Backend::cpu:
      return Engine::cpu;
    case Backend::cuda:
#ifndef MOLACCEL_HAVE_CUDA
      throw NotCompiled("the CUDA LINGO backend (this build has no CUDA)", __FILE__, __LINE__);
#else
      if (!resources_.uses_gpu())
        throw DeviceUnavailable("the cuda backend needs a GPU in the resources (--device gpu)", __FILE__,
                                __LINE__);
      return Engine::cuda;
#endif
    case Backend::automatic:
      break;
  }
#ifdef MOLACCEL_HAVE_CUDA
  if (resources_.uses_gpu()) return Engine::cuda;
#endif
  return Engine::cpu;
}

void Job::dense_serial(const Rect& rect, float* out, std::size_t ld) const {
  if (engine_ == Engine::reference) {
    for (std::size_t r = rect.row_begin; r < rect.row_end; ++r)
      for (std::size_t c = rect.col_begin; c < rect.col_end; ++c)
        out[(r - rect.row_begin) * ld + (c - rect.col_begin)] =
            reference::pair_similarity(queries_, r, db_, c, options_.metric);
    return;
  }
  cpu_rect(rect, out, ld, 1);
}

void Job::dense_cpu(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const {
  cpu_rect(rect, out, ld, ctx.worker().cpu_threads);
}

void Job::cpu_rect(const Rect& rect, float* out, std::size_t ld, int threads) const {
  MOLACCEL_EXPECTS(cpu_dense_.has_value(), "CPU database not prepared");
  MOLACCEL_EXPECTS(rect.col_begin % chunk_ == 0, "tile columns must start on a CPU chunk");
  const std::size_t c0 = rect.col_begin / chunk_;
  const std::size_t c1 = (rect.col_end + chunk_ - 1) / chunk_;
  if (rect.col_end == std::min(db_.size(), c1 * chunk_)) {
    cpu::score_dense(*cpu_dense_, encoding_.query_set(), options_.metric, rect.row_begin, rect.row_end, c0,
                     c1, out, ld, threads);
    return;
  }
  // The rect ends inside a chunk: score whole chunks into a scratch block, then copy.
  const std::size_t wide = std::min(db_.size(), c1 * chunk_) - rect.col_begin;
  std::vector<float> scratch(rect.rows() * wide);
  cpu::score_dense(*cpu_dense_, encoding_.query_set(), options_.metric, rect.row_begin, rect.row_end, c0, c1,
                   scratch.data(), wide, threads);
  for (std::size_t r = 0; r < rect.rows(); ++r)
    std::copy_n(scratch.data() + r * wide, rect.cols(), out + r * ld);
}

void Job::select_top_k(const float* row, const Rect& rect, std::size_t k, std::vector<Hit>& out) {
  const std::size_t n = rect.cols();
  const std::size_t take = std::min(k, n);
  if (take == 0) return;
  const auto query = static_cast<std::uint32_t>(rect.row_begin);
  const std::size_t first = out.size();
  for (std::size_t c = 0; c < n; ++c) {
    const Hit h{query, static_cast<std::uint32_t>(rect.col_begin + c), row[c]};
    if (out.size() - first < take) {
      out.push_back(h);
      std::push_heap(out.begin() + first, out.end(), better);
    } else if (h.similarity > out[first].similarity) {
      std::pop_heap(out.begin() + first, out.end(), better);
      out.back() = h;
      std::push_heap(out.begin() + first, out.end(), better);
    }
  }
  std::sort_heap(out.begin() + first, out.end(), better);  // best first, like the GPU's rows
}

Grid dense_grid(const Job& job, const ComputeOptions& options, bool whole_rows, bool allow_upper) {
  const std::size_t nq = job.queries().size(), nd = job.db().size();
  const std::size_t budget = job.dense_budget();
  if (job.self() && !whole_rows && allow_upper) {
    std::size_t side = options.tile_columns ? job.default_tile_cols(0) : (job.gpu() ? 8192 : 4096);
    side = round_up(side, job.chunk());
    return Grid(nq, nd, side, side, true);
  }
  std::size_t cols =
      whole_rows ? std::max<std::size_t>(nd, 1) : job.default_tile_cols(std::max<std::size_t>(nd, 1));
  if (!whole_rows) cols = std::min(cols, job.gpu_column_cap());
  std::size_t rows = options.tile_rows ? options.tile_rows : std::max<std::size_t>(1, budget / cols);
  if (!options.tile_rows && job.gpu()) rows = std::max<std::size_t>(32, rows / 32 * 32);
  return Grid(nq, nd, rows, cols, false);
}

}  // namespace molaccel::lingo::detail

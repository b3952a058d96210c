// Front file: turns a request (matrix, search, neighbours, clusters) into tiles for the runtime's
// scheduler and hands each tile to the backend of the worker that runs it: the reference, the CPU
// inverted-index kernel, or the CUDA kernels. Results are merged here, on the host.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <unistd.h>

#include "lingo/cpu/cpu_backend.hpp"
#include "lingo/cuda/cuda_backend.hpp"
#include "lingo/encoding.hpp"
#include "lingo/reference/reference.hpp"
#include "lingo/similarity_math.hpp"
#include "molaccel/lingo.hpp"
#include "runtime/host_resources.hpp"

namespace molaccel::lingo {

float similarity(const MoleculeSet& a, std::size_t i, const MoleculeSet& b, std::size_t j, Metric metric) {
  MOLACCEL_EXPECTS(i < a.size() && j < b.size(), "molecule index out of range");
  MOLACCEL_EXPECTS(a.q == b.q, "both molecules must use the same q");
  return reference::pair_similarity(a, i, b, j, metric);
}

std::string_view to_string(OutputType type) {
  switch (type) {
    case OutputType::fp32:
      return "fp32";
    case OutputType::fp16:
      return "fp16";
    case OutputType::u8:
      return "u8";
  }
  return "?";
}

OutputType parse_output_type(std::string_view text) {
  if (text == "fp32") return OutputType::fp32;
  if (text == "fp16") return OutputType::fp16;
  if (text == "u8") return OutputType::u8;
  throw InputError("--output-type", 0, fmt::format("unknown output type '{}' (fp32, fp16 or u8)", text));
}

std::size_t element_bytes(OutputType type) {
  return type == OutputType::fp32 ? 4 : type == OutputType::fp16 ? 2 : 1;
}

namespace {

using cuda_backend::Rect;
using RowSink = cuda_backend::GpuJob::RowSink;

// fp32 similarities as the bytes of `type` (the quantisations of similarity_math.hpp).
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

enum class Engine { reference, cpu, cuda };

// Orders hits the way every result is reported: similarity descending, then lower target.
bool better(const Hit& a, const Hit& b) {
  if (a.similarity != b.similarity) return a.similarity > b.similarity;
  return a.target < b.target;
}

// A grid of rects over queries x database; `upper` keeps only tiles touching the upper triangle
// (self jobs with square tiles).
struct Grid {
  std::size_t rows = 0, cols = 0, tile_rows = 1, tile_cols = 1;
  bool upper = false;
  std::vector<std::pair<std::size_t, std::size_t>> tiles;  // (row block, column block)

  Grid(std::size_t n_rows, std::size_t n_cols, std::size_t tr, std::size_t tc, bool upper_only)
      : rows(n_rows),
        cols(n_cols),
        tile_rows(std::max<std::size_t>(1, tr)),
        tile_cols(std::max<std::size_t>(1, tc)),
        upper(upper_only) {
    const std::size_t nrb = (rows + tile_rows - 1) / tile_rows;
    const std::size_t ncb = (cols + tile_cols - 1) / tile_cols;
    for (std::size_t r = 0; r < nrb; ++r)
      for (std::size_t c = 0; c < ncb; ++c) {
        if (upper && std::min(cols, (c + 1) * tile_cols) <= r * tile_rows) continue;  // below
        tiles.emplace_back(r, c);
      }
  }
  Rect rect(std::size_t t) const {
    const auto [r, c] = tiles[t];
    return {r * tile_rows, std::min(rows, (r + 1) * tile_rows), c * tile_cols,
            std::min(cols, (c + 1) * tile_cols)};
  }
};

std::size_t round_up(std::size_t x, std::size_t m) {
  return (x + m - 1) / m * m;
}

class Job {
 public:
  Job(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
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

  const Resources& resources() const {
    return resources_;
  }
  bool gpu() const {
    return engine_ == Engine::cuda;
  }
  bool self() const {
    return self_;
  }
  std::size_t chunk() const {
    return chunk_;
  }
  const MoleculeSet& queries() const {
    return queries_;
  }
  const MoleculeSet& db() const {
    return db_;
  }

  std::string backend_name() const {
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

  // Tile shapes. Columns of CPU-reachable grids are multiples of the CPU chunk.
  std::size_t default_tile_cols(std::size_t fallback) const {
    if (options_.tile_columns) return round_up(options_.tile_columns, std::max<std::size_t>(chunk_, 1));
    return fallback;
  }
  // Database molecules per GPU column tile: the slice (CSR ids, counts, expanded features and
  // their interleaved copy padded to each warp's longest molecule, ~20 bytes per Lingo plus
  // offsets) may use a quarter of the smallest free GPU memory, so a database larger than the GPU
  // streams through in slices.
  std::size_t gpu_column_cap() const {
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

  std::size_t dense_budget() const {
#ifdef MOLACCEL_HAVE_CUDA
    if (gpu_) return gpu_->dense_budget(resources_.gpus().front());
#endif
    return std::size_t{1} << 22;  // CPU: 16 MiB of floats per tile
  }

  // Runs `fn(rect, ctx)` for every tile of the grid through the scheduler.
  JobStats run(const Grid& grid, const std::string& name,
               const std::function<void(WorkerContext&, const Rect&)>& fn) const {
    JobOptions job = options_.job;
    job.name = name;
    return run_tiles(
        resources_, grid.tiles.size(), [&](WorkerContext& ctx, std::size_t t) { fn(ctx, grid.rect(t)); },
        job);
  }

  // ---- per-tile operations, dispatched on the worker kind ----
  void dense(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const {
    if (engine_ == Engine::reference) return dense_serial(rect, out, ld);  // the oracle: one thread
#ifdef MOLACCEL_HAVE_CUDA
    if (ctx.worker().kind == WorkerInfo::Kind::gpu) return gpu_->dense(ctx, rect, out, ld);
#endif
    dense_cpu(ctx, rect, out, ld);
  }

  // The rect as `type`, handed to `sink` in row blocks (GPU: pipelined, see GpuJob::dense_stream).
  void dense_stream(WorkerContext& ctx, const Rect& rect, OutputType type, const RowSink& sink) const {
#ifdef MOLACCEL_HAVE_CUDA
    if (engine_ == Engine::cuda && ctx.worker().kind == WorkerInfo::Kind::gpu)
      return gpu_->dense_stream(ctx, rect, type, sink);
#endif
    std::vector<float> block(rect.rows() * rect.cols());
    dense(ctx, rect, block.data(), rect.cols());
    const auto bytes = convert_block(block, type);
    if (rect.rows() > 0) sink(0, rect.rows(), bytes.data());
  }

  std::vector<Hit> top_k(WorkerContext& ctx, const Rect& rect, std::size_t k) const {
#ifdef MOLACCEL_HAVE_CUDA
    if (engine_ == Engine::cuda && ctx.worker().kind == WorkerInfo::Kind::gpu)
      return gpu_->top_k(ctx, rect, k);
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

  std::vector<Hit> threshold(WorkerContext& ctx, const Rect& rect, float t, RunInfo& info,
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

  void fill_info(RunInfo* info, const JobStats& stats, double t0) const {
    if (!info) return;
    info->backend = backend_name();
    info->job = stats;
    info->seconds = now_seconds() - t0;
    info->prepare_seconds = prepare_seconds_;
  }
  double prepare_seconds() const {
    return prepare_seconds_;
  }

 private:
  static Resources pick_resources(const Resources& resources, Backend backend) {
    if (backend == Backend::reference) return Resources::cpu(1);
    if (backend == Backend::cpu && resources.uses_gpu()) return Resources::cpu(resources.cpu_threads());
    return resources;
  }

  Engine resolve_engine() const {
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

  // Rect on the CPU, single-threaded (the caller parallelises over rows).
  void dense_serial(const Rect& rect, float* out, std::size_t ld) const {
    if (engine_ == Engine::reference) {
      for (std::size_t r = rect.row_begin; r < rect.row_end; ++r)
        for (std::size_t c = rect.col_begin; c < rect.col_end; ++c)
          out[(r - rect.row_begin) * ld + (c - rect.col_begin)] =
              reference::pair_similarity(queries_, r, db_, c, options_.metric);
      return;
    }
    cpu_rect(rect, out, ld, 1);
  }

  void dense_cpu(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const {
    cpu_rect(rect, out, ld, ctx.worker().cpu_threads);
  }

  // Column ranges start on a chunk boundary (grids guarantee it); the last chunk may be partial.
  void cpu_rect(const Rect& rect, float* out, std::size_t ld, int threads) const {
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
    cpu::score_dense(*cpu_dense_, encoding_.query_set(), options_.metric, rect.row_begin, rect.row_end, c0,
                     c1, scratch.data(), wide, threads);
    for (std::size_t r = 0; r < rect.rows(); ++r)
      std::copy_n(scratch.data() + r * wide, rect.cols(), out + r * ld);
  }

  // Best min(k, cols) of one row (positions are global database indices). A heap of the k best
  // with the worst on top; columns arrive in index order, so an equal similarity never displaces
  // a kept one (ties go to the lower index) and only a strictly better one enters.
  static void select_top_k(const float* row, const Rect& rect, std::size_t k, std::vector<Hit>& out) {
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

  const MoleculeSet& queries_;
  const MoleculeSet& db_;
  bool self_;
  ComputeOptions options_;
  Resources resources_;
  Engine engine_ = Engine::cpu;
  detail::Encoding encoding_;
  std::size_t chunk_ = cpu::kDefaultChunk;
  std::optional<cpu::CpuDatabase> cpu_dense_, cpu_sorted_;
  std::string cpu_variant_ = "scalar";
  double prepare_seconds_ = 0;
#ifdef MOLACCEL_HAVE_CUDA
  std::unique_ptr<cuda_backend::GpuJob> gpu_;
#endif
};

// Tile shape for dense jobs: square for self jobs (so mirroring covers the other triangle), unless
// `allow_upper` is false: full matrices on the GPU are computed whole (computing is several times
// faster than PCIe, and contiguous row blocks avoid the host-side transpose of the mirror).
Grid dense_grid(const Job& job, const ComputeOptions& options, bool whole_rows, bool allow_upper = true) {
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

// `count` hits, allocated (and zeroed) on a thread of its own while the caller prepares the job: a
// top-100 of 367k queries is 441 MB, a few hundred ms of page faults and zeroing on one core.
class HitsAllocation {
 public:
  explicit HitsAllocation(std::size_t count)
      : thread_([this, count] {
          try {
            hits_.resize(count);
          } catch (...) {
            error_ = std::current_exception();
          }
        }) {}
  ~HitsAllocation() {
    if (thread_.joinable()) thread_.join();
  }
  HitsAllocation(const HitsAllocation&) = delete;
  HitsAllocation& operator=(const HitsAllocation&) = delete;
  std::vector<Hit> take() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
    return std::move(hits_);
  }

 private:
  std::vector<Hit> hits_;
  std::exception_ptr error_;
  std::thread thread_;  // declared last: starts once the members it fills exist
};

// ---- .npy header -------------------------------------------------------------------------------
std::string npy_header(std::size_t rows, std::size_t cols, OutputType type) {
  const char* descr = type == OutputType::fp32 ? "<f4" : type == OutputType::fp16 ? "<f2" : "|u1";
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}, {}), }}", descr, rows, cols);
  std::string header = std::string("\x93NUMPY\x01\x00", 8);
  std::size_t total = header.size() + 2 + dict.size() + 1;
  const std::size_t padded = round_up(total, 64);
  dict.append(padded - total, ' ');
  dict += '\n';
  const auto len = static_cast<std::uint16_t>(dict.size());
  header += static_cast<char>(len & 0xff);
  header += static_cast<char>(len >> 8);
  return header + dict;
}

// Positioned write on the file descriptor: thread-safe, so tiles are written as they arrive.
void write_at(int fd, std::uint64_t offset, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot write the matrix file (disk full?)", __FILE__, __LINE__);
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

}  // namespace

std::vector<std::uint8_t> similarity_bytes(const std::vector<float>& values, OutputType type) {
  return convert_block(values, type);
}
std::string npy_matrix_header(std::size_t rows, std::size_t cols, OutputType type) {
  return npy_header(rows, cols, type);
}

// ---- matrix -------------------------------------------------------------------------------------
std::vector<float> similarity_matrix(const Resources& resources, const MoleculeSet& queries,
                                     const MoleculeSet* db, const ComputeOptions& options, RunInfo* info) {
  std::vector<float> out(queries.size() * (db ? db->size() : queries.size()));
  similarity_matrix(resources, queries, db, out.data(), options, info);
  return out;
}

void similarity_matrix(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
                       float* out, const ComputeOptions& options, RunInfo* info) {
  const double t0 = now_seconds();
  Job job(resources, queries, db, options, false);
  const std::size_t nd = job.db().size();
  const Grid grid = dense_grid(job, options, false, !job.gpu());
  std::size_t pairs = 0;
  std::mutex mutex;
  const JobStats stats = job.run(grid, "lingo matrix", [&](WorkerContext& ctx, const Rect& rect) {
    // Straight into the result (tiles never overlap); the mirror reads what was just written.
    float* corner = out + rect.row_begin * nd + rect.col_begin;
    job.dense(ctx, rect, corner, nd);
    if (grid.upper && rect.col_begin != rect.row_begin)  // mirror into the lower triangle
      for (std::size_t r = 0; r < rect.rows(); ++r)
        for (std::size_t c = 0; c < rect.cols(); ++c)
          out[(rect.col_begin + c) * nd + rect.row_begin + r] = corner[r * nd + c];
    std::lock_guard<std::mutex> lock(mutex);
    pairs += rect.rows() * rect.cols();
  });
  if (info) info->pairs = pairs;
  job.fill_info(info, stats, t0);
}

void write_similarity_matrix(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
                             const std::filesystem::path& path, MatrixFormat format,
                             const ComputeOptions& options, RunInfo* info, OutputType type) {
  if (format == MatrixFormat::tsv && type != OutputType::fp32)
    throw InputError("--output-type", 0, "fp16 and u8 are for .npy output; TSV prints fp32 similarities");
  const double t0 = now_seconds();
  Job job(resources, queries, db, options, false);
  const std::size_t nq = job.queries().size(), nd = job.db().size();
  std::size_t pairs = 0;
  JobStats stats;
  if (format == MatrixFormat::npy) {
    const std::string header = npy_header(nq, nd, type);
    const std::size_t elem = element_bytes(type);
    const Grid grid = dense_grid(job, options, false, !job.gpu());
    write_file_atomically(path, [&](std::FILE* f) {
      if (std::fwrite(header.data(), 1, header.size(), f) != header.size() || std::fflush(f) != 0)
        throw Error("cannot write the matrix file (disk full?)", __FILE__, __LINE__);
      const int fd = fileno(f);
      const std::uint64_t total = header.size() + std::uint64_t{elem} * nq * nd;
      if (nq * nd > 0) write_at(fd, total - 1, "\0", 1);  // size the file up front (sparse)
      auto offset = [&](std::size_t row, std::size_t col) {
        return header.size() + std::uint64_t{elem} * (std::uint64_t{row} * nd + col);
      };
      std::mutex mutex;
      stats = job.run(grid, "lingo matrix", [&](WorkerContext& ctx, const Rect& rect) {
        // Row blocks go to the file as they arrive (from the GPU pipeline's helper threads).
        const RowSink sink = [&](std::size_t row, std::size_t rows, const std::uint8_t* data) {
          const std::size_t row_bytes = elem * rect.cols();
          if (rect.cols() == nd) {
            write_at(fd, offset(rect.row_begin + row, 0), data, rows * row_bytes);
          } else {
            for (std::size_t r = 0; r < rows; ++r)
              write_at(fd, offset(rect.row_begin + row + r, rect.col_begin), data + r * row_bytes, row_bytes);
          }
        };
        if (!grid.upper || rect.col_begin == rect.row_begin) {
          job.dense_stream(ctx, rect, type, sink);
        } else {  // an upper tile off the diagonal: write it and its mirror
          std::vector<float> block(rect.rows() * rect.cols());
          job.dense(ctx, rect, block.data(), rect.cols());
          const auto bytes = convert_block(block, type);
          sink(0, rect.rows(), bytes.data());
          std::vector<std::uint8_t> column(rect.rows() * elem);
          for (std::size_t c = 0; c < rect.cols(); ++c) {
            for (std::size_t r = 0; r < rect.rows(); ++r)
              std::memcpy(column.data() + r * elem, bytes.data() + (r * rect.cols() + c) * elem, elem);
            write_at(fd, offset(rect.col_begin + c, rect.row_begin), column.data(), column.size());
          }
        }
        std::lock_guard<std::mutex> lock(mutex);
        pairs += rect.rows() * rect.cols();
      });
    });
  } else {
    // TSV is written in row order: tiles are row blocks; finished blocks wait for their turn.
    const Grid grid = dense_grid(job, options, true);
    write_file_atomically(path, [&](std::FILE* f) {
      std::fputs("query\ttarget\tsimilarity\n", f);
      std::mutex mutex;
      std::map<std::size_t, std::string> pending;
      std::size_t next = 0;
      stats = job.run(grid, "lingo matrix", [&](WorkerContext& ctx, const Rect& rect) {
        std::vector<float> block(rect.rows() * rect.cols());
        job.dense(ctx, rect, block.data(), rect.cols());
        fmt::memory_buffer text;
        for (std::size_t r = 0; r < rect.rows(); ++r)
          for (std::size_t c = 0; c < rect.cols(); ++c)
            fmt::format_to(std::back_inserter(text), "{}\t{}\t{}\n", job.queries().names[rect.row_begin + r],
                           job.db().names[rect.col_begin + c], block[r * rect.cols() + c]);
        std::lock_guard<std::mutex> lock(mutex);
        pairs += rect.rows() * rect.cols();
        pending.emplace(rect.row_begin, std::string(text.data(), text.size()));
        while (!pending.empty() && pending.begin()->first == next) {
          const std::string& s = pending.begin()->second;
          if (std::fwrite(s.data(), 1, s.size(), f) != s.size())
            throw Error("cannot write the matrix file (disk full?)", __FILE__, __LINE__);
          next = std::min(nq, next + grid.tile_rows);
          pending.erase(pending.begin());
        }
      });
    });
  }
  if (info) info->pairs = pairs;
  job.fill_info(info, stats, t0);
}

// ---- search -------------------------------------------------------------------------------------
std::vector<Hit> search(const Resources& resources, const MoleculeSet& queries, const MoleculeSet& db,
                        std::size_t k, const ComputeOptions& options, RunInfo* info, const HitsReady& ready) {
  if (k == 0) throw InputError("-k", 0, "k must be at least 1");
  const double t0 = now_seconds();
  const std::size_t nq = queries.size(), nd = db.size();
  const std::size_t take = std::min(k, nd);
  HitsAllocation allocation(nq * take);  // while the job is prepared
  Job job(resources, queries, &db, options, false);
  Grid grid = job.gpu() ? dense_grid(job, options, false)
                        : Grid(nq, nd, options.tile_rows ? options.tile_rows : 64,
                               job.default_tile_cols(std::max<std::size_t>(nd, 1)), false);
  std::vector<std::vector<Hit>> per_tile(grid.tiles.size());
  std::vector<Hit> result = allocation.take();
  // One column block: a tile's hits are final, sorted and placed by the worker that made them.
  const bool single_block = grid.tile_cols >= nd;
  std::size_t pairs = 0;
  std::mutex mutex;
  JobStats stats = job.run(grid, "lingo search", [&](WorkerContext& ctx, const Rect& rect) {
    // Find the tile's index from its rect (tiles are row-major over the grid).
    const std::size_t t = (rect.row_begin / grid.tile_rows) * ((nd + grid.tile_cols - 1) / grid.tile_cols) +
                          rect.col_begin / grid.tile_cols;
    auto hits = job.top_k(ctx, rect, k);
    if (single_block) {
      // Every backend returns each row's hits as one block of `take`, best first: place the
      // blocks by their query (no sort).
      if (hits.size() != rect.rows() * take)
        throw Error("search: a tile returned too few hits", __FILE__, __LINE__);
      for (std::size_t b = 0; b < hits.size(); b += take) {
        const std::size_t q = hits[b].query;
        if (q < rect.row_begin || q >= rect.row_end || hits[b + take - 1].query != q)
          throw Error("search: a tile returned hits out of row blocks", __FILE__, __LINE__);
        std::copy_n(hits.begin() + b, take, result.begin() + q * take);
      }
      hits.clear();
      if (ready) ready(rect.row_begin, result.data() + rect.row_begin * take, rect.rows() * take);
    }
    std::lock_guard<std::mutex> lock(mutex);
    per_tile[t] = std::move(hits);
    pairs += rect.rows() * rect.cols();
  });
  if (single_block) {
    if (info) info->pairs = pairs;
    job.fill_info(info, stats, t0);
    return result;
  }
  // Merge the column blocks of every query: sort candidates, keep the best `take`.
  std::vector<std::vector<Hit>> per_query(nq);
  for (auto& hits : per_tile) {
    for (const Hit& h : hits) per_query[h.query].push_back(h);
    std::vector<Hit>().swap(hits);
  }
  parallel_for(nq, job.resources().cpu_threads(), 256, [&](std::size_t b, std::size_t e) {
    for (std::size_t q = b; q < e; ++q) {
      auto& hits = per_query[q];
      std::sort(hits.begin(), hits.end(), better);
      if (hits.size() < take) throw Error("search lost hits: backend returned too few", __FILE__, __LINE__);
      std::copy_n(hits.begin(), take, result.begin() + q * take);
      std::vector<Hit>().swap(hits);
    }
  });
  if (ready && nq > 0) ready(0, result.data(), result.size());
  if (info) info->pairs = pairs;
  job.fill_info(info, stats, t0);
  return result;
}

// ---- neighbours and clusters ----------------------------------------------------------------------
std::vector<Hit> neighbors(const Resources& resources, const MoleculeSet& db, float threshold,
                           const ComputeOptions& options, RunInfo* info) {
  if (!(threshold >= 0.0f && threshold <= 1.0f))
    throw InputError("--threshold", 0, fmt::format("threshold must be in [0, 1], got {}", threshold));
  const double t0 = now_seconds();
  const std::size_t n = db.size();
  // The size bound s <= min(|A|,|B|) / max(|A|,|B|) (magnitudes for tanimoto, distinct Lingos
  // for set and vidal). The CPU backend applies it per chunk inside its sorted index. For the GPU
  // the set is ordered by size here, so that whole tiles whose size ranges cannot reach T are
  // never computed; hits are mapped back to the input order at the end.
  auto size_of = [&](const MoleculeSet& set, std::size_t i) -> std::uint64_t {
    return options.metric == Metric::tanimoto ? set.magnitudes[i] : set.distinct(i);
  };
  std::vector<std::size_t> order;
  MoleculeSet by_size;
  bool gpu_engine = false;  // as Job::resolve_engine decides
#ifdef MOLACCEL_HAVE_CUDA
  gpu_engine =
      options.backend == Backend::cuda || (options.backend == Backend::automatic && resources.uses_gpu());
#endif
  if (gpu_engine && threshold > 0.0f && n > 1) {
    order.resize(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return size_of(db, a) < size_of(db, b); });
    by_size = subset(db, order);
  }
  const MoleculeSet& set = order.empty() ? db : by_size;
  Job job(resources, set, nullptr, options, true);
  Grid grid =
      job.gpu() ? dense_grid(job, options, false)
                : Grid(n, n, options.tile_rows ? options.tile_rows : 256, std::max<std::size_t>(n, 1), false);
  RunInfo local;
  if (!order.empty()) {
    // Skip a tile when even its closest sizes give min/max < T. The margin (1e-6 relative) covers
    // the fp32 rounding of the computed similarity (< 6e-8 relative), so no hit can be lost.
    const double t = static_cast<double>(threshold) * (1.0 - 1e-6);
    std::vector<std::pair<std::size_t, std::size_t>> kept;
    for (std::size_t i = 0; i < grid.tiles.size(); ++i) {
      const Rect r = grid.rect(i);
      const double row_min = static_cast<double>(size_of(set, r.row_begin)),
                   row_max = static_cast<double>(size_of(set, r.row_end - 1)),
                   col_min = static_cast<double>(size_of(set, r.col_begin)),
                   col_max = static_cast<double>(size_of(set, r.col_end - 1));
      const bool reachable = !(row_max < t * col_min || col_max < t * row_min);
      if (reachable)
        kept.push_back(grid.tiles[i]);
      else
        local.pairs_skipped += r.rows() * r.cols();
    }
    grid.tiles = std::move(kept);
  }
  std::vector<Hit> hits;
  std::mutex mutex, info_mutex;
  JobStats stats = job.run(grid, "lingo neighbors", [&](WorkerContext& ctx, const Rect& rect) {
    auto tile_hits = job.threshold(ctx, rect, threshold, local, info_mutex);
    std::lock_guard<std::mutex> lock(mutex);
    hits.insert(hits.end(), tile_hits.begin(), tile_hits.end());
  });
  if (!order.empty())
    for (Hit& h : hits) {
      h.query = static_cast<std::uint32_t>(order[h.query]);
      h.target = static_cast<std::uint32_t>(order[h.target]);
      if (h.query > h.target) std::swap(h.query, h.target);
    }
  std::sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) {
    return a.query != b.query ? a.query < b.query : a.target < b.target;
  });
  if (info) {
    info->pairs = local.pairs;
    info->pairs_skipped = local.pairs_skipped;
  }
  job.fill_info(info, stats, t0);
  return hits;
}

Clustering cluster(const Resources& resources, const MoleculeSet& db, float threshold,
                   const ComputeOptions& options, RunInfo* info) {
  return butina_clusters(db.size(), neighbors(resources, db, threshold, options, info));
}

Clustering butina_clusters(std::size_t n, const std::vector<Hit>& pairs) {
  // Symmetric adjacency in CSR form: memory proportional to the neighbour pairs, not N^2.
  std::vector<std::uint64_t> offsets(n + 1, 0);
  for (const Hit& h : pairs) {
    ++offsets[h.query + 1];
    ++offsets[h.target + 1];
  }
  for (std::size_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
  std::vector<std::uint32_t> adjacency(offsets[n]);
  std::vector<std::uint64_t> fill(offsets.begin(), offsets.end() - 1);
  for (const Hit& h : pairs) {
    adjacency[fill[h.query]++] = h.target;
    adjacency[fill[h.target]++] = h.query;
  }
  // Butina: molecules in order of decreasing neighbour count (ties: lower index); each one still
  // unassigned founds a cluster and takes its unassigned neighbours.
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return offsets[a + 1] - offsets[a] > offsets[b + 1] - offsets[b];
  });
  constexpr std::uint32_t unassigned = 0xffffffffu;
  Clustering result;
  result.cluster_of.assign(n, unassigned);
  result.pairs = pairs.size();
  for (std::uint32_t m : order) {
    if (result.cluster_of[m] != unassigned) continue;
    const auto id = static_cast<std::uint32_t>(result.centroids.size());
    result.centroids.push_back(m);
    result.cluster_of[m] = id;
    for (std::uint64_t e = offsets[m]; e < offsets[m + 1]; ++e)
      if (result.cluster_of[adjacency[e]] == unassigned) result.cluster_of[adjacency[e]] = id;
  }
  return result;
}

}  // namespace molaccel::lingo

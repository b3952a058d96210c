// The tiled job behind every LINGO operation (matrix.cpp, lingo.cpp; defined in tiled_job.cpp): a
// request's molecules encoded once for its engine (the reference, the CPU inverted-index kernel or
// the CUDA kernels), a grid of tiles over queries x database for the runtime's scheduler, and the
// per-tile operations (dense block, top-k, threshold pairs), each handed to the backend of the
// worker that runs the tile.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lingo/cpu/cpu_backend.hpp"
#include "lingo/cuda/cuda_backend.hpp"
#include "lingo/encoding.hpp"
#include "molaccel/lingo.hpp"

namespace molaccel::lingo::detail {

using cuda_backend::Rect;
using RowSink = cuda_backend::GpuJob::RowSink;

// fp32 similarities as the bytes of `type` (the quantisations of similarity_math.hpp).
std::vector<std::uint8_t> convert_block(const std::vector<float>& block, OutputType type);

enum class Engine { reference, cpu, cuda };

// Orders hits the way every result is reported: similarity descending, then lower target.
inline bool better(const Hit& a, const Hit& b) {
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

inline std::size_t round_up(std::size_t x, std::size_t m) {
  return (x + m - 1) / m * m;
}

class Job {
 public:
  Job(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
      const ComputeOptions& options, bool need_sorted_cpu);

  const Resources& resources() const { return resources_; }
  bool gpu() const { return engine_ == Engine::cuda; }
  bool self() const { return self_; }
  std::size_t chunk() const { return chunk_; }
  const MoleculeSet& queries() const { return queries_; }
  const MoleculeSet& db() const { return db_; }

  std::string backend_name() const;

  // Tile shapes. Columns of CPU-reachable grids are multiples of the CPU chunk.
  std::size_t default_tile_cols(std::size_t fallback) const;
  // Database molecules per GPU column tile: the slice (CSR ids, counts, expanded features and
  // their interleaved copy padded to each warp's longest molecule, ~20 bytes per Lingo plus
  // offsets) may use a quarter of the smallest free GPU memory, so a database larger than the GPU
  // streams through in slices.
  std::size_t gpu_column_cap() const;

  std::size_t dense_budget() const;

  // Runs `fn(rect, ctx)` for every tile of the grid through the scheduler.
  JobStats run(const Grid& grid, const std::string& name,
               const std::function<void(WorkerContext&, const Rect&)>& fn) const;

  // ---- per-tile operations, dispatched on the worker kind ----
  void dense(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const;

  // The rect as `type`, handed to `sink` in row blocks (GPU: pipelined, see GpuJob::dense_stream).
  void dense_stream(WorkerContext& ctx, const Rect& rect, OutputType type, const RowSink& sink) const;

  std::vector<Hit> top_k(WorkerContext& ctx, const Rect& rect, std::size_t k) const;

  std::vector<Hit> threshold(WorkerContext& ctx, const Rect& rect, float t, RunInfo& info,
                             std::mutex& info_mutex) const;

  void fill_info(RunInfo* info, const JobStats& stats, double t0) const;
  double prepare_seconds() const { return prepare_seconds_; }

 private:
  static Resources pick_resources(const Resources& resources, Backend backend);

  Engine resolve_engine() const;

  // Rect on the CPU, single-threaded (the caller parallelises over rows).
  void dense_serial(const Rect& rect, float* out, std::size_t ld) const;

  void dense_cpu(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const;

  // Column ranges start on a chunk boundary (grids guarantee it); the last chunk may be partial.
  void cpu_rect(const Rect& rect, float* out, std::size_t ld, int threads) const;

  // Best min(k, cols) of one row (positions are global database indices). A heap of the k best
  // with the worst on top; columns arrive in index order, so an equal similarity never displaces
  // a kept one (ties go to the lower index) and only a strictly better one enters.
  static void select_top_k(const float* row, const Rect& rect, std::size_t k, std::vector<Hit>& out);

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
Grid dense_grid(const Job& job, const ComputeOptions& options, bool whole_rows, bool allow_upper = true);

}  // namespace molaccel::lingo::detail

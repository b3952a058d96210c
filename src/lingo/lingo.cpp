// Front file: turns a request (search, neighbours, clusters) into tiles of the job (tiled_job.hpp)
// for the runtime's scheduler and merges their results here, on the host; Butina clustering of the
// neighbour pairs. Matrices are in matrix.cpp.
#include <algorithm>
#include <mutex>
#include <new>
#include <numeric>
#include <thread>

#include "lingo/distributed_util.hpp"
#include "lingo/reference/reference.hpp"
#include "lingo/tiled_job.hpp"
#include "molaccel/lingo.hpp"
#include "runtime/host_resources.hpp"

namespace molaccel::lingo {

float similarity(const MoleculeSet& a, std::size_t i, const MoleculeSet& b, std::size_t j, Metric metric) {
  MOLACCEL_EXPECTS(i < a.size() && j < b.size(), "molecule index out of range");
  MOLACCEL_EXPECTS(a.q == b.q, "both molecules must use the same q");
  return reference::pair_similarity(a, i, b, j, metric);
}

namespace {

using detail::better;
using detail::dense_grid;
using detail::Grid;
using detail::Job;
using detail::Rect;

// `count` hits, allocated (and zeroed) on a thread of its own while the caller prepares the job
// and runs its first tiles: a top-100 of 367k queries is 441 MB. One thread faulting in and
// zeroing that many fresh pages takes longer (0.2 s) than preparing the job, so the pages are
// faulted in first by several threads at once (Linux's MADV_POPULATE_WRITE; where it is missing,
// the zeroing faults them in as before).
class HitsAllocation {
 public:
  explicit HitsAllocation(std::size_t count)
      : thread_([this, count] {
          try {
            hits_.reserve(count);
            molaccel::detail::populate_pages(hits_.data(), count * sizeof(Hit));
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

}  // namespace

// ---- search -------------------------------------------------------------------------------------
std::vector<Hit> search(const Resources& resources, const MoleculeSet& queries, const MoleculeSet& db,
                        std::size_t k, const ComputeOptions& options, RunInfo* info, const HitsReady& ready) {
  if (k == 0) throw InputError("-k", 0, "k must be at least 1");
  const double t0 = now_seconds();
  const std::size_t nq = queries.size(), nd = db.size();
  const std::size_t take = std::min(k, nd);
  HitsAllocation allocation(nq * take);  // while the job is prepared and its first tiles run
  Job job(resources, queries, &db, options, false);
  Grid grid = job.gpu() ? dense_grid(job, options, false)
                        : Grid(nq, nd, options.tile_rows ? options.tile_rows : 64,
                               job.default_tile_cols(std::max<std::size_t>(nd, 1)), false);
  std::vector<std::vector<Hit>> per_tile(grid.tiles.size());
  std::vector<Hit> result;
  // The result is taken from its allocation when the first tile's hits are placed (or after the
  // run), so that the devices start on the tiles while its pages are still being faulted in.
  std::mutex result_mutex;
  bool result_taken = false;
  const auto take_result = [&] {
    std::lock_guard lock(result_mutex);
    if (!result_taken) {
      result_taken = true;
      result = allocation.take();  // rethrows a failed allocation to every later caller as well
    }
    if (result.size() != nq * take) throw std::bad_alloc();
  };
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
      take_result();
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
  take_result();  // (no tiles: the empty result)
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
  return detail::timed_butina(db.size(), neighbors(resources, db, threshold, options, info), info);
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

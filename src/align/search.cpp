// Front file: turns a search into tiles of the length-sorted database for run_tiles (CUDA: one
// balanced, interleaved tile per worker, pipelined inside the backend; CPU: small contiguous tiles),
// then selects top hits, traces them back and adds Karlin-Altschul statistics. No CUDA header here:
// the GPU path is behind kernels.hpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <set>

#include "align/kernels.hpp"
#include "align/traceback.hpp"
#include "molaccel/align.hpp"

namespace molaccel::align {
namespace {

Backend resolve_backend(const Resources& resources, Backend requested) {
  if (requested == Backend::automatic) return resources.uses_gpu() ? Backend::cuda : Backend::cpu;
  if (requested == Backend::cuda) {
#ifndef MOLACCEL_HAVE_CUDA
    MOLACCEL_THROW(NotCompiled, "the CUDA backend of align (this build has no CUDA)");
#endif
    if (!resources.uses_gpu())
      throw DeviceUnavailable("backend cuda needs GPU resources (--device gpu)", __FILE__, __LINE__);
  }
  return requested;
}

// Tiles are contiguous ranges of the sorted order holding about `target` residues each.
std::vector<std::size_t> tile_boundaries(const Database& db, std::uint64_t target) {
  std::vector<std::size_t> bounds{0};
  const auto* off = db.offsets();
  std::uint64_t start = off[0];
  for (std::size_t i = 0; i < db.size(); ++i) {
    if (off[i + 1] - start >= target) {
      bounds.push_back(i + 1);
      start = off[i + 1];
    }
  }
  if (bounds.back() != db.size()) bounds.push_back(db.size());
  return bounds;
}

}  // namespace

bool hit_before(const Hit& a, const Hit& b) noexcept {
  if (a.score != b.score) return a.score > b.score;
  return a.subject < b.subject;
}

namespace {

// Where a batch runs: through Resources (run_tiles, progress bars) or straight on a pool (tests).
struct Workers {
  const Resources* resources = nullptr;
  WorkerPool* pool = nullptr;
  std::size_t gpus = 0;
  bool cpu = false;
  int cpu_threads = 1;
  JobStats run(std::size_t tiles, const TileFunction& fn, const JobOptions& job) const {
    return resources ? run_tiles(*resources, tiles, fn, job) : pool->run(tiles, fn, job);
  }
};

std::vector<std::vector<int>> score_batch_on(const Workers& workers, const SequenceSet& queries,
                                             const Database& database, const Scoring& scoring,
                                             Backend backend, ScoreStats* stats, JobStats* job_stats,
                                             const gpu_entry::Tuning* tuning) {
  scoring.validate();
  const double started = now_seconds();
  Backend chosen = backend;
  if (chosen == Backend::automatic) chosen = workers.gpus > 0 ? Backend::cuda : Backend::cpu;
  if (chosen == Backend::cuda) {
#ifndef MOLACCEL_HAVE_CUDA
    MOLACCEL_THROW(NotCompiled, "the CUDA backend of align (this build has no CUDA)");
#endif
    if (workers.gpus == 0)
      throw DeviceUnavailable("backend cuda needs GPU resources (--device gpu)", __FILE__, __LINE__);
  }
  // Zeroed by several threads: 20 queries x 486k subjects are 39 MB of first-touch page faults.
  std::vector<std::vector<int>> scores(queries.size());
  parallel_for(queries.size(), workers.cpu_threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t q = b; q < e; ++q) scores[q].assign(database.size(), 0);
  });
  std::vector<std::span<const std::uint8_t>> query_views;
  std::uint64_t query_residues = 0;
  for (std::size_t q = 0; q < queries.size(); ++q) {
    query_views.push_back(queries.sequence(q));
    query_residues += query_views.back().size();
  }
  if (database.size() == 0 || queries.size() == 0) return scores;

  // CUDA: one tile per worker, each a balanced sample of the length-sorted database: warps of 32
  // consecutive sorted subjects dealt to the tiles in snake order (0,1,..,T-1,T-1,..,0,...), so every
  // tile gets the same mix of lengths (equal residues x queries, long subjects included) and stays
  // sorted. A GPU worker pipelines its tile internally (chunks, streams), and the database is read
  // in place: no copy per device. CPU and reference: small contiguous tiles, for balance.
  const std::size_t n = database.size();
  std::vector<std::size_t> bounds;
  std::vector<std::vector<std::uint32_t>> members;
  if (chosen == Backend::cuda) {
    const std::size_t tiles = std::max<std::size_t>(1, workers.gpus + (workers.cpu ? 1 : 0));
    members.resize(tiles);
    constexpr std::size_t kGroup = 32;
    for (std::size_t g = 0; g * kGroup < n; ++g) {
      const std::size_t r = g % (2 * tiles);
      const std::size_t t = r < tiles ? r : 2 * tiles - 1 - r;
      for (std::size_t i = g * kGroup; i < std::min(n, (g + 1) * kGroup); ++i)
        members[t].push_back(static_cast<std::uint32_t>(i));
    }
    while (!members.empty() && members.back().empty()) members.pop_back();
  } else {
    const std::uint64_t total = database.residues();
    const std::uint64_t target =
        std::max<std::uint64_t>(std::uint64_t{1} << 16, std::min<std::uint64_t>(total / 16 + 1, 4u << 20));
    bounds = tile_boundaries(database, target);
  }
  const std::size_t tiles = chosen == Backend::cuda ? members.size() : bounds.size() - 1;
  const int layout_threads =
      std::max(1, workers.cpu_threads / static_cast<int>(std::max<std::size_t>(1, workers.gpus)));

  const double tiles_started = now_seconds();
  std::mutex counters_mutex;
  std::set<std::string> kernels;
  std::atomic<std::uint64_t> rescored{0};
  double device_seconds = 0, slowest_device_seconds = 0;
  JobOptions job;
  job.name = "align: scoring";
  const JobStats job_result = workers.run(
      tiles,
      [&](WorkerContext& ctx, std::size_t tile) {
        detail::KernelCounters counters;
        if (chosen == Backend::cuda) {
          const auto& index = members[tile];
          if (ctx.worker().kind == WorkerInfo::Kind::gpu) {
            std::vector<int*> outputs(queries.size());
            for (std::size_t q = 0; q < queries.size(); ++q) outputs[q] = scores[q].data();
            detail::SubjectBatch batch{database.residue_data(), database.offsets(), index.size()};
            detail::cuda::score_batch(ctx, query_views, batch, index.data(), scoring, outputs, layout_threads,
                                      tuning, counters);
          } else {  // a CPU worker beside the GPUs: the tile's runs of consecutive subjects
            for (std::size_t b = 0; b < index.size();) {
              std::size_t e = b + 1;
              while (e < index.size() && index[e] == index[e - 1] + 1) ++e;
              const Database slice = database.slice(index[b], index[e - 1] + 1);
              detail::SubjectBatch batch{slice.residue_data(), slice.offsets(), slice.size()};
              for (std::size_t q = 0; q < queries.size(); ++q)
                detail::cpu::score_batch(query_views[q], batch, scoring, ctx.worker().cpu_threads,
                                         scores[q].data() + index[b], counters);
              b = e;
            }
          }
        } else {
          const std::size_t begin = bounds[tile], end = bounds[tile + 1];
          const Database slice = database.slice(begin, end);
          detail::SubjectBatch batch{slice.residue_data(), slice.offsets(), slice.size()};
          if (chosen == Backend::reference) {
            counters.kernel = "reference/gotoh32";
            for (std::size_t q = 0; q < queries.size(); ++q)
              parallel_for(batch.count, ctx.worker().cpu_threads, 16, [&](std::size_t b, std::size_t e) {
                for (std::size_t i = b; i < e; ++i)
                  scores[q][begin + i] = reference_score(query_views[q], batch.subject(i), scoring);
              });
          } else {
            for (std::size_t q = 0; q < queries.size(); ++q)
              detail::cpu::score_batch(query_views[q], batch, scoring, ctx.worker().cpu_threads,
                                       scores[q].data() + begin, counters);
          }
        }
        rescored += counters.rescored;
        std::lock_guard lock(counters_mutex);
        kernels.insert(counters.kernel);
        device_seconds += counters.device_seconds;
        slowest_device_seconds = std::max(slowest_device_seconds, counters.device_seconds);
      },
      job);
  if (job_stats) *job_stats = job_result;
  if (trace_enabled("align"))
    trace_message(
        "align",
        fmt::format("{} tiles, score arrays ready {:.1f} ms, tiles done {:.1f} ms after the call began",
                    tiles, (tiles_started - started) * 1e3, (now_seconds() - started) * 1e3));

  if (stats) {
    stats->kernel = fmt::format("{}", fmt::join(kernels, "+"));
    stats->cells = query_residues * database.residues();
    stats->rescored = rescored.load();
    stats->seconds = now_seconds() - started;
    stats->device_seconds = device_seconds;
    stats->slowest_device_seconds = slowest_device_seconds;
  }
  return scores;
}

}  // namespace

namespace detail {
std::vector<std::vector<int>> score_database_batch(const Resources& resources, const SequenceSet& queries,
                                                   const Database& database, const Scoring& scoring,
                                                   Backend backend, ScoreStats* stats,
                                                   const gpu_entry::Tuning* tuning) {
  Workers workers;
  workers.resources = &resources;
  workers.gpus = resources.gpus().size();
  workers.cpu = resources.uses_cpu();
  workers.cpu_threads = resources.cpu_threads();
  if (backend != Backend::automatic) resolve_backend(resources, backend);  // its errors
  return score_batch_on(workers, queries, database, scoring, backend, stats, nullptr, tuning);
}

std::vector<std::vector<int>> score_database_batch_on(WorkerPool& pool, int cpu_threads,
                                                      const SequenceSet& queries, const Database& database,
                                                      const Scoring& scoring, Backend backend,
                                                      ScoreStats* stats, JobStats* job_stats,
                                                      const gpu_entry::Tuning* tuning) {
  Workers workers;
  workers.pool = &pool;
  for (const auto& w : pool.workers()) {
    if (w.kind == WorkerInfo::Kind::gpu)
      ++workers.gpus;
    else
      workers.cpu = true;
  }
  workers.cpu_threads = std::max(1, cpu_threads);
  return score_batch_on(workers, queries, database, scoring, backend, stats, job_stats, tuning);
}
}  // namespace detail

std::vector<std::vector<int>> score_database_batch(const Resources& resources, const SequenceSet& queries,
                                                   const Database& database, const Scoring& scoring,
                                                   Backend backend, ScoreStats* stats) {
  return detail::score_database_batch(resources, queries, database, scoring, backend, stats, nullptr);
}

std::vector<int> score_database(const Resources& resources, std::span<const std::uint8_t> query,
                                const Database& database, const Scoring& scoring, Backend backend,
                                ScoreStats* stats) {
  SequenceSet one;
  one.add("query", query);
  return std::move(score_database_batch(resources, one, database, scoring, backend, stats).front());
}

SearchResult search(const Resources& resources, const SequenceSet& queries, const Database& database,
                    const SearchOptions& options) {
  options.scoring.validate();
  if (options.top_k < 1)
    throw InputError("-k", 0, fmt::format("{} is not a positive number of hits", options.top_k));
  SearchResult result;
  if (options.evalues) {
    if (options.scoring.matrix.builtin)
      result.statistics = published_gapped_parameters(options.scoring.matrix.name, options.scoring.gap_open,
                                                      options.scoring.gap_extend);
    if (!result.statistics)
      throw InputError(
          options.scoring.matrix.builtin ? "--gap-open/--gap-extend" : "--matrix", 0,
          fmt::format("no published Karlin-Altschul parameters for {} with gap open {} / extend {} "
                      "(our convention: a gap of length k costs open + (k-1)*extend); choose "
                      "supported gap costs or add --no-evalue",
                      options.scoring.matrix.name, options.scoring.gap_open, options.scoring.gap_extend));
  }
  // Queries go in batches whose score matrix stays under ~256 MB; each batch moves the database
  // to the devices once.
  result.hits.resize(queries.size());
  const std::size_t k = static_cast<std::size_t>(options.top_k);
  const std::size_t batch_size = std::max<std::size_t>(
      1, (std::size_t{256} << 20) / (sizeof(int) * std::max<std::size_t>(1, database.size())));
  for (std::size_t first = 0; first < queries.size(); first += batch_size) {
    const std::size_t last = std::min(queries.size(), first + batch_size);
    SequenceSet batch;
    for (std::size_t q = first; q < last; ++q) batch.add(queries.ids[q], queries.sequence(q));
    ScoreStats stats;
    const auto scores =
        score_database_batch(resources, batch, database, options.scoring, options.backend, &stats);
    result.stats.kernel = stats.kernel;
    result.stats.cells += stats.cells;
    result.stats.rescored += stats.rescored;
    result.stats.seconds += stats.seconds;
    result.stats.device_seconds += stats.device_seconds;
    result.stats.slowest_device_seconds += stats.slowest_device_seconds;
    // Top k per query, queries in parallel: (score, FASTA position) pairs, partially sorted in
    // hit_before's order; Hit objects only for the kept ones.
    parallel_for(last - first, resources.cpu_threads(), 1, [&](std::size_t b, std::size_t e) {
      std::vector<std::pair<int, std::uint32_t>> candidates;
      for (std::size_t q = first + b; q < first + e; ++q) {
        candidates.clear();
        const auto& row = scores[q - first];
        for (std::size_t i = 0; i < database.size(); ++i)
          if (row[i] > 0) candidates.emplace_back(row[i], database.original_index(i));
        const std::size_t keep = std::min(k, candidates.size());
        std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(),
                          [](const auto& x, const auto& y) {
                            return x.first != y.first ? x.first > y.first : x.second < y.second;
                          });
        std::vector<Hit> hits(keep);
        for (std::size_t h = 0; h < keep; ++h) {
          hits[h].query = static_cast<std::uint32_t>(q);
          hits[h].subject = candidates[h].second;
          hits[h].score = candidates[h].first;
        }
        result.hits[q] = std::move(hits);
      }
    });
  }

  // Sorted position of each reported subject, for traceback.
  std::vector<std::uint32_t> sorted_of_original;
  std::vector<Hit*> all;
  for (auto& list : result.hits)
    for (auto& hit : list) all.push_back(&hit);
  if (options.traceback && !all.empty()) {
    sorted_of_original.assign(database.total_sequences(), 0);
    for (std::size_t i = 0; i < database.size(); ++i)
      sorted_of_original[database.original_index(i)] = static_cast<std::uint32_t>(i);
    // One hit per task, the largest pairs first, so that a long pair does not start last.
    std::vector<Hit*> by_size = all;
    auto cells = [&](const Hit* hit) {
      return queries.sequence(hit->query).size() * database.sequence(sorted_of_original[hit->subject]).size();
    };
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](const Hit* x, const Hit* y) { return cells(x) > cells(y); });
    parallel_for(by_size.size(), resources.cpu_threads(), 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t h = b; h < e; ++h) {
        Hit& hit = *by_size[h];
        hit.alignment = detail::align_pair(queries.sequence(hit.query),
                                           database.sequence(sorted_of_original[hit.subject]),
                                           options.scoring, hit.score);
        if (hit.alignment.score != hit.score)
          throw Error(fmt::format("traceback score {} differs from search score {} (query {}, subject {})",
                                  hit.alignment.score, hit.score, queries.ids[hit.query],
                                  database.id_of_original(hit.subject)));
      }
    });
  }
  for (Hit* hit : all) {
    if (result.statistics) {
      hit->bitscore = bit_score(*result.statistics, hit->score);
      hit->evalue = e_value(*result.statistics, hit->score, queries.sequence(hit->query).size(),
                            database.total_residues(), database.total_sequences());
    } else {
      hit->bitscore = hit->evalue = std::nan("");
    }
  }
  return result;
}

void prepare_devices(const Resources& resources) {
  if (!resources.uses_gpu()) return;
  // One tile per GPU; a worker that takes a second one finds its device ready.
  JobOptions job;
  job.name = "align: starting the GPUs";
  run_tiles(
      resources, resources.gpus().size(),
      [](WorkerContext& ctx, std::size_t) {
        if (ctx.worker().kind == WorkerInfo::Kind::gpu) detail::cuda::prepare(ctx);
      },
      job);
}

std::vector<std::vector<Hit>> merge_top_hits(const std::vector<std::vector<std::vector<Hit>>>& shards,
                                             int top_k) {
  std::vector<std::vector<Hit>> merged;
  for (const auto& shard : shards) {
    if (merged.size() < shard.size()) merged.resize(shard.size());
    for (std::size_t q = 0; q < shard.size(); ++q)
      merged[q].insert(merged[q].end(), shard[q].begin(), shard[q].end());
  }
  for (auto& list : merged) {
    std::sort(list.begin(), list.end(), hit_before);
    if (list.size() > static_cast<std::size_t>(top_k)) list.resize(top_k);
  }
  return merged;
}

namespace detail {
void write_hits_tsv(
    const std::filesystem::path& path, const SequenceSet& queries, const SearchResult& result,
    const std::function<const std::string&(std::size_t query, std::size_t rank)>& subject_id) {
  write_file_atomically(path, [&](std::FILE* f) {
    fmt::print(f, "query\tsubject\tscore\tbitscore\tevalue\tqstart\tqend\tsstart\tsend\tidentity\talnlen\n");
    for (std::size_t q = 0; q < result.hits.size(); ++q)
      for (std::size_t r = 0; r < result.hits[q].size(); ++r) {
        const auto& hit = result.hits[q][r];
        const bool stats = !std::isnan(hit.bitscore);
        const bool aligned = hit.alignment.length > 0;
        fmt::print(f, "{}\t{}\t{}\t{}\t{}\t", queries.ids[hit.query], subject_id(q, r), hit.score,
                   stats ? fmt::format("{:.1f}", hit.bitscore) : "NA",
                   stats ? fmt::format("{:.2g}", hit.evalue) : "NA");
        if (aligned)
          fmt::print(f, "{}\t{}\t{}\t{}\t{:.2f}\t{}\n", hit.alignment.query_start, hit.alignment.query_end,
                     hit.alignment.subject_start, hit.alignment.subject_end,
                     100.0 * hit.alignment.identities / hit.alignment.length, hit.alignment.length);
        else
          fmt::print(f, "NA\tNA\tNA\tNA\tNA\tNA\n");
      }
  });
}
}  // namespace detail

void write_hits_tsv(const std::filesystem::path& path, const SequenceSet& queries, const Database& database,
                    const SearchResult& result) {
  detail::write_hits_tsv(path, queries, result, [&](std::size_t q, std::size_t r) -> const std::string& {
    return database.id_of_original(result.hits[q][r].subject);
  });
}

}  // namespace molaccel::align

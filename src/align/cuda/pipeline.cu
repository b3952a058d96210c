// The chunk pipeline: one tile (a balanced, length-sorted share of the database) against every query
// on one GPU. Queries are paired by length (one pair per 16-bit half of the inter-task kernel); the
// short subjects are cut into chunks, longest first; each chunk is laid out on host threads into
// pinned staging while earlier chunks compute, uploaded on its own stream and scored for every query
// pair in ONE launch (work items ordered by cost); up to kChunkSets chunks are in flight, so a
// chunk's tail overlaps the next chunk's start, and the host waits only when it needs a buffer set
// back or the scores. Long subjects go to the intra-task kernel on a stream of their own, all
// (query, subject) jobs in one launch, overlapping the chunks. Pairs whose 16-bit maximum reaches
// the saturation threshold are rescored exactly at the end.
#include <algorithm>
#include <cstring>
#include <utility>

#include "align/cuda/pipeline.hpp"

namespace molaccel::align::gpu_entry {
namespace {

constexpr unsigned char kPaddingCode = 31;  // as in align.hpp
constexpr int kAlphabetSize = 26;

// Exact 32-bit scores of tile subjects `positions` against one query (device pointer), blocking,
// on ps.intra. Used for pairs whose 16-bit maximum reached the saturation threshold.
std::vector<int> rescore_exact(PipelineScratch& ps, const TileSubjects& tile,
                               const std::vector<std::size_t>& positions, const unsigned char* query, int m,
                               const Scoring& scoring) {
  std::vector<unsigned char> residues;
  std::vector<unsigned long long> offset, scratch;
  std::vector<unsigned> length;
  for (std::size_t i : positions) {
    offset.push_back(residues.size());
    scratch.push_back(residues.size());
    length.push_back(static_cast<unsigned>(tile.length(i)));
    residues.insert(residues.end(), tile.subject(i), tile.subject(i) + tile.length(i));
  }
  cudaStream_t stream = *ps.intra;
  ps.rescue_residues.upload(residues, stream);
  ps.rescue_offset.upload(offset, stream);
  ps.rescue_scratch.upload(scratch, stream);
  ps.rescue_length.upload(length, stream);
  ps.rescue_rows.resize(std::max<std::size_t>(1, residues.size()));
  ps.rescue_best.resize(positions.size());
  launch_intra(ps.rescue_residues.data(), ps.rescue_offset.data(), ps.rescue_length.data(),
               ps.rescue_scratch.data(), ps.rescue_rows.data(), static_cast<int>(positions.size()), query, m,
               ps.matrix.data(), GapCosts{scoring.gap_open, scoring.gap_extend}, ps.rescue_best.data(),
               stream);
  return ps.rescue_best.download(stream);
}

}  // namespace

void ensure_streams(PipelineScratch& ps) {
  if (!ps.setup) ps.setup = std::make_unique<Stream>();
  if (!ps.intra) ps.intra = std::make_unique<Stream>();
  if (!ps.long_done) ps.long_done = std::make_unique<Event>(false);
  while (ps.sets.size() < kChunkSets) ps.sets.push_back(std::make_unique<ChunkSet>());
}

void score_tile_pipelined(const Tuning& t, PipelineScratch& ps, const QueryView* queries,
                          std::size_t query_count, const TileSubjects& tile, const Scoring& scoring,
                          int* const* scores, int layout_threads, TileResult& counters) {
  const double entered = now_seconds();
  constexpr int R = kStripRows;
  const int threads = std::max(1, layout_threads);
  ensure_streams(ps);

  // Short subjects are a prefix of the length-sorted tile.
  std::size_t n_short = 0;
  {
    std::size_t lo = 0, hi = tile.count;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (tile.length(mid) <= t.long_threshold)
        lo = mid + 1;
      else
        hi = mid;
    }
    n_short = lo;
  }
  const std::size_t n_long = tile.count - n_short;

  // Queries paired by length (a lone last query pairs with nothing: its high half is padding); the
  // packed profiles of all pairs in one array.
  std::vector<std::size_t> order(query_count);
  for (std::size_t q = 0; q < query_count; ++q) order[q] = q;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return queries[a].length < queries[b].length; });
  const std::size_t pairs = (query_count + 1) / 2;
  std::vector<unsigned long long> pair_profile(pairs);
  std::vector<int> pair_m_pad(pairs);
  std::vector<std::size_t> pair_a(pairs), pair_b(pairs);  // pair_b == query_count: none
  unsigned long long profile_words = 0;
  bool multi_strip = false;
  for (std::size_t p = 0; p < pairs; ++p) {
    pair_a[p] = order[2 * p];
    pair_b[p] = 2 * p + 1 < query_count ? order[2 * p + 1] : query_count;
    const std::size_t m_max =
        std::max(queries[pair_a[p]].length, pair_b[p] < query_count ? queries[pair_b[p]].length : 0);
    pair_m_pad[p] = static_cast<int>((m_max + R - 1) / R * R);
    multi_strip |= pair_m_pad[p] > R;
    pair_profile[p] = profile_words;
    profile_words += static_cast<unsigned long long>(kMatrixDim) * pair_m_pad[p];
  }
  const int padding_score = scoring.matrix[kMatrixDim * kMatrixDim - 1];
  const unsigned padding_half = static_cast<unsigned>(padding_score) & 0xffffu;
  std::vector<unsigned> profiles(profile_words, padding_half | (padding_half << 16));
  parallel_for(pairs, threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p)
      for (int half = 0; half < (pair_b[p] < query_count ? 2 : 1); ++half) {
        const QueryView& query = queries[half == 0 ? pair_a[p] : pair_b[p]];
        for (int letter = 0; letter < kAlphabetSize; ++letter)
          for (std::size_t i = 0; i < query.length; ++i) {
            unsigned& word = profiles[pair_profile[p] + static_cast<std::size_t>(letter) * pair_m_pad[p] + i];
            const unsigned value =
                static_cast<unsigned>(scoring.matrix[query.codes[i] * kMatrixDim + letter]) & 0xffffu;
            word = half == 0 ? ((word & 0xffff0000u) | value) : ((word & 0xffffu) | (value << 16));
          }
      }
  });
  std::vector<unsigned char> query_codes;
  std::vector<std::size_t> query_offset(query_count);
  for (std::size_t q = 0; q < query_count; ++q) {
    query_offset[q] = query_codes.size();
    query_codes.insert(query_codes.end(), queries[q].codes, queries[q].codes + queries[q].length);
  }
  ps.profiles.upload(profiles, *ps.setup);
  ps.pair_profile.upload(pair_profile, *ps.setup);
  ps.pair_m_pad.upload(pair_m_pad, *ps.setup);
  ps.queries.upload(query_codes, *ps.setup);
  std::vector<int> matrix(scoring.matrix, scoring.matrix + kMatrixDim * kMatrixDim);
  ps.matrix.upload(matrix, *ps.setup);

  // Chunks of the short subjects: boundaries at multiples of 32 subjects (whole warps), about
  // `chunk` residues each; done longest first.
  std::uint64_t short_residues = 0;
  for (std::size_t i = 0; i < n_short; ++i) short_residues += tile.length(i);
  const std::uint64_t chunk = chunk_residues_for(t, short_residues, pairs, multi_strip);
  std::vector<std::size_t> bounds{0};
  {
    std::uint64_t acc = 0;
    for (std::size_t i = 0; i < n_short; ++i) {
      acc += tile.length(i);
      if (acc >= chunk && (i + 1) % kWarpSize == 0 && i + 1 < n_short) {
        bounds.push_back(i + 1);
        acc = 0;
      }
    }
    if (n_short > 0) bounds.push_back(n_short);
  }
  const std::size_t chunks = bounds.size() - 1;
  // Plan every chunk's sizes first, so the sets are allocated once (a cudaFree in the loop would
  // synchronise the device and stall the pipeline).
  std::size_t max_words = 1, max_warps = 1;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t count = bounds[c + 1] - bounds[c];
    const std::size_t warps = (count + kWarpSize - 1) / kWarpSize;
    std::size_t words = 0;
    for (std::size_t w = 0; w < warps; ++w)
      words += (tile.length(bounds[c] + std::min(count, (w + 1) * kWarpSize) - 1) + 3) / 4 * kWarpSize;
    max_words = std::max(max_words, words);
    max_warps = std::max(max_warps, warps);
  }
  const std::size_t max_blocks = (max_warps + 3) / 4;
  for (auto& set : ps.sets) {
    ChunkSet& c = *set;
    c.layout.resize(max_words, ps.pinned);
    c.warp_base.resize(max_warps, ps.pinned);
    c.warp_quads.resize(max_warps, ps.pinned);
    c.items.resize(max_blocks * pairs, ps.pinned);
    c.best.resize(max_warps * kWarpSize * pairs, ps.pinned);
    c.d_layout.resize(max_words);
    c.d_warp_base.resize(max_warps);
    c.d_warp_quads.resize(max_warps);
    c.d_items.resize(max_blocks * pairs);
    c.d_boundary.resize(multi_strip ? max_words * 4 * pairs : 1);
    c.d_best.resize(max_warps * kWarpSize * pairs);
  }

  // Long subjects: gathered once, every query on the intra stream, overlapping the chunks.
  std::vector<unsigned long long> long_offset(n_long);
  std::vector<unsigned> long_length(n_long);
  unsigned long long long_total = 0;
  for (std::size_t k = 0; k < n_long; ++k) {
    long_offset[k] = long_total;
    long_length[k] = static_cast<unsigned>(tile.length(n_short + k));
    long_total += long_length[k];
  }
  ps.setup->synchronize();  // profiles, queries and matrix are on the device
  const double first_launch = now_seconds();
  if (n_long > 0) {
    ps.long_residues.resize(long_total, ps.pinned);
    parallel_for(n_long, threads, 16, [&](std::size_t b, std::size_t e) {
      for (std::size_t k = b; k < e; ++k)
        std::copy_n(tile.subject(n_short + k), long_length[k], ps.long_residues.data() + long_offset[k]);
    });
    cudaStream_t stream = *ps.intra;
    ps.d_long_residues.resize(long_total);
    ps.d_long_residues.copy_from_host(ps.long_residues.data(), long_total, stream);
    ps.long_offset.upload(long_offset, stream);
    ps.long_length.upload(long_length, stream);
    ps.long_best.resize(n_long * query_count);
    ps.long_best_host.resize(n_long * query_count, ps.pinned);
    std::vector<unsigned long long> query_start(query_offset.begin(), query_offset.end());
    std::vector<unsigned> query_length(query_count);
    for (std::size_t q = 0; q < query_count; ++q) query_length[q] = static_cast<unsigned>(queries[q].length);
    ps.query_offset.upload(query_start, stream);
    ps.query_length.upload(query_length, stream);
    // Every (long subject, query) job in one launch, most expensive first (cost: passes x steps).
    // Jobs of more than one pass need n (H, F) pairs of boundary scratch each; launches (waves)
    // are cut so that a wave's scratch stays within `budget` pairs, reused wave after wave.
    constexpr int kIntraRows = kWarpSize * kIntraRowsPerLane;
    std::vector<std::pair<unsigned long long, uint2>> jobs;
    jobs.reserve(n_long * query_count);
    for (std::size_t q = 0; q < query_count; ++q)
      for (std::size_t k = 0; k < n_long; ++k) {
        const unsigned long long passes = (queries[q].length + kIntraRows - 1) / kIntraRows;
        jobs.push_back({passes * (long_length[k] + kWarpSize),
                        make_uint2(static_cast<unsigned>(k), static_cast<unsigned>(q))});
      }
    std::stable_sort(jobs.begin(), jobs.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    std::size_t free_bytes = 0, total_bytes = 0;
    MOLACCEL_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    const unsigned long long budget = std::max<unsigned long long>(
        long_total, std::min<unsigned long long>(std::uint64_t{1} << 27, free_bytes / 8 / sizeof(int2)));
    std::vector<uint2> job_pairs(jobs.size());
    std::vector<unsigned long long> job_scratch(jobs.size());
    std::vector<std::size_t> waves{0};
    unsigned long long used = 0;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      job_pairs[j] = jobs[j].second;
      const bool multi_pass = queries[jobs[j].second.y].length > static_cast<std::size_t>(kIntraRows);
      const unsigned long long need = multi_pass ? long_length[jobs[j].second.x] : 0;
      if (used + need > budget) {
        waves.push_back(j);
        used = 0;
      }
      job_scratch[j] = used;
      used += need;
    }
    waves.push_back(jobs.size());
    ps.long_jobs.upload(job_pairs, stream);
    ps.long_scratch.upload(job_scratch, stream);
    ps.long_rows.resize(std::max<unsigned long long>(1, budget));
    for (std::size_t w = 0; w + 1 < waves.size(); ++w)
      if (waves[w + 1] > waves[w])
        launch_intra_jobs(
            IntraJobsLaunch{ps.d_long_residues.data(), ps.long_offset.data(), ps.long_length.data(),
                            ps.long_jobs.data() + waves[w], ps.long_scratch.data() + waves[w],
                            ps.long_rows.data(), static_cast<int>(waves[w + 1] - waves[w]), ps.queries.data(),
                            ps.query_offset.data(), ps.query_length.data(), ps.matrix.data(),
                            ps.long_best.data(), n_long},
            GapCosts{scoring.gap_open, scoring.gap_extend}, stream);
    ps.long_best.copy_to_host(ps.long_best_host.data(), n_long * query_count, stream);
    ps.long_done->record(stream);
  }

  const int threshold = scoring.saturation_threshold;
  std::vector<std::vector<std::size_t>> rescue(query_count);
  const auto finish = [&](ChunkSet& c) {
    c.done.synchronize();
    const std::size_t stride = static_cast<std::size_t>(c.warps) * kWarpSize;
    for (std::size_t p = 0; p < pairs; ++p)
      for (int half = 0; half < (pair_b[p] < query_count ? 2 : 1); ++half) {
        const std::size_t q = half == 0 ? pair_a[p] : pair_b[p];
        const unsigned* best = c.best.data() + p * stride;
        int* out = scores[q];
        for (std::size_t i = 0; i < c.count; ++i) {
          const int value = static_cast<short>(half == 0 ? (best[i] & 0xffffu) : (best[i] >> 16));
          out[tile.id(c.first + i)] = value;
          if (value >= threshold) rescue[q].push_back(c.first + i);
        }
      }
  };
  std::vector<ChunkSet*> in_flight;  // FIFO of submitted chunks
  std::size_t submitted = 0;
  for (std::size_t ci = chunks; ci-- > 0;) {
    ChunkSet& c = *ps.sets[submitted % kChunkSets];
    if (in_flight.size() == kChunkSets) {
      finish(*in_flight.front());
      in_flight.erase(in_flight.begin());
    }
    // Layout: per warp w, quad j, lane l: the 4 residues of chunk subject 32w+l in one word.
    c.first = bounds[ci];
    c.count = bounds[ci + 1] - bounds[ci];
    c.warps = static_cast<int>((c.count + kWarpSize - 1) / kWarpSize);
    unsigned long long total = 0;
    for (int w = 0; w < c.warps; ++w) {
      const std::size_t last = std::min(c.count, static_cast<std::size_t>(w + 1) * kWarpSize) - 1;
      c.warp_base[w] = total;
      c.warp_quads[w] = static_cast<unsigned>((tile.length(c.first + last) + 3) / 4);
      total += static_cast<unsigned long long>(c.warp_quads[w]) * kWarpSize;
    }
    parallel_for(static_cast<std::size_t>(c.warps), threads, 16, [&](std::size_t wb, std::size_t we) {
      for (std::size_t w = wb; w < we; ++w)
        for (int lane = 0; lane < kWarpSize; ++lane) {
          const std::size_t a = w * kWarpSize + lane;
          const std::uint8_t* sa = a < c.count ? tile.subject(c.first + a) : nullptr;
          const std::size_t la = a < c.count ? tile.length(c.first + a) : 0;
          unsigned* out = c.layout.data() + c.warp_base[w] + lane;
          const unsigned quads = c.warp_quads[w];
          const std::size_t full = la / 4;
          for (std::size_t j = 0; j < full; ++j) {
            unsigned x;
            std::memcpy(&x, sa + 4 * j, 4);  // little-endian: residue 4j in the low byte
            out[j * kWarpSize] = x;
          }
          for (std::size_t j = full; j < quads; ++j) {
            unsigned x = 0;
            for (int k = 0; k < 4; ++k) {
              const std::size_t pos = j * 4 + k;
              x |= static_cast<unsigned>(pos < la ? sa[pos] : kPaddingCode) << (8 * k);
            }
            out[j * kWarpSize] = x;
          }
        }
    });
    // Work items (block of 4 warps, pair), most expensive first.
    const std::size_t blocks = (static_cast<std::size_t>(c.warps) + 3) / 4;
    std::vector<std::pair<unsigned long long, uint2>> items;
    items.reserve(blocks * pairs);
    for (std::size_t b = 0; b < blocks; ++b) {
      const unsigned quads = c.warp_quads[std::min<std::size_t>(4 * b + 3, c.warps - 1)];
      for (std::size_t p = 0; p < pairs; ++p)
        items.push_back({static_cast<unsigned long long>(quads) * pair_m_pad[p],
                         make_uint2(static_cast<unsigned>(b), static_cast<unsigned>(p))});
    }
    std::stable_sort(items.begin(), items.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (std::size_t k = 0; k < items.size(); ++k) c.items[k] = items[k].second;

    c.d_layout.copy_from_host(c.layout.data(), total, c.stream);
    c.d_warp_base.copy_from_host(c.warp_base.data(), c.warps, c.stream);
    c.d_warp_quads.copy_from_host(c.warp_quads.data(), c.warps, c.stream);
    c.d_items.copy_from_host(c.items.data(), items.size(), c.stream);
    launch_inter(
        InterLaunch{c.d_layout.data(), c.d_warp_base.data(), c.d_warp_quads.data(), c.d_boundary.data(),
                    multi_strip ? total * 4 : 0, c.warps, c.d_items.data(), static_cast<int>(items.size()),
                    ps.profiles.data(), ps.pair_profile.data(), ps.pair_m_pad.data(), c.d_best.data(),
                    static_cast<unsigned long long>(c.warps) * kWarpSize},
        GapCosts{scoring.gap_open, scoring.gap_extend}, c.stream);
    c.d_best.copy_to_host(c.best.data(), static_cast<std::size_t>(c.warps) * kWarpSize * pairs, c.stream);
    c.done.record(c.stream);
    in_flight.push_back(&c);
    ++submitted;
  }
  for (ChunkSet* c : in_flight) finish(*c);
  const double chunks_done = now_seconds();
  const bool long_pending = n_long > 0 && cudaEventQuery(ps.long_done->get()) == cudaErrorNotReady;
  if (n_long > 0) {
    ps.long_done->synchronize();
    for (std::size_t q = 0; q < query_count; ++q)
      for (std::size_t k = 0; k < n_long; ++k)
        scores[q][tile.id(n_short + k)] = ps.long_best_host[q * n_long + k];
  }
  const double long_done = now_seconds();
  for (std::size_t q = 0; q < query_count; ++q) {
    if (rescue[q].empty()) continue;  // 16-bit saturation: exact 32-bit rescoring of those pairs
    const auto best = rescore_exact(ps, tile, rescue[q], ps.queries.data() + query_offset[q],
                                    static_cast<int>(queries[q].length), scoring);
    for (std::size_t k = 0; k < rescue[q].size(); ++k) scores[q][tile.id(rescue[q][k])] = best[k];
    counters.rescored += rescue[q].size();
  }
  const double ended = now_seconds();
  counters.device_seconds += ended - first_launch;
  // MOLACCEL_TRACE=align: where one tile's time goes (milliseconds from entering this function), to
  // see which per-device costs do not shrink with a device's share of the database.
  if (trace_enabled("align")) {
    int device = -1;
    cudaGetDevice(&device);
    std::uint64_t long_residues = 0;
    for (std::size_t k = 0; k < n_long; ++k) long_residues += long_length[k];
    trace_message(
        "align",
        fmt::format(
            fmt::runtime("gpu{}: {} short ({:.1f} M res, {} chunks) + {} long ({:.1f} M res); setup "
                         "{:.1f} ms, chunks done {:.1f}, long done {:.1f}{}, rescored {} by {:.1f} ms"),
            device, n_short, static_cast<double>(short_residues) / 1e6, chunks, n_long,
            static_cast<double>(long_residues) / 1e6, (first_launch - entered) * 1e3,
            (chunks_done - entered) * 1e3, (long_done - entered) * 1e3, long_pending ? " (waited)" : "",
            counters.rescored, (ended - entered) * 1e3));
  }
}

}  // namespace molaccel::align::gpu_entry

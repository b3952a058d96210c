// LINGO across MPI ranks. Each rank reads and holds only its slice of every input (a byte range of
// a plain .smi, a range of lines of a gzip one). search: the blocks of queries travel a ring with
// their best hits so far, each rank searching every block against its database slice; back home,
// a block's rank fetches its targets' names from the ranks holding them and formats its lines.
// neighbors: the slices travel the ring for N / 2 steps, each block of pairs computed by one of
// its two ranks, the pairs routed to the rank holding their query. cluster: those pairs, the
// Butina pass on rank 0. matrix: each rank's rows against the slices travelling the ring. Outputs
// go to rank 0 in rank order, which is the output order. Similarities are bit-identical on every
// backend and every merge keeps the one reported order, so the results are the single-process ones
// for any number of ranks. The replicated forms (the whole set on every rank) remain for outputs
// that rank 0 compresses.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "lingo/io/rank_slices.hpp"
#include "molaccel/distributed.hpp"
#include "molaccel/lingo.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::lingo {
namespace {

static_assert(std::is_trivially_copyable_v<Hit>);

// Boundaries [b_r, b_{r+1}) of `ranks` contiguous ranges of `weights` with about equal sums.
std::vector<std::size_t> balanced_ranges(const std::vector<std::uint64_t>& weights, int ranks) {
  std::vector<std::uint64_t> prefix(weights.size() + 1, 0);
  for (std::size_t i = 0; i < weights.size(); ++i) prefix[i + 1] = prefix[i] + weights[i];
  std::vector<std::size_t> bounds(static_cast<std::size_t>(ranks) + 1, weights.size());
  bounds[0] = 0;
  for (int r = 1; r < ranks; ++r) {
    const std::uint64_t target =
        prefix.back() * static_cast<std::uint64_t>(r) / static_cast<std::uint64_t>(ranks);
    bounds[static_cast<std::size_t>(r)] =
        static_cast<std::size_t>(std::lower_bound(prefix.begin(), prefix.end() - 1, target) - prefix.begin());
  }
  for (int r = 1; r <= ranks; ++r)
    bounds[static_cast<std::size_t>(r)] =
        std::max(bounds[static_cast<std::size_t>(r)], bounds[static_cast<std::size_t>(r) - 1]);
  return bounds;
}

std::vector<std::size_t> iota_range(std::size_t begin, std::size_t end) {
  std::vector<std::size_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

bool reported_before(const Hit& a, const Hit& b) {
  if (a.similarity != b.similarity) return a.similarity > b.similarity;
  return a.target < b.target;
}

std::vector<Hit> from_bytes(const std::vector<std::byte>& bytes) {
  std::vector<Hit> hits(bytes.size() / sizeof(Hit));
  if (!hits.empty()) std::memcpy(hits.data(), bytes.data(), hits.size() * sizeof(Hit));
  return hits;
}

// The lists that every rank sent for this rank's queries [first, last) (each in query order, best
// first per query) -> the best k of each query in the reported order, queries ascending, queries
// in parallel. The reported order is total (a target appears once per query), so the result does
// not depend on the order of the lists.
std::vector<Hit> merge_block(const std::vector<std::vector<Hit>>& lists, std::size_t first, std::size_t last,
                             std::size_t k, int threads) {
  const std::size_t nq = last - first;
  std::vector<std::vector<std::size_t>> starts(lists.size(), std::vector<std::size_t>(nq + 1, 0));
  for (std::size_t r = 0; r < lists.size(); ++r) {
    for (const Hit& h : lists[r]) {
      if (h.query < first || h.query >= last)
        throw Error("merge: a rank sent a query of another rank", __FILE__, __LINE__);
      ++starts[r][h.query - first + 1];
    }
    for (std::size_t q = 0; q < nq; ++q) starts[r][q + 1] += starts[r][q];
  }
  std::vector<std::size_t> out_start(nq + 1, 0);
  for (std::size_t q = 0; q < nq; ++q) {
    std::size_t candidates = 0;
    for (std::size_t r = 0; r < lists.size(); ++r) candidates += starts[r][q + 1] - starts[r][q];
    out_start[q + 1] = out_start[q] + std::min(k, candidates);
  }
  std::vector<Hit> out(out_start[nq]);
  // Each list is best first per query: a heap of the lists' heads gives the next best in
  // O(log N), so a query costs O(k log N).
  parallel_for(nq, threads, 256, [&](std::size_t begin, std::size_t end) {
    std::vector<std::pair<std::size_t, std::size_t>> heads;  // (position, list)
    auto worse = [&](const std::pair<std::size_t, std::size_t>& a,
                     const std::pair<std::size_t, std::size_t>& b) {
      return reported_before(lists[b.second][b.first], lists[a.second][a.first]);
    };
    for (std::size_t q = begin; q < end; ++q) {
      heads.clear();
      for (std::size_t r = 0; r < lists.size(); ++r)
        if (starts[r][q] < starts[r][q + 1]) heads.emplace_back(starts[r][q], r);
      std::make_heap(heads.begin(), heads.end(), worse);
      for (std::size_t o = out_start[q]; o < out_start[q + 1]; ++o) {
        std::pop_heap(heads.begin(), heads.end(), worse);
        auto& [at, r] = heads.back();
        out[o] = lists[r][at];
        if (++at < starts[r][q + 1])
          std::push_heap(heads.begin(), heads.end(), worse);
        else
          heads.pop_back();
      }
    }
  });
  return out;
}

void add_info(RunInfo* info, const RunInfo& local) {
  if (!info) return;
  *info = local;
}

using detail::pack;
using detail::put;
using detail::read_gzip_slice;
using detail::read_slice;
using detail::TextSlice;
using detail::unpack_into;
using detail::Unpacker;

// How a molecule file is read across ranks: whole by every rank (standard input, CSV, whose
// records may span lines), or each rank its slice of a plain or gzip .smi file.
enum class Reading : std::uint8_t { whole, plain_slices, gzip_slices };

Reading reading_of(const std::filesystem::path& path, const ReadOptions& read) {
  std::error_code ec;
  if (path == "-" || !read.smiles_column.empty() || !std::filesystem::is_regular_file(path, ec))
    return Reading::whole;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Reading::whole;  // read_molecules reports it
  unsigned char magic[2] = {0, 0};
  const bool gzip = std::fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  std::fclose(f);
  return gzip ? Reading::gzip_slices : Reading::plain_slices;
}

// Rank 0 decides (every rank must take the same path through the collectives).
Reading agree_reading(Communicator& comm, const std::filesystem::path& path, const ReadOptions& read) {
  std::vector<std::byte> how{std::byte{0}};
  if (comm.is_root())
    how[0] = static_cast<std::byte>(comm.size() > 1 ? reading_of(path, read) : Reading::whole);
  comm.broadcast(how, 0);
  return static_cast<Reading>(how.at(0));
}

// This rank's part of a sliced file, parsed, with every rank's molecule count and the read_molecules
// statistics of the whole file.
struct Part {
  MoleculeSet set;
  std::vector<std::uint64_t> molecules_of;  // per rank
  ReadStats total;
};
Part read_part(Communicator& comm, const std::filesystem::path& path, const LingoOptions& lingo,
               const ReadOptions& read, Reading how) {
  TextSlice slice;
  run_step(comm, [&] {
    if (how == Reading::gzip_slices) {
      slice = read_gzip_slice(path, comm.rank(), comm.size());
    } else {
      auto [text, lines] = read_slice(path, comm.rank(), comm.size());
      slice.text = std::move(text);
      slice.lines = lines;
    }
  });
  if (how == Reading::plain_slices) {  // line numbers count on from the slices before (a scan)
    const std::uint64_t my_lines = slice.lines;
    const auto lines = allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_lines, 1));
    for (int r = 0; r < comm.rank(); ++r) slice.lines_before += lines[static_cast<std::size_t>(r)].at(0);
  }
  ReadOptions mine = read;
  mine.slice = true;
  mine.lines_before = slice.lines_before;
  Part part;
  ReadStats stats;
  run_step(comm, [&] {
    part.set = parse_molecules(path.string(), slice.text, lingo, mine, &stats);
    std::string().swap(slice.text);
  });
  const std::uint64_t my_stats[4] = {stats.skipped_invalid, stats.first_skipped_line, stats.lines,
                                     part.set.size()};
  for (const auto& st : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(my_stats, 4))) {
    part.total.skipped_invalid += st.at(0);
    if (st.at(1) != 0 && (part.total.first_skipped_line == 0 || st.at(1) < part.total.first_skipped_line))
      part.total.first_skipped_line = st.at(1);
    part.total.lines += st.at(2);
    part.total.molecules += st.at(3);
    part.molecules_of.push_back(st.at(3));
  }
  return part;
}

// `bytes` to rank r - 1 (cyclically), those of rank r + 1 returned: one step of the ring. Every
// message travels in pieces of at most 256 MiB (MPI counts are int), all ranks taking part in
// the same number of all-to-alls.
std::vector<std::byte> shift_down(Communicator& comm, std::span<const std::byte> bytes, RunInfo& info) {
  constexpr std::uint64_t kPiece = std::uint64_t{256} << 20;
  const std::uint64_t my_size = bytes.size();
  std::uint64_t rounds = 0;
  for (const auto& size : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_size, 1)))
    rounds = std::max(rounds, (size.at(0) + kPiece - 1) / kPiece);
  const auto to = static_cast<std::size_t>((comm.rank() + comm.size() - 1) % comm.size());
  std::vector<std::byte> out;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    const std::uint64_t at = std::min(my_size, round * kPiece), n = std::min(kPiece, my_size - at);
    std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
    counts[to] = static_cast<std::size_t>(n);
    const auto got =
        comm.alltoall(bytes.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n)), counts);
    out.insert(out.end(), got.begin(), got.end());
  }
  info.merge_bytes_sent += my_size;
  info.merge_bytes_received += out.size();
  return out;
}

// One ring step of a slice of molecules: `*slice` (its first molecule has global index `first`)
// goes to rank r - 1 and rank r + 1's arrives in `travelling`, with `slice` and `first` set to it;
// q and preprocessing are `like`'s.
void shift_slice_down(Communicator& comm, const MoleculeSet*& slice, std::uint64_t& first,
                      MoleculeSet& travelling, const MoleculeSet& like, RunInfo& info) {
  std::vector<std::byte> message(sizeof(std::uint64_t));
  std::memcpy(message.data(), &first, sizeof first);
  const auto packed = pack(*slice, false);
  message.insert(message.end(), packed.begin(), packed.end());
  const auto received = shift_down(comm, message, info);
  run_step(comm, [&] {
    MOLACCEL_EXPECTS(received.size() >= sizeof(std::uint64_t), "a slice arrived truncated");
    std::memcpy(&first, received.data(), sizeof first);
    MoleculeSet next;
    next.q = like.q;
    next.preprocessing = like.preprocessing;
    unpack_into(next, std::span<const std::byte>(received).subspan(sizeof(std::uint64_t)));
    travelling = std::move(next);
    slice = &travelling;
  });
}

// Two lists of the same queries (`a`: per query `per_a` hits, `b`: `per_b`, each best first) ->
// the best min(k, per_a + per_b) of each, queries in parallel. Targets differ between the lists,
// so the reported order is total and the result does not depend on which list is which.
std::vector<Hit> merge_two(const std::vector<Hit>& a, std::size_t per_a, const std::vector<Hit>& b,
                           std::size_t per_b, std::size_t queries, std::size_t k, int threads) {
  const std::size_t per = std::min(k, per_a + per_b);
  std::vector<Hit> out(queries * per);
  parallel_for(queries, threads, 256, [&](std::size_t begin, std::size_t end) {
    for (std::size_t q = begin; q < end; ++q) {
      const Hit *x = a.data() + q * per_a, *x_end = x + per_a, *y = b.data() + q * per_b, *y_end = y + per_b;
      for (Hit *o = out.data() + q * per, *o_end = o + per; o < o_end; ++o)
        *o = (y == y_end || (x < x_end && reported_before(*x, *y))) ? *x++ : *y++;
    }
  });
  return out;
}

// The names of the targets of `block.hits`, asked of the ranks whose slices hold them: an
// all-to-all of the wanted indices (each once, ascending, per rank), then one of the names.
void fetch_target_names(Communicator& comm, const MoleculeSlice& db, HitBlock& block, RunInfo& info) {
  const std::uint64_t my_first = db.first;
  std::vector<std::uint64_t> firsts;
  for (const auto& f : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_first, 1)))
    firsts.push_back(f.at(0));
  const std::size_t ranks = firsts.size(), rank = static_cast<std::size_t>(comm.rank());
  auto owner = [&](std::uint32_t t) {
    return static_cast<std::size_t>(std::upper_bound(firsts.begin(), firsts.end(), t) - firsts.begin()) - 1;
  };
  std::vector<std::vector<std::uint32_t>> wanted(ranks);
  std::vector<std::uint32_t> requests;
  std::vector<std::size_t> request_counts(ranks);
  run_step(comm, [&] {
    for (const Hit& h : block.hits) wanted[owner(h.target)].push_back(h.target);
    for (std::size_t r = 0; r < ranks; ++r) {
      std::sort(wanted[r].begin(), wanted[r].end());
      wanted[r].erase(std::unique(wanted[r].begin(), wanted[r].end()), wanted[r].end());
      request_counts[r] = wanted[r].size() * sizeof(std::uint32_t);
      requests.insert(requests.end(), wanted[r].begin(), wanted[r].end());
    }
  });
  std::vector<std::size_t> asked_counts;
  const auto asked =
      comm.alltoall(std::as_bytes(std::span<const std::uint32_t>(requests)), request_counts, &asked_counts);
  // Each name as a u32 length and its bytes.
  std::vector<std::byte> answer;
  std::vector<std::size_t> answer_counts(ranks);
  run_step(comm, [&] {
    std::size_t at = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::size_t before = answer.size();
      for (std::size_t i = 0; i < asked_counts[r] / sizeof(std::uint32_t); ++i, at += sizeof(std::uint32_t)) {
        std::uint32_t t = 0;
        std::memcpy(&t, asked.data() + at, sizeof t);
        if (t < db.first || t - db.first >= db.set.names.size())
          throw Error("search across ranks: a name was asked of the wrong rank", __FILE__, __LINE__);
        const std::string& name = db.set.names[t - db.first];
        const auto length = static_cast<std::uint32_t>(name.size());
        put(answer, &length, 1);
        put(answer, name.data(), name.size());
      }
      answer_counts[r] = answer.size() - before;
    }
  });
  std::vector<std::size_t> name_counts;
  const auto names = comm.alltoall(answer, answer_counts, &name_counts);
  run_step(comm, [&] {
    Unpacker in(names);
    std::vector<std::size_t> base(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
      base[r] = block.target_names.size();
      for (std::size_t i = 0; i < wanted[r].size(); ++i) {
        std::uint32_t length = 0;
        in.take(&length, 1);
        std::string name(length, '\0');
        in.take(name.data(), name.size());
        block.target_names.push_back(std::move(name));
      }
    }
    block.target_name_of.resize(block.hits.size());
    for (std::size_t i = 0; i < block.hits.size(); ++i) {
      const std::uint32_t t = block.hits[i].target;
      const std::size_t r = owner(t);
      block.target_name_of[i] = static_cast<std::uint32_t>(
          base[r] + static_cast<std::size_t>(std::lower_bound(wanted[r].begin(), wanted[r].end(), t) -
                                             wanted[r].begin()));
    }
  });
  info.merge_bytes_sent +=
      requests.size() * sizeof(std::uint32_t) - request_counts[rank] + answer.size() - answer_counts[rank];
  info.merge_bytes_received += asked.size() - asked_counts[rank] + names.size() - name_counts[rank];
}

void check_threshold(float threshold) {
  if (!(threshold >= 0.0f && threshold <= 1.0f))
    throw InputError("--threshold", 0, fmt::format("threshold must be in [0, 1], got {}", threshold));
}

void sort_pairs(std::vector<Hit>& pairs) {
  std::sort(pairs.begin(), pairs.end(), [](const Hit& x, const Hit& y) {
    return x.query != y.query ? x.query < y.query : x.target < y.target;
  });
}

// The pairs at or above `threshold` between `rows` (molecules row_first...) and `columns`
// (column_first...), each as (lower index, higher index), appended to `out`: every pair of the
// block when `disjoint` (two different slices), else only those with the row's index below the
// column's (a triangle). The size bound of the single-process run: similarity <= min(|A|,|B|) /
// max(|A|,|B|) (magnitudes for tanimoto, distinct Lingos for set and vidal), with the same 1e-6
// relative margin for fp32 rounding, so no pair at or above T is skipped. Rows go by increasing
// size in chunks; each chunk is computed as a dense block against only the columns whose size its
// rows can reach. Threshold 0: every pair, no bound.
void pairs_between(const Resources& resources, const MoleculeSet& rows, std::size_t row_first,
                   const MoleculeSet& columns, std::size_t column_first, bool disjoint, float threshold,
                   const ComputeOptions& options, RunInfo& info, std::vector<Hit>& out) {
  if (rows.size() == 0 || columns.size() == 0) return;
  auto size_in = [&](const MoleculeSet& set, std::size_t i) -> double {
    return static_cast<double>(options.metric == Metric::tanimoto ? set.magnitudes[i] : set.distinct(i));
  };
  const double t = static_cast<double>(threshold) * (1.0 - 1e-6);
  std::vector<std::size_t> rows_by_size = iota_range(0, rows.size()),
                           columns_by_size = iota_range(0, columns.size());
  std::stable_sort(rows_by_size.begin(), rows_by_size.end(),
                   [&](std::size_t x, std::size_t y) { return size_in(rows, x) < size_in(rows, y); });
  std::stable_sort(columns_by_size.begin(), columns_by_size.end(),
                   [&](std::size_t x, std::size_t y) { return size_in(columns, x) < size_in(columns, y); });
  // Rows per block: at most 512, and a block of at most ~64 M similarities.
  const std::size_t chunk_rows = std::clamp<std::size_t>((std::size_t{64} << 20) / columns.size(), 1, 512);
  std::vector<float> block;
  for (std::size_t c0 = 0; c0 < rows_by_size.size(); c0 += chunk_rows) {
    const std::vector<std::size_t> row_ids(
        rows_by_size.begin() + static_cast<std::ptrdiff_t>(c0),
        rows_by_size.begin() + static_cast<std::ptrdiff_t>(std::min(rows_by_size.size(), c0 + chunk_rows)));
    std::vector<std::size_t> column_ids;
    if (t > 0) {
      const double smin = size_in(rows, row_ids.front()), smax = size_in(rows, row_ids.back());
      if (smax == 0) continue;  // molecules without Lingos reach nothing above 0
      const auto first = std::partition_point(columns_by_size.begin(), columns_by_size.end(),
                                              [&](std::size_t j) { return size_in(columns, j) < t * smin; });
      const auto last = std::partition_point(first, columns_by_size.end(),
                                             [&](std::size_t j) { return t * size_in(columns, j) <= smax; });
      column_ids.assign(first, last);
    } else {
      column_ids = columns_by_size;
    }
    if (column_ids.empty()) continue;
    const MoleculeSet chunk = subset(rows, row_ids), chunk_columns = subset(columns, column_ids);
    block.resize(row_ids.size() * column_ids.size());
    RunInfo part;
    similarity_matrix(resources, chunk, &chunk_columns, block.data(), options, &part);
    info.pairs += part.pairs;
    info.job.seconds += part.job.seconds;
    info.backend = part.backend;
    for (std::size_t r = 0; r < row_ids.size(); ++r)
      for (std::size_t c = 0; c < column_ids.size(); ++c) {
        const float s = block[r * column_ids.size() + c];
        const auto i = static_cast<std::uint32_t>(row_first + row_ids[r]),
                   j = static_cast<std::uint32_t>(column_first + column_ids[c]);
        if (s >= threshold && (i < j || (disjoint && i != j)))
          out.push_back({std::min(i, j), std::max(i, j), s});
      }
  }
}

}  // namespace

HitBlock search_block_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& queries,
                                   const MoleculeSet& db, std::size_t k, const ComputeOptions& options,
                                   RunInfo* info) {
  if (k == 0) throw InputError("-k", 0, "k must be at least 1");
  const std::size_t nq = queries.size(), nd = db.size();
  std::vector<Hit> mine;
  RunInfo local;
  const double t0 = now_seconds();
  run_step(comm, [&] {
    // A column's work is its Lingo count against every query (+1: molecules without Lingos).
    std::vector<std::uint64_t> weights(nd);
    for (std::size_t i = 0; i < nd; ++i) weights[i] = std::uint64_t{db.magnitudes[i]} + 1;
    const auto bounds = balanced_ranges(weights, comm.size());
    const std::size_t begin = bounds[static_cast<std::size_t>(comm.rank())],
                      end = bounds[static_cast<std::size_t>(comm.rank()) + 1];
    if (begin == end || nq == 0) return;
    const MoleculeSet slice = subset(db, iota_range(begin, end));
    mine = search(resources, queries, slice, k, options, &local);
    for (Hit& h : mine) h.target += static_cast<std::uint32_t>(begin);
  });
  // The merge: rank b owns the queries of block b (equal counts); an all-to-all sends each rank's
  // lists of block b's queries to rank b, which merges them. Every rank sends and receives about
  // Q k / N hits; no rank merges more than its block.
  const double merge_started = now_seconds();
  const auto queries_of = balanced_ranges(std::vector<std::uint64_t>(nq, 1), comm.size());
  const auto rank = static_cast<std::size_t>(comm.rank());
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(comm.size()));
  auto first_of = [&](std::size_t query) {
    return static_cast<std::size_t>(
        std::partition_point(mine.begin(), mine.end(), [&](const Hit& h) { return h.query < query; }) -
        mine.begin());
  };
  for (std::size_t b = 0; b < send_counts.size(); ++b)
    send_counts[b] = (first_of(queries_of[b + 1]) - first_of(queries_of[b])) * sizeof(Hit);
  std::vector<std::size_t> received_counts;
  const auto received =
      comm.alltoall(std::as_bytes(std::span<const Hit>(mine)), send_counts, &received_counts);
  local.merge_bytes_sent += mine.size() * sizeof(Hit) - send_counts[rank];
  local.merge_bytes_received += received.size() - received_counts[rank];
  HitBlock block;
  block.first_query = queries_of[rank];
  block.queries = queries_of[rank + 1] - queries_of[rank];
  run_step(comm, [&] {
    block.hits = merge_block(molaccel::detail::split_records<Hit>(received, received_counts),
                             queries_of[rank], queries_of[rank + 1], k, resources.cpu_threads());
    if (block.hits.size() != block.queries * std::min(k, nd))
      throw Error("merge: ranks returned too few hits", __FILE__, __LINE__);
  });
  local.merge_seconds = now_seconds() - merge_started;
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  return block;
}

std::vector<Hit> search_across_ranks(Communicator& comm, const Resources& resources,
                                     const MoleculeSet& queries, const MoleculeSet& db, std::size_t k,
                                     const ComputeOptions& options, RunInfo* info) {
  const HitBlock block = search_block_across_ranks(comm, resources, queries, db, k, options, info);
  const double started = now_seconds();
  std::vector<std::size_t> counts;
  const auto merged = comm.gather(std::as_bytes(std::span<const Hit>(block.hits)), 0, &counts);
  if (info) {
    info->merge_seconds += now_seconds() - started;
    if (comm.is_root())
      info->merge_bytes_received += merged.size() - counts[0];
    else
      info->merge_bytes_sent += block.hits.size() * sizeof(Hit);
  }
  if (!comm.is_root()) return {};
  return from_bytes(merged);
}

MoleculeSet read_molecules_across_ranks(Communicator& comm, const std::filesystem::path& path,
                                        const LingoOptions& lingo, const ReadOptions& read,
                                        ReadStats* stats) {
  MoleculeSet set;
  const Reading how = agree_reading(comm, path, read);
  if (how == Reading::whole) {
    run_step(comm, [&] { set = read_molecules(path, lingo, read, stats); });
    return set;
  }
  Part part = read_part(comm, path, lingo, read, how);
  // The parts travel in one all-gather, whose total MPI counts in int: a larger set (some 5 M
  // molecules) is read whole by every rank instead; no molecule anywhere: the file read whole
  // gives the one-process error.
  std::vector<std::byte> packed = pack(part.set);
  part.set = MoleculeSet{};
  const std::uint64_t packed_size = packed.size();
  std::uint64_t total_size = 0;
  for (const auto& size :
       allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&packed_size, 1)))
    total_size += size.at(0);
  if (part.total.molecules == 0 || total_size > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    run_step(comm, [&] { set = read_molecules(path, lingo, read, stats); });
    return set;
  }
  std::vector<std::size_t> counts;
  const auto parts = comm.allgather(packed, &counts);
  std::vector<std::byte>().swap(packed);
  run_step(comm, [&] {
    set.q = lingo.q;
    set.preprocessing = lingo.preprocessing;
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      unpack_into(set, std::span<const std::byte>(parts).subspan(at, counts[r]));
      at += counts[r];
    }
  });
  if (stats) *stats = part.total;
  return set;
}

MoleculeSlice read_molecule_slice_across_ranks(Communicator& comm, const std::filesystem::path& path,
                                               const LingoOptions& lingo, const ReadOptions& read,
                                               ReadStats* stats) {
  MoleculeSlice slice;
  const Reading how = agree_reading(comm, path, read);
  Part part;
  if (how != Reading::whole) part = read_part(comm, path, lingo, read, how);
  if (how == Reading::whole || part.total.molecules == 0) {
    // Read whole (no molecule anywhere: the one-process error), each rank keeping a range balanced
    // by Lingo count.
    run_step(comm, [&] {
      MoleculeSet set = read_molecules(path, lingo, read, stats);
      std::vector<std::uint64_t> weights(set.size());
      for (std::size_t i = 0; i < set.size(); ++i) weights[i] = std::uint64_t{set.magnitudes[i]} + 1;
      const auto bounds = balanced_ranges(weights, comm.size());
      slice.first = bounds[static_cast<std::size_t>(comm.rank())];
      slice.total = set.size();
      slice.set =
          comm.size() == 1
              ? std::move(set)
              : subset(set, iota_range(slice.first, bounds[static_cast<std::size_t>(comm.rank()) + 1]));
    });
    return slice;
  }
  for (int r = 0; r < comm.rank(); ++r) slice.first += part.molecules_of[static_cast<std::size_t>(r)];
  slice.total = part.total.molecules;
  slice.set = std::move(part.set);
  if (stats) *stats = part.total;
  return slice;
}

HitBlock search_slices_across_ranks(Communicator& comm, const Resources& resources,
                                    const MoleculeSlice& queries, const MoleculeSlice& db, std::size_t k,
                                    const ComputeOptions& options, bool target_names, RunInfo* info) {
  if (k == 0) throw InputError("-k", 0, "k must be at least 1");
  RunInfo local;
  double exchange_seconds = 0;
  const double t0 = now_seconds();
  const int ranks = comm.size();
  // The ring: in step s rank r holds the block of queries that rank r + s read, with its best hits
  // among the database slices it has met so far, searches it against its own slice, merges, and
  // passes block and hits to rank r - 1; after the N-th pass every block is home with its hits
  // against the whole database.
  const MoleculeSet* block = &queries.set;
  MoleculeSet travelling;  // a block received from rank r + 1 (without names)
  std::uint64_t first = queries.first, per_query = 0;
  std::vector<Hit> best;
  for (int step = 0; step < ranks; ++step) {
    run_step(comm, [&] {
      if (block->size() == 0 || db.set.size() == 0) return;
      RunInfo part;
      std::vector<Hit> mine = search(resources, *block, db.set, k, options, &part);
      for (Hit& h : mine) {
        h.query += static_cast<std::uint32_t>(first);
        h.target += static_cast<std::uint32_t>(db.first);
      }
      const std::size_t per_mine = std::min(k, db.set.size());
      if (mine.size() != block->size() * per_mine)
        throw Error("search across ranks: a slice returned too few hits", __FILE__, __LINE__);
      const double merge_started = now_seconds();
      best = merge_two(best, per_query, mine, per_mine, block->size(), k, resources.cpu_threads());
      per_query = std::min<std::uint64_t>(k, per_query + per_mine);
      exchange_seconds += now_seconds() - merge_started;
      local.pairs += part.pairs;
      local.pairs_skipped += part.pairs_skipped;
      local.prepare_seconds += part.prepare_seconds;
      local.job.seconds += part.job.seconds;
      local.job.tiles += part.job.tiles;
      local.job.retries += part.job.retries;
      local.backend = part.backend;
    });
    if (ranks == 1) break;
    const double shift_started = now_seconds();
    // Header (first query, queries, hits per query, packed block bytes), the block (not in the
    // last pass: its home rank has it), the hits.
    const bool last = step == ranks - 1;
    std::vector<std::byte> message(4 * sizeof(std::uint64_t));
    const std::vector<std::byte> packed = last ? std::vector<std::byte>() : pack(*block, false);
    const std::uint64_t header[4] = {first, block->size(), per_query, packed.size()};
    std::memcpy(message.data(), header, sizeof header);
    message.insert(message.end(), packed.begin(), packed.end());
    put(message, best.data(), best.size());
    std::vector<Hit>().swap(best);
    const auto received = shift_down(comm, message, local);
    run_step(comm, [&] {
      Unpacker in(received);
      std::uint64_t h[4];
      in.take(h, 4);
      first = h[0];
      per_query = h[2];
      MOLACCEL_EXPECTS(received.size() >= 4 * sizeof(std::uint64_t) + h[3],
                       "a block of queries arrived truncated");
      if (last) {
        block = &queries.set;
        MOLACCEL_EXPECTS(first == queries.first && h[1] == queries.set.size(),
                         "the ring returned another block");
      } else {
        travelling = MoleculeSet{};
        travelling.q = queries.set.q;
        travelling.preprocessing = queries.set.preprocessing;
        unpack_into(travelling,
                    std::span<const std::byte>(received).subspan(4 * sizeof(std::uint64_t), h[3]));
        block = &travelling;
        MOLACCEL_EXPECTS(travelling.size() == h[1], "a block of queries arrived truncated");
      }
      best.resize(static_cast<std::size_t>(h[1] * per_query));
      Unpacker hits(std::span<const std::byte>(received).subspan(4 * sizeof(std::uint64_t) + h[3]));
      hits.take(best.data(), best.size());
    });
    exchange_seconds += now_seconds() - shift_started;
  }
  HitBlock out;
  out.first_query = queries.first;
  out.queries = queries.set.size();
  run_step(comm, [&] {
    if (best.size() != out.queries * std::min(k, db.total))
      throw Error("search across ranks: ranks returned too few hits", __FILE__, __LINE__);
  });
  out.hits = std::move(best);
  if (target_names) {
    const double names_started = now_seconds();
    fetch_target_names(comm, db, out, local);
    exchange_seconds += now_seconds() - names_started;
  }
  local.merge_seconds = exchange_seconds;
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  return out;
}

std::vector<Hit> neighbors_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& db,
                                        float threshold, const ComputeOptions& options, RunInfo* info) {
  check_threshold(threshold);
  const std::size_t n = db.size();
  std::vector<Hit> mine;
  RunInfo local;
  const double t0 = now_seconds();
  run_step(comm, [&] {
    // Row i of the upper triangle holds n-1-i pairs.
    std::vector<std::uint64_t> weights(n);
    for (std::size_t i = 0; i < n; ++i) weights[i] = n - 1 - i;
    const auto bounds = balanced_ranges(weights, comm.size());
    const std::size_t begin = bounds[static_cast<std::size_t>(comm.rank())],
                      end = bounds[static_cast<std::size_t>(comm.rank()) + 1];
    if (begin == end) return;
    pairs_between(resources, subset(db, iota_range(begin, end)), begin, subset(db, iota_range(begin, n)),
                  begin, false, threshold, options, local, mine);
    sort_pairs(mine);
  });
  const auto gathered = gather_records<Hit>(comm, mine, 0);
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  if (!comm.is_root()) return {};
  std::vector<Hit> result;
  for (const auto& from_rank : gathered) result.insert(result.end(), from_rank.begin(), from_rank.end());
  return result;
}

HitBlock neighbors_slices_across_ranks(Communicator& comm, const Resources& resources,
                                       const MoleculeSlice& db, float threshold,
                                       const ComputeOptions& options, bool target_names, RunInfo* info) {
  check_threshold(threshold);
  RunInfo local;
  double exchange_seconds = 0;
  const double t0 = now_seconds();
  const int ranks = comm.size(), rank = comm.rank();
  // The ring: in step s rank r holds the slice of rank t = r + s (mod N). The block of pairs
  // between slices r and t (r != t) is met twice, by rank r in step d = t - r (mod N) and by rank t
  // in step N - d; the rank meeting it first computes it (at d = N / 2, the lower rank), so every
  // rank computes its own triangle and about (N - 1) / 2 blocks, and the ring stops after N / 2 steps.
  std::vector<Hit> found;
  MoleculeSet travelling;
  const MoleculeSet* columns = &db.set;
  std::uint64_t columns_first = db.first;
  for (int step = 0; step <= ranks / 2; ++step) {
    if (step > 0) {
      const double shift_started = now_seconds();
      shift_slice_down(comm, columns, columns_first, travelling, db.set, local);
      exchange_seconds += now_seconds() - shift_started;
    }
    const int t = (rank + step) % ranks, d = step;
    const bool computes = step == 0 || 2 * d < ranks || (2 * d == ranks && rank < t);
    run_step(comm, [&] {
      if (computes)
        pairs_between(resources, db.set, db.first, *columns, columns_first, step > 0, threshold, options,
                      local, found);
    });
  }
  // Each pair to the rank whose slice holds its query (i < j), which sorts them: the blocks in rank
  // order are the output order.
  const double route_started = now_seconds();
  const std::uint64_t my_first = db.first;
  std::vector<std::uint64_t> firsts;
  for (const auto& f : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_first, 1)))
    firsts.push_back(f.at(0));
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(ranks), 0);
  run_step(comm, [&] {
    auto owner = [&](const Hit& h) {
      return static_cast<std::size_t>(std::upper_bound(firsts.begin(), firsts.end(), h.query) -
                                      firsts.begin()) -
             1;
    };
    std::stable_sort(found.begin(), found.end(),
                     [&](const Hit& x, const Hit& y) { return owner(x) < owner(y); });
    for (const Hit& h : found) send_counts[owner(h)] += sizeof(Hit);
  });
  std::vector<std::size_t> received_counts;
  const auto received =
      comm.alltoall(std::as_bytes(std::span<const Hit>(found)), send_counts, &received_counts);
  local.merge_bytes_sent += found.size() * sizeof(Hit) - send_counts[static_cast<std::size_t>(rank)];
  local.merge_bytes_received += received.size() - received_counts[static_cast<std::size_t>(rank)];
  std::vector<Hit>().swap(found);
  HitBlock out;
  out.first_query = db.first;
  out.queries = db.set.size();
  run_step(comm, [&] {
    out.hits = from_bytes(received);
    sort_pairs(out.hits);
  });
  if (target_names) fetch_target_names(comm, db, out, local);
  exchange_seconds += now_seconds() - route_started;
  local.merge_seconds = exchange_seconds;
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  return out;
}

Clustering cluster_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& db,
                                float threshold, const ComputeOptions& options, RunInfo* info) {
  const auto pairs = neighbors_across_ranks(comm, resources, db, threshold, options, info);
  if (!comm.is_root()) return {};
  return butina_clusters(db.size(), pairs);
}

ClusterSlice cluster_slices_across_ranks(Communicator& comm, const Resources& resources,
                                         const MoleculeSlice& db, float threshold,
                                         const ComputeOptions& options, RunInfo* info) {
  const HitBlock block = neighbors_slices_across_ranks(comm, resources, db, threshold, options, false, info);
  // The pairs on rank 0 in rank order (the output order), the Butina pass there, each rank sent the
  // clusters of its molecules: a header (clusters, pairs), then per molecule its cluster (u32) and
  // whether it is a centroid (u8).
  const auto gathered = gather_records<Hit>(comm, block.hits, 0);
  const std::uint64_t my_range[2] = {db.first, db.set.size()};
  const auto ranges = allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(my_range, 2));
  std::vector<std::byte> parts;
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  run_step(comm, [&] {
    if (!comm.is_root()) return;
    std::vector<Hit> pairs;
    for (const auto& from_rank : gathered) pairs.insert(pairs.end(), from_rank.begin(), from_rank.end());
    const Clustering c = butina_clusters(db.total, pairs);
    std::vector<std::uint8_t> is_centroid(db.total, 0);
    for (const auto m : c.centroids) is_centroid[m] = 1;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      const std::size_t before = parts.size();
      const std::uint64_t header[2] = {c.centroids.size(), c.pairs};
      put(parts, header, 2);
      const auto first = static_cast<std::size_t>(ranges[r].at(0)),
                 n = static_cast<std::size_t>(ranges[r].at(1));
      put(parts, c.cluster_of.data() + first, n);
      put(parts, is_centroid.data() + first, n);
      counts[r] = parts.size() - before;
    }
  });
  const auto mine = comm.alltoall(parts, counts);
  ClusterSlice out;
  run_step(comm, [&] {
    Unpacker in(mine);
    std::uint64_t header[2];
    in.take(header, 2);
    out.clusters = static_cast<std::size_t>(header[0]);
    out.pairs = static_cast<std::size_t>(header[1]);
    in.append(out.cluster_of, db.set.size());
    in.append(out.is_centroid, db.set.size());
  });
  return out;
}

void write_similarity_matrix_across_ranks(Communicator& comm, const Resources& resources,
                                          const MoleculeSlice& queries, const MoleculeSlice* db,
                                          const std::filesystem::path& path, const ComputeOptions& options,
                                          RunInfo* info, OutputType type) {
  const MoleculeSlice& columns = db ? *db : queries;
  const std::size_t rows = queries.set.size(), nd = columns.total;
  std::vector<float> block;
  std::vector<std::uint8_t> mine;
  RunInfo local;
  const double t0 = now_seconds();
  run_step(comm, [&] { block.resize(rows * nd); });
  // In step s this rank holds the database slice of rank r + s and fills those columns of its rows.
  const MoleculeSet* visiting = &columns.set;
  MoleculeSet travelling;
  std::uint64_t visiting_first = columns.first;
  std::vector<float> part;
  for (int step = 0; step < comm.size(); ++step) {
    if (step > 0) {
      shift_slice_down(comm, visiting, visiting_first, travelling, columns.set, local);
    }
    run_step(comm, [&] {
      const std::size_t cols = visiting->size();
      if (rows == 0 || cols == 0) return;
      part.resize(rows * cols);
      RunInfo step_info;
      similarity_matrix(resources, queries.set, visiting, part.data(), options, &step_info);
      local.pairs += step_info.pairs;
      local.job.seconds += step_info.job.seconds;
      local.prepare_seconds += step_info.prepare_seconds;
      local.backend = step_info.backend;
      for (std::size_t r = 0; r < rows; ++r)
        std::copy_n(part.data() + r * cols, cols, block.data() + r * nd + visiting_first);
    });
  }
  run_step(comm, [&] {
    std::vector<float>().swap(part);
    mine = similarity_bytes(block, type);
    std::vector<float>().swap(block);
  });
  // Rank 0 writes the header and the blocks in rank order (file order), receiving each rank's
  // block in pieces of at most 256 MiB.
  write_in_rank_order(comm, path, comm.is_root() ? npy_matrix_header(queries.total, nd, type) : std::string(),
                      std::as_bytes(std::span<const std::uint8_t>(mine)));
  local.seconds = now_seconds() - t0;
  add_info(info, local);
}

}  // namespace molaccel::lingo

// LINGO across MPI ranks. search: each rank takes a contiguous slice of the database balanced by
// Lingo count (the work of a column is proportional to it), computes every query's top-k in its
// slice; an all-to-all sends each block of queries' lists to the rank owning that block, which
// merges them in the one reported order (similarity descending, lower database index); the blocks
// in rank order are the result (the command formats and writes them in rank order). neighbors: each rank
// takes a block of rows of the upper triangle balanced by pair count and keeps the pairs at or above the
// threshold; rank 0 concatenates the blocks in rank order, which is already the (query, target) order.
// cluster: those pairs, then the Butina pass on rank 0. Similarities are bit-identical on every backend, so
// the merged lists are the single-process ones for any number of ranks.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "molaccel/distributed.hpp"
#include "molaccel/lingo.hpp"

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

// ---- reading a .smi file across ranks ----
// Byte ranges: rank r's starts at the first line that starts at or after size x r / N (right
// after the first '\n' at or after that position - 1), so every line belongs to exactly one rank;
// a rank may get no bytes.
std::uint64_t slice_start(int fd, const std::string& path, std::uint64_t size, int rank, int ranks) {
  if (rank == 0) return 0;
  if (rank == ranks) return size;
  std::uint64_t at =
      static_cast<std::uint64_t>(static_cast<unsigned __int128>(size) * static_cast<std::uint64_t>(rank) /
                                 static_cast<std::uint64_t>(ranks));
  if (at == 0) return 0;
  --at;
  char buffer[1 << 16];
  while (at < size) {
    const ssize_t got = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw InputError(path, 0, fmt::format("cannot read at byte {}", at));
    if (const void* nl = std::memchr(buffer, '\n', static_cast<std::size_t>(got)))
      return at + static_cast<std::uint64_t>(static_cast<const char*>(nl) - buffer) + 1;
    at += static_cast<std::uint64_t>(got);
  }
  return size;
}

// This rank's bytes of `path` and its line count (a last line without '\n' counts).
std::pair<std::string, std::size_t> read_slice(const std::filesystem::path& path, int rank, int ranks) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path.string(), 0, fmt::format("cannot open: {}", std::strerror(errno)));
  std::pair<std::string, std::size_t> out;
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw InputError(path.string(), 0, "cannot stat");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t begin = slice_start(fd, path.string(), size, rank, ranks),
                        end = slice_start(fd, path.string(), size, rank + 1, ranks);
    auto& text = out.first;
    text.resize(static_cast<std::size_t>(end - begin));
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t got =
          ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(begin + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw InputError(path.string(), 0, fmt::format("cannot read at byte {}", begin + done));
      done += static_cast<std::size_t>(got);
    }
    out.second = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
    if (!text.empty() && text.back() != '\n') ++out.second;
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

// A set as bytes (names length-prefixed, then the arrays) and back, appended to `set`.
template <class T>
void put(std::vector<std::byte>& out, const T* data, std::size_t n) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  out.insert(out.end(), p, p + n * sizeof(T));
}
std::vector<std::byte> pack(const MoleculeSet& set) {
  std::vector<std::byte> out;
  const std::uint64_t header[2] = {set.size(), set.total_entries()};
  put(out, header, 2);
  for (const auto& name : set.names) {
    const std::uint64_t n = name.size();
    put(out, &n, 1);
    put(out, name.data(), name.size());
  }
  put(out, set.offsets.data() + 1, set.size());
  if (set.wide_keys())
    put(out, set.keys64.data(), set.keys64.size());
  else
    put(out, set.keys32.data(), set.keys32.size());
  put(out, set.counts.data(), set.counts.size());
  put(out, set.magnitudes.data(), set.magnitudes.size());
  return out;
}
class Unpacker {
 public:
  explicit Unpacker(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  void take(T* out, std::size_t n) {
    MOLACCEL_EXPECTS(at_ + n * sizeof(T) <= bytes_.size(), "a rank's molecules arrived truncated");
    if (n) std::memcpy(out, bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  template <class T>
  void append(std::vector<T>& v, std::size_t n) {
    const std::size_t old = v.size();
    v.resize(old + n);
    take(v.data() + old, n);
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};
void unpack_into(MoleculeSet& set, std::span<const std::byte> bytes) {
  Unpacker in(bytes);
  std::uint64_t header[2];
  in.take(header, 2);
  for (std::uint64_t i = 0; i < header[0]; ++i) {
    std::uint64_t n = 0;
    in.take(&n, 1);
    std::string name(static_cast<std::size_t>(n), '\0');
    in.take(name.data(), name.size());
    set.names.push_back(std::move(name));
  }
  const std::uint64_t base = set.offsets.back();
  const std::size_t first = set.offsets.size();
  in.append(set.offsets, static_cast<std::size_t>(header[0]));
  for (std::size_t i = first; i < set.offsets.size(); ++i) set.offsets[i] += base;
  if (set.wide_keys())
    in.append(set.keys64, static_cast<std::size_t>(header[1]));
  else
    in.append(set.keys32, static_cast<std::size_t>(header[1]));
  in.append(set.counts, static_cast<std::size_t>(header[1]));
  in.append(set.magnitudes, static_cast<std::size_t>(header[0]));
}

bool whole_file_input(const std::filesystem::path& path, const ReadOptions& read) {
  std::error_code ec;
  if (path == "-" || !read.smiles_column.empty() || !std::filesystem::is_regular_file(path, ec)) return true;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return true;  // read_molecules reports it
  unsigned char magic[2] = {0, 0};
  const bool gzip = std::fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  std::fclose(f);
  return gzip;
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
    block.hits = merge_block(detail::split_records<Hit>(received, received_counts), queries_of[rank],
                             queries_of[rank + 1], k, resources.cpu_threads());
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
  // Rank 0 decides how the file is read (every rank must take the same path through the collectives).
  std::vector<std::byte> whole{std::byte{1}};
  if (comm.size() > 1 && comm.is_root() && !whole_file_input(path, read)) whole[0] = std::byte{0};
  comm.broadcast(whole, 0);
  if (whole.at(0) == std::byte{1}) {
    run_step(comm, [&] { set = read_molecules(path, lingo, read, stats); });
    return set;
  }
  std::pair<std::string, std::size_t> slice;
  run_step(comm, [&] { slice = read_slice(path, comm.rank(), comm.size()); });
  const std::uint64_t my_lines = slice.second;
  const auto lines = allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_lines, 1));
  ReadOptions mine = read;
  mine.slice = true;
  for (int r = 0; r < comm.rank(); ++r) mine.lines_before += lines[static_cast<std::size_t>(r)].at(0);
  MoleculeSet part;
  ReadStats part_stats;
  run_step(comm, [&] {
    part = parse_molecules(path.string(), slice.first, lingo, mine, &part_stats);
    std::string().swap(slice.first);
  });
  // The parts travel in one all-gather, whose total MPI counts in int: a larger set (some 5 M
  // molecules) is read whole by every rank instead.
  std::vector<std::byte> packed = pack(part);
  part = MoleculeSet{};
  const std::uint64_t packed_size = packed.size();
  std::uint64_t total_size = 0;
  for (const auto& size :
       allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&packed_size, 1)))
    total_size += size.at(0);
  if (total_size > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    run_step(comm, [&] { set = read_molecules(path, lingo, read, stats); });
    return set;
  }
  std::vector<std::size_t> counts;
  const auto parts = comm.allgather(packed, &counts);
  std::vector<std::byte>().swap(packed);
  const std::uint64_t my_stats[3] = {part_stats.skipped_invalid, part_stats.first_skipped_line,
                                     part_stats.lines};
  const auto all_stats = allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(my_stats, 3));
  ReadStats total;
  run_step(comm, [&] {
    set.q = lingo.q;
    set.preprocessing = lingo.preprocessing;
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      unpack_into(set, std::span<const std::byte>(parts).subspan(at, counts[r]));
      at += counts[r];
      const auto& st = all_stats[r];
      total.skipped_invalid += st.at(0);
      if (st.at(1) != 0 && (total.first_skipped_line == 0 || st.at(1) < total.first_skipped_line))
        total.first_skipped_line = st.at(1);
      total.lines += st.at(2);
    }
    total.molecules = set.size();
    // No molecule anywhere: the file read whole gives the one-process error.
    if (set.size() == 0) set = read_molecules(path, lingo, read, stats);
  });
  if (stats) *stats = total;
  return set;
}

std::vector<Hit> neighbors_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& db,
                                        float threshold, const ComputeOptions& options, RunInfo* info) {
  if (!(threshold >= 0.0f && threshold <= 1.0f))
    throw InputError("--threshold", 0, fmt::format("threshold must be in [0, 1], got {}", threshold));
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
    // The size bound of the single-process run: similarity <= min(|A|,|B|) / max(|A|,|B|)
    // (magnitudes for tanimoto, distinct Lingos for set and vidal), with the same 1e-6 relative
    // margin for fp32 rounding, so no pair at or above T is skipped. Rows go by increasing size
    // in chunks; each chunk is computed as a dense block against only the columns (j >= begin)
    // whose size its rows can reach. Threshold 0: every pair, no bound.
    auto size_of = [&](std::size_t i) -> double {
      return static_cast<double>(options.metric == Metric::tanimoto ? db.magnitudes[i] : db.distinct(i));
    };
    const double t = static_cast<double>(threshold) * (1.0 - 1e-6);
    std::vector<std::size_t> rows_by_size = iota_range(begin, end), columns_by_size = iota_range(begin, n);
    auto by_size = [&](std::size_t x, std::size_t y) { return size_of(x) < size_of(y); };
    std::stable_sort(rows_by_size.begin(), rows_by_size.end(), by_size);
    std::stable_sort(columns_by_size.begin(), columns_by_size.end(), by_size);
    // Rows per block: at most 512, and a block of at most ~64 M similarities.
    const std::size_t chunk_rows = std::clamp<std::size_t>((std::size_t{64} << 20) / (n - begin), 1, 512);
    std::vector<float> block;
    for (std::size_t c0 = 0; c0 < rows_by_size.size(); c0 += chunk_rows) {
      const std::vector<std::size_t> row_ids(
          rows_by_size.begin() + static_cast<std::ptrdiff_t>(c0),
          rows_by_size.begin() + static_cast<std::ptrdiff_t>(std::min(rows_by_size.size(), c0 + chunk_rows)));
      std::vector<std::size_t> column_ids;
      if (t > 0) {
        const double smin = size_of(row_ids.front()), smax = size_of(row_ids.back());
        if (smax == 0) continue;  // molecules without Lingos reach nothing above 0
        const auto first = std::partition_point(columns_by_size.begin(), columns_by_size.end(),
                                                [&](std::size_t j) { return size_of(j) < t * smin; });
        const auto last = std::partition_point(first, columns_by_size.end(),
                                               [&](std::size_t j) { return t * size_of(j) <= smax; });
        column_ids.assign(first, last);
      } else {
        column_ids = columns_by_size;
      }
      if (column_ids.empty()) continue;
      const MoleculeSet rows = subset(db, row_ids), columns = subset(db, column_ids);
      block.resize(row_ids.size() * column_ids.size());
      RunInfo part;
      similarity_matrix(resources, rows, &columns, block.data(), options, &part);
      local.pairs += part.pairs;
      local.backend = part.backend;
      for (std::size_t r = 0; r < row_ids.size(); ++r)
        for (std::size_t c = 0; c < column_ids.size(); ++c) {
          const float s = block[r * column_ids.size() + c];
          if (column_ids[c] > row_ids[r] && s >= threshold)
            mine.push_back(
                {static_cast<std::uint32_t>(row_ids[r]), static_cast<std::uint32_t>(column_ids[c]), s});
        }
    }
    std::sort(mine.begin(), mine.end(), [](const Hit& x, const Hit& y) {
      return x.query != y.query ? x.query < y.query : x.target < y.target;
    });
  });
  const auto gathered = gather_records<Hit>(comm, mine, 0);
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  if (!comm.is_root()) return {};
  std::vector<Hit> result;
  for (const auto& from_rank : gathered) result.insert(result.end(), from_rank.begin(), from_rank.end());
  return result;
}

Clustering cluster_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& db,
                                float threshold, const ComputeOptions& options, RunInfo* info) {
  const auto pairs = neighbors_across_ranks(comm, resources, db, threshold, options, info);
  if (!comm.is_root()) return {};
  return butina_clusters(db.size(), pairs);
}

void write_similarity_matrix_across_ranks(Communicator& comm, const Resources& resources,
                                          const MoleculeSet& queries, const MoleculeSet* db,
                                          const std::filesystem::path& path, const ComputeOptions& options,
                                          RunInfo* info, OutputType type) {
  const MoleculeSet& columns = db ? *db : queries;
  const std::size_t nq = queries.size(), nd = columns.size();
  // Every row costs the same (the whole database): equal row counts.
  const auto bounds = balanced_ranges(std::vector<std::uint64_t>(nq, 1), comm.size());
  auto rows_of = [&](int r) {
    return bounds[static_cast<std::size_t>(r) + 1] - bounds[static_cast<std::size_t>(r)];
  };
  std::vector<std::uint8_t> mine;
  RunInfo local;
  const double t0 = now_seconds();
  run_step(comm, [&] {
    const std::size_t begin = bounds[static_cast<std::size_t>(comm.rank())], rows = rows_of(comm.rank());
    if (rows == 0 || nd == 0) return;
    const MoleculeSet block_rows = subset(queries, iota_range(begin, begin + rows));
    std::vector<float> block(rows * nd);
    similarity_matrix(resources, block_rows, &columns, block.data(), options, &local);
    mine = similarity_bytes(block, type);
  });
  // Rank 0 writes the header and the blocks in rank order (file order), receiving each rank's
  // block in pieces of at most 256 MiB.
  write_in_rank_order(comm, path, comm.is_root() ? npy_matrix_header(nq, nd, type) : std::string(),
                      std::as_bytes(std::span<const std::uint8_t>(mine)));
  local.seconds = now_seconds() - t0;
  add_info(info, local);
}

}  // namespace molaccel::lingo

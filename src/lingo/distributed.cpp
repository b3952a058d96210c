// LINGO across MPI ranks. search: each rank takes a contiguous slice of the database balanced by
// Lingo count (the work of a column is proportional to it), computes every query's top-k in its
// slice, and rank 0 merges the per-query lists in the one reported order (similarity descending,
// lower database index), two ranks' lists at a time up a binary tree. neighbors: each rank takes a block of
// rows of the upper triangle balanced by pair count and keeps the pairs at or above the threshold; rank 0
// concatenates the blocks in rank order, which is already the (query, target) order. cluster: those pairs,
// then the Butina pass on rank 0. Similarities are bit-identical on every backend, so the merged lists are
// the single-process ones for any number of ranks.
#include <algorithm>
#include <cstring>
#include <functional>
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

std::vector<std::byte> to_bytes(const std::vector<Hit>& hits) {
  const auto view = std::as_bytes(std::span<const Hit>(hits));
  return {view.begin(), view.end()};
}
std::vector<Hit> from_bytes(const std::vector<std::byte>& bytes) {
  std::vector<Hit> hits(bytes.size() / sizeof(Hit));
  if (!hits.empty()) std::memcpy(hits.data(), bytes.data(), hits.size() * sizeof(Hit));
  return hits;
}

// Two lists of per-query blocks (queries ascending, each block best first) -> one, at most k per
// query: the two blocks of each query merged in the reported order, queries in parallel.
std::vector<Hit> merge_top_k(const std::vector<Hit>& a, const std::vector<Hit>& b, std::size_t nq,
                             std::size_t k, int threads) {
  auto starts = [&](const std::vector<Hit>& v) {
    std::vector<std::size_t> s(nq + 1, 0);
    for (const Hit& h : v) {
      if (h.query >= nq) throw Error("merge: a rank sent an unknown query", __FILE__, __LINE__);
      ++s[h.query + 1];
    }
    for (std::size_t q = 0; q < nq; ++q) s[q + 1] += s[q];
    return s;
  };
  const auto sa = starts(a), sb = starts(b);
  std::vector<std::size_t> so(nq + 1, 0);
  for (std::size_t q = 0; q < nq; ++q)
    so[q + 1] = so[q] + std::min(k, (sa[q + 1] - sa[q]) + (sb[q + 1] - sb[q]));
  std::vector<Hit> out(so[nq]);
  parallel_for(nq, threads, 1024, [&](std::size_t begin, std::size_t end) {
    for (std::size_t q = begin; q < end; ++q) {
      std::size_t i = sa[q], j = sb[q];
      for (std::size_t o = so[q]; o < so[q + 1]; ++o) {
        const bool take_a = j == sb[q + 1] || (i < sa[q + 1] && reported_before(a[i], b[j]));
        out[o] = take_a ? a[i++] : b[j++];
      }
    }
  });
  return out;
}

void add_info(RunInfo* info, const RunInfo& local) {
  if (!info) return;
  *info = local;
}

}  // namespace

std::vector<Hit> search_across_ranks(Communicator& comm, const Resources& resources,
                                     const MoleculeSet& queries, const MoleculeSet& db, std::size_t k,
                                     const ComputeOptions& options, RunInfo* info) {
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
  // Up a binary tree: each step merges two neighbouring ranges of ranks' lists per query and
  // keeps the best k, so no rank ever holds more than two lists of Q x k hits.
  const auto merged =
      reduce_to_root(comm, to_bytes(mine), [&](std::vector<std::byte> lower, std::vector<std::byte> upper) {
        return to_bytes(merge_top_k(from_bytes(lower), from_bytes(upper), nq, k, resources.cpu_threads()));
      });
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  if (!comm.is_root()) return {};
  auto result = from_bytes(merged);
  if (result.size() != nq * std::min(k, nd))
    throw Error("merge: ranks returned too few hits", __FILE__, __LINE__);
  return result;
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
  const std::size_t nq = queries.size(), nd = columns.size(), elem = element_bytes(type);
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
  // The blocks travel to rank 0 one rank and one piece (<= 256 MiB) at a time, in file order:
  // every rank knows every block's size, so all take part in the same sequence of gathers.
  constexpr std::size_t kPiece = std::size_t{256} << 20;
  auto pieces_of = [&](int r) { return (rows_of(r) * nd * elem + kPiece - 1) / kPiece; };
  auto send_turns = [&](const std::function<void(std::span<const std::byte>)>& write) {
    for (int r = 1; r < comm.size(); ++r)
      for (std::size_t p = 0; p < pieces_of(r); ++p) {
        std::span<const std::byte> piece;
        if (comm.rank() == r) {
          const std::size_t at = p * kPiece, n = std::min(kPiece, mine.size() - at);
          piece = std::as_bytes(std::span<const std::uint8_t>(mine.data() + at, n));
        }
        const auto received = comm.gather(piece, 0);
        if (write) write(received);
      }
  };
  if (comm.is_root()) {
    write_file_atomically(path, [&](std::FILE* f) {
      auto put = [&](const void* data, std::size_t bytes) {
        if (bytes && std::fwrite(data, 1, bytes, f) != bytes)
          throw Error("cannot write the matrix file (disk full?)", __FILE__, __LINE__);
      };
      const std::string header = npy_matrix_header(nq, nd, type);
      put(header.data(), header.size());
      put(mine.data(), mine.size());
      send_turns([&](std::span<const std::byte> piece) { put(piece.data(), piece.size()); });
    });
  } else {
    send_turns(nullptr);
  }
  local.seconds = now_seconds() - t0;
  add_info(info, local);
}

}  // namespace molaccel::lingo

// LINGO across MPI ranks, the replicated forms: the whole set on every rank (read by
// read_molecules_across_ranks, distributed_read.cpp), kept for outputs that rank 0 compresses.
// search: each rank searches a range of the database balanced by Lingo count; an all-to-all sends
// each query's lists to the rank owning its block of queries, which merges them in the reported
// order; search_across_ranks gathers the blocks on rank 0. neighbors: each rank computes a range
// of rows of the upper triangle balanced by pair count; the pairs are gathered on rank 0, whose
// Butina pass gives cluster. The results are the single-process ones for any number of ranks.

#include <algorithm>

#include "lingo/distributed_util.hpp"
#include "molaccel/distributed.hpp"
#include "molaccel/lingo.hpp"

namespace molaccel::lingo {
namespace {

using detail::add_info;
using detail::balanced_ranges;
using detail::check_threshold;
using detail::from_bytes;
using detail::iota_range;
using detail::pairs_between;
using detail::reported_before;
using detail::sort_pairs;
using detail::timed_butina;

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

Clustering cluster_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& db,
                                float threshold, const ComputeOptions& options, RunInfo* info) {
  const auto pairs = neighbors_across_ranks(comm, resources, db, threshold, options, info);
  if (!comm.is_root()) return {};
  return timed_butina(db.size(), pairs, info);
}

}  // namespace molaccel::lingo

// LINGO across MPI ranks, the slices forms. Each rank holds only its slice of every input (read by
// read_molecule_slice_across_ranks, distributed_read.cpp). search: the database slices travel a
// ring, each rank searching its own queries against every slice and merging the hits as they come;
// then it fetches its hits' targets' names from the ranks holding them and formats its lines.
// neighbors: the slices travel the ring for N / 2 steps, each block of pairs computed by one of its
// two ranks, the pairs routed to the rank holding their query. cluster: those pairs, the Butina
// pass on rank 0. matrix: each rank's rows against the slices travelling the ring. Outputs land in
// rank order (write_in_rank_order), which is the output order. Similarities are bit-identical on
// every backend and every merge keeps the one reported order, so the results are the
// single-process ones for any number of ranks.

#include <algorithm>
#include <atomic>
#include <cstring>

#include "lingo/distributed_util.hpp"
#include "lingo/io/rank_slices.hpp"
#include "molaccel/distributed.hpp"
#include "molaccel/lingo.hpp"

namespace molaccel::lingo {
namespace {

using detail::add_info;
using detail::check_threshold;
using detail::from_bytes;
using detail::pack;
using detail::pairs_between;
using detail::put;
using detail::reported_before;
using detail::sort_pairs;
using detail::timed_butina;
using detail::unpack_into;
using detail::Unpacker;

// `bytes` to rank r - 1 (cyclically), those of rank r + 1 returned: one step of the ring. Every
// message travels in pieces of at most 256 MiB (MPI counts are int), all ranks taking part in the
// same number of all-to-alls.
std::vector<std::byte> shift_down(Communicator& comm, std::span<const std::byte> bytes, RunInfo& info) {
  constexpr std::uint64_t kPiece = std::uint64_t{256} << 20;
  const int to = (comm.rank() + comm.size() - 1) % comm.size();
  const std::uint64_t my_size = bytes.size();
  std::uint64_t rounds = 0;
  for (const auto& size : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_size, 1)))
    rounds = std::max(rounds, (size.at(0) + kPiece - 1) / kPiece);
  std::vector<std::byte> out;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    const std::uint64_t at = std::min(my_size, round * kPiece), n = std::min(kPiece, my_size - at);
    std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
    counts[static_cast<std::size_t>(to)] = static_cast<std::size_t>(n);
    const auto got =
        comm.alltoall(bytes.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n)), counts);
    out.insert(out.end(), got.begin(), got.end());
  }
  if (to != comm.rank()) {
    info.merge_bytes_sent += my_size;
    info.merge_bytes_received += out.size();
  }
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
// all-to-all of the wanted indices (each once, ascending, per rank), then one of the names. Linear
// in the hits and the database: one slot per database molecule (4 bytes each) marks the wanted
// targets, then holds each one's place among the names received.
void fetch_target_names(Communicator& comm, const MoleculeSlice& db, HitBlock& block, int threads,
                        RunInfo& info) {
  const std::uint64_t my_first = db.first;
  std::vector<std::uint64_t> firsts;  // rank r's slice: [firsts[r], firsts[r + 1])
  for (const auto& f : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_first, 1)))
    firsts.push_back(f.at(0));
  firsts.push_back(db.total);
  const std::size_t ranks = firsts.size() - 1, rank = static_cast<std::size_t>(comm.rank());
  constexpr std::uint32_t kUnwanted = ~std::uint32_t{0}, kWanted = kUnwanted - 1;
  std::vector<std::uint32_t> slot, requests;
  std::vector<std::size_t> request_counts(ranks);
  run_step(comm, [&] {
    slot.assign(db.total, kUnwanted);
    // Every thread marks its hits' targets (the same value from any thread: relaxed atomic stores).
    std::atomic<bool> outside{false};
    parallel_for(block.hits.size(), threads, 1 << 16, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const std::uint32_t t = block.hits[i].target;
        if (t >= db.total)
          outside.store(true, std::memory_order_relaxed);
        else
          std::atomic_ref<std::uint32_t>(slot[t]).store(kWanted, std::memory_order_relaxed);
      }
    });
    MOLACCEL_EXPECTS(!outside.load(), "a hit's target is outside the database");
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::size_t before = requests.size();
      for (std::uint64_t t = firsts[r]; t < firsts[r + 1]; ++t)
        if (slot[t] == kWanted) requests.push_back(static_cast<std::uint32_t>(t));
      request_counts[r] = (requests.size() - before) * sizeof(std::uint32_t);
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
    // The names arrive in the order asked: rank by rank, ascending within each.
    Unpacker in(names);
    block.target_names.reserve(block.target_names.size() + requests.size());
    for (const std::uint32_t t : requests) {
      std::uint32_t length = 0;
      in.take(&length, 1);
      std::string name(length, '\0');
      in.take(name.data(), name.size());
      slot[t] = static_cast<std::uint32_t>(block.target_names.size());
      block.target_names.push_back(std::move(name));
    }
    block.target_name_of.resize(block.hits.size());
    parallel_for(block.hits.size(), threads, 1 << 16, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) block.target_name_of[i] = slot[block.hits[i].target];
    });
  });
  info.merge_bytes_sent +=
      requests.size() * sizeof(std::uint32_t) - request_counts[rank] + answer.size() - answer_counts[rank];
  info.merge_bytes_received += asked.size() - asked_counts[rank] + names.size() - name_counts[rank];
}

}  // namespace

HitBlock search_slices_across_ranks(Communicator& comm, const Resources& resources,
                                    const MoleculeSlice& queries, const MoleculeSlice& db, std::size_t k,
                                    const ComputeOptions& options, bool target_names, RunInfo* info) {
  if (k == 0) throw InputError("-k", 0, "k must be at least 1");
  RunInfo local;
  double exchange_seconds = 0;
  const double t0 = now_seconds();
  const int ranks = comm.size();
  // The ring: the database slices travel, the queries stay home. In step s rank r holds the slice
  // that rank r + s read and searches its own queries against it, merging the hits into its
  // queries' best k; then the slice (encodings only, no names) passes to rank r - 1. After N steps
  // every rank has its queries' top k against the whole database. No hit crosses the network: the
  // slices' encodings are all that travels.
  const MoleculeSet* visiting = &db.set;
  MoleculeSet travelling;  // a slice received from rank r + 1 (without names)
  std::uint64_t visiting_first = db.first, per_query = 0;
  std::vector<Hit> best;  // this rank's queries: hits per query, best first
  for (int step = 0; step < ranks; ++step) {
    if (step > 0) {
      const double shift_started = now_seconds();
      shift_slice_down(comm, visiting, visiting_first, travelling, db.set, local);
      exchange_seconds += now_seconds() - shift_started;
    }
    std::vector<Hit> mine;
    std::uint64_t per_mine = 0;
    run_step(comm, [&] {
      if (queries.set.size() == 0 || visiting->size() == 0) return;
      RunInfo part;
      mine = search(resources, queries.set, *visiting, k, options, &part);
      per_mine = std::min(k, visiting->size());
      if (mine.size() != queries.set.size() * per_mine)
        throw Error("search across ranks: a slice returned too few hits", __FILE__, __LINE__);
      for (Hit& h : mine) {
        h.query += static_cast<std::uint32_t>(queries.first);
        h.target += static_cast<std::uint32_t>(visiting_first);
      }
      local.pairs += part.pairs;
      local.pairs_skipped += part.pairs_skipped;
      local.prepare_seconds += part.prepare_seconds;
      local.job.seconds += part.job.seconds;
      local.job.tiles += part.job.tiles;
      local.job.retries += part.job.retries;
      local.backend = part.backend;
    });
    const double merge_started = now_seconds();
    if (per_query == 0) {
      best = std::move(mine);  // nothing to merge yet
    } else if (per_mine > 0) {
      best = merge_two(best, per_query, mine, per_mine, queries.set.size(), k, resources.cpu_threads());
    }
    per_query = std::min<std::uint64_t>(k, per_query + per_mine);
    exchange_seconds += now_seconds() - merge_started;
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
    fetch_target_names(comm, db, out, resources.cpu_threads(), local);
    exchange_seconds += now_seconds() - names_started;
  }
  local.merge_seconds = exchange_seconds;
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  return out;
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
  if (target_names) fetch_target_names(comm, db, out, resources.cpu_threads(), local);
  exchange_seconds += now_seconds() - route_started;
  local.merge_seconds = exchange_seconds;
  local.seconds = now_seconds() - t0;
  add_info(info, local);
  return out;
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
    const Clustering c = timed_butina(db.total, pairs, info);
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

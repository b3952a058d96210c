// A search across MPI ranks: each rank scores its shard (no traceback), the per-query top-k records
// are merged in hit_before's order pairwise up a binary tree to rank 0, every rank learns the winners, each
// winner is traced back on the rank that owns its subject, and rank 0 receives the finished rows and the
// subjects' ids. Statistics come from the whole database's size, which every shard carries, so
// the result is the single-process one for any number of ranks.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "align/kernels.hpp"
#include "molaccel/align.hpp"
#include "molaccel/distributed.hpp"

namespace molaccel::align {
namespace {

// One per-query candidate (fixed size: gathered and broadcast as raw records).
struct TopRecord {
  std::uint32_t query = 0;
  std::uint32_t subject = 0;  // position in the database FASTA
  std::int32_t score = 0;
  std::uint32_t owner = 0;  // the rank whose shard holds the subject
};
// A finished row from the owner's traceback.
struct RowRecord {
  std::int32_t score = 0;
  std::uint32_t query_start = 0, query_end = 0, subject_start = 0, subject_end = 0;
  std::uint32_t identities = 0, length = 0;
};

std::vector<std::byte> to_bytes(const std::vector<TopRecord>& records) {
  const auto view = std::as_bytes(std::span<const TopRecord>(records));
  return {view.begin(), view.end()};
}
std::vector<TopRecord> from_bytes(const std::vector<std::byte>& bytes) {
  std::vector<TopRecord> records(bytes.size() / sizeof(TopRecord));
  if (!records.empty()) std::memcpy(records.data(), bytes.data(), records.size() * sizeof(TopRecord));
  return records;
}

bool record_before(const TopRecord& a, const TopRecord& b) {
  return a.score != b.score ? a.score > b.score : a.subject < b.subject;  // hit_before's order
}

// Two lists of per-query blocks (queries ascending, each block best first) -> one with at most k
// per query, each query's two blocks merged in hit_before's order.
std::vector<TopRecord> merge_per_query(const std::vector<TopRecord>& a, const std::vector<TopRecord>& b,
                                       std::size_t queries, std::size_t k) {
  std::vector<TopRecord> out;
  out.reserve(std::min(a.size() + b.size(), queries * k));
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const std::uint32_t q =
        j == b.size() || (i < a.size() && a[i].query <= b[j].query) ? a[i].query : b[j].query;
    if (q >= queries) throw Error("merge: a rank sent an unknown query", __FILE__, __LINE__);
    std::size_t ie = i, je = j;
    while (ie < a.size() && a[ie].query == q) ++ie;
    while (je < b.size() && b[je].query == q) ++je;
    for (std::size_t kept = 0; kept < k && (i < ie || j < je); ++kept)
      out.push_back(j == je || (i < ie && record_before(a[i], b[j])) ? a[i++] : b[j++]);
    i = ie;
    j = je;
  }
  return out;
}

}  // namespace

DistributedSearchResult search_across_ranks(Communicator& comm, const Resources& resources,
                                            const SequenceSet& queries, const Database& shard,
                                            const SearchOptions& options) {
  DistributedSearchResult out;
  const int rank = comm.rank();
  SearchOptions local_options = options;
  local_options.traceback = false;  // only the merged winners are traced back
  SearchResult local;
  run_step(comm, [&] { local = search(resources, queries, shard, local_options); });

  const double merge_started = now_seconds();
  std::vector<TopRecord> mine;
  for (const auto& list : local.hits)
    for (const auto& hit : list)
      mine.push_back({hit.query, hit.subject, hit.score, static_cast<std::uint32_t>(rank)});
  out.merge.bytes_sent += comm.is_root() ? 0 : mine.size() * sizeof(TopRecord);

  // Up a binary tree (reduce_to_root): each step merges two neighbouring ranges of ranks' lists per
  // query, keeping k, so rank 0 ends with the winners in query order, best first, and no rank
  // holds more than two lists of Q x k records.
  const auto k = static_cast<std::size_t>(options.top_k);
  std::uint64_t received = 0;
  std::vector<std::byte> winners_bytes =
      reduce_to_root(comm, to_bytes(mine), [&](std::vector<std::byte> lower, std::vector<std::byte> upper) {
        received += upper.size();
        return to_bytes(merge_per_query(from_bytes(lower), from_bytes(upper), queries.size(), k));
      });
  out.merge.bytes_received += received;
  comm.broadcast(winners_bytes, 0);
  std::vector<TopRecord> winners(winners_bytes.size() / sizeof(TopRecord));
  if (!winners.empty()) std::memcpy(winners.data(), winners_bytes.data(), winners_bytes.size());
  if (!comm.is_root())
    out.merge.bytes_received += winners_bytes.size();
  else
    out.merge.bytes_sent += winners_bytes.size() * static_cast<std::size_t>(comm.size() - 1);
  double merge_seconds = now_seconds() - merge_started;

  // The owners trace their winners back (in the merged order) and name their subjects.
  std::vector<RowRecord> rows;
  std::vector<std::string> ids;
  const double traceback_started = now_seconds();
  run_step(comm, [&] {
    std::vector<std::size_t> owned;
    for (std::size_t w = 0; w < winners.size(); ++w)
      if (winners[w].owner == static_cast<std::uint32_t>(rank)) owned.push_back(w);
    rows.resize(owned.size());
    ids.resize(owned.size());
    std::vector<std::uint32_t> sorted_of_original;
    if (options.traceback && !owned.empty()) {
      sorted_of_original.assign(shard.total_sequences(), 0);
      for (std::size_t i = 0; i < shard.size(); ++i)
        sorted_of_original[shard.original_index(i)] = static_cast<std::uint32_t>(i);
    }
    parallel_for(owned.size(), resources.cpu_threads(), 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        const TopRecord& w = winners[owned[i]];
        if (w.query >= queries.size() || w.subject >= shard.total_sequences())
          throw Error("merge: a winner out of range", __FILE__, __LINE__);
        ids[i] = shard.id_of_original(w.subject);
        RowRecord& row = rows[i];
        row.score = w.score;
        if (!options.traceback) continue;
        const Alignment a = align_pair(queries.sequence(w.query),
                                       shard.sequence(sorted_of_original[w.subject]), options.scoring);
        if (a.score != w.score)
          throw Error(fmt::format("traceback score {} differs from search score {} (query {}, subject {})",
                                  a.score, w.score, queries.ids[w.query], ids[i]));
        row = {a.score, a.query_start, a.query_end, a.subject_start, a.subject_end, a.identities, a.length};
      }
    });
  });
  out.merge.traceback_seconds = now_seconds() - traceback_started;

  const double rows_started = now_seconds();
  const auto all_rows = gather_records<RowRecord>(comm, rows, 0);
  const auto all_ids = gather_strings(comm, ids, 0);
  const std::vector<double> my_seconds{local.stats.seconds};
  const auto scoring_seconds = gather_records<double>(comm, my_seconds, 0);
  out.merge.bytes_sent += rows.size() * sizeof(RowRecord);
  for (const auto& id : ids) out.merge.bytes_sent += id.size() + sizeof(std::uint64_t);

  out.result.stats = local.stats;
  out.result.statistics = local.statistics;
  if (comm.is_root()) {
    out.result.hits.assign(queries.size(), {});
    out.subject_ids.assign(queries.size(), {});
    std::vector<std::size_t> next(static_cast<std::size_t>(comm.size()), 0);
    for (std::size_t r = 0; r < all_rows.size(); ++r) {
      out.merge.bytes_received += all_rows[r].size() * sizeof(RowRecord);
      if (all_rows[r].size() != all_ids[r].size())
        throw Error("merge: a rank sent rows and ids that do not match", __FILE__, __LINE__);
    }
    for (const TopRecord& w : winners) {
      if (w.owner >= all_rows.size() || next[w.owner] >= all_rows[w.owner].size())
        throw Error("merge: a rank sent too few rows", __FILE__, __LINE__);
      auto& cursor = next[w.owner];
      const RowRecord& row = all_rows[w.owner][cursor];
      Hit hit;
      hit.query = w.query;
      hit.subject = w.subject;
      hit.score = w.score;
      if (options.traceback) {
        hit.alignment.score = row.score;
        hit.alignment.query_start = row.query_start;
        hit.alignment.query_end = row.query_end;
        hit.alignment.subject_start = row.subject_start;
        hit.alignment.subject_end = row.subject_end;
        hit.alignment.identities = row.identities;
        hit.alignment.length = row.length;
      }
      if (out.result.statistics) {
        hit.bitscore = bit_score(*out.result.statistics, hit.score);
        hit.evalue = e_value(*out.result.statistics, hit.score, queries.sequence(hit.query).size(),
                             shard.total_residues(), shard.total_sequences());
      } else {
        hit.bitscore = hit.evalue = std::nan("");
      }
      out.result.hits[w.query].push_back(hit);
      out.subject_ids[w.query].push_back(all_ids[w.owner][cursor]);
      ++cursor;
    }
    out.scoring_seconds_by_rank.clear();
    for (const auto& s : scoring_seconds) out.scoring_seconds_by_rank.push_back(s.empty() ? 0.0 : s[0]);
  }
  merge_seconds += now_seconds() - rows_started;
  out.merge.seconds = merge_seconds;
  return out;
}

void write_hits_tsv(const std::filesystem::path& path, const SequenceSet& queries,
                    const DistributedSearchResult& merged) {
  detail::write_hits_tsv(
      path, queries, merged.result,
      [&](std::size_t q, std::size_t r) -> const std::string& { return merged.subject_ids[q][r]; });
}

}  // namespace molaccel::align

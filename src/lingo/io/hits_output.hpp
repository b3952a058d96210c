// Hit files of search and neighbours, by the file's name: .npy (a structured array of query,
// target, similarity: lg::Hit's bytes), .gz / .zst (gzip / Zstandard TSV) or TSV (query, target,
// similarity, rank). TSV is formatted on every core in blocks of kHitsPerBlock hits, written in
// order (a top-100 of 367k queries is 36.7 M lines: one thread would take longer than the GPU).
// StreamedHits writes a search's hits while it runs, the same bytes as write_hits afterwards.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::detail {

constexpr const char* kHitsHeader = "query\ttarget\tsimilarity\trank\n";
constexpr std::size_t kHitsPerBlock = 1 << 15;  // hits per formatted block

// The .npy header of `count` hits.
std::string hits_npy_header(std::size_t count);

// TSV lines of hits [begin, end) of `hits`, whose first hit is hit `first` of the whole result (the
// rank column counts within each query's `per_query` hits; 0: no ranks, the column is 0);
// query_name(i) and target_name(i): the names of hit i's molecules (across MPI ranks a rank holds
// only its slice of them).
template <class QueryName, class TargetName>
void format_hits(std::string& text, std::span<const Hit> hits, std::size_t first, std::size_t begin,
                 std::size_t end, std::size_t per_query, const QueryName& query_name,
                 const TargetName& target_name) {
  for (std::size_t i = begin; i < end; ++i)
    fmt::format_to(std::back_inserter(text), "{}\t{}\t{}\t{}\n", query_name(i), target_name(i),
                   hits[i].similarity, per_query ? (first + i) % per_query + 1 : 0);
}
// The same, with the names of `queries` and `db`.
void format_hits(std::string& text, const MoleculeSet& queries, const MoleculeSet& db,
                 std::span<const Hit> hits, std::size_t first, std::size_t begin, std::size_t end,
                 std::size_t per_query);

// The whole result to `path` (atomically); `threads` format TSV (<= 0: every core).
void write_hits(const std::string& path, const MoleculeSet& queries, const MoleculeSet& db,
                std::span<const Hit> hits, std::size_t per_query, int threads);

// A search's hits to `path` while the search runs: ready() (the search's HitsReady) marks queries
// final; a writer thread writes (.npy), or formats on `threads` cores and writes (TSV, .gz, .zst),
// every whole block whose queries and all queries before them are final. The blocks are
// write_hits' blocks, so the file holds the same bytes. finish() after the search completes the
// file; abort() (or the destructor without finish) removes the partial one.
class StreamedHits {
 public:
  StreamedHits(std::string path, const MoleculeSet& queries, const MoleculeSet& db, std::size_t per_query,
               int threads);
  ~StreamedHits();
  StreamedHits(const StreamedHits&) = delete;
  StreamedHits& operator=(const StreamedHits&) = delete;

  // Queries [first_query, first_query + hits.size() / per_query) are final; `hits` lies in the
  // search's result, which stays in place until finish(). Throws (stopping the search) once the
  // writer has failed.
  void ready(std::size_t first_query, std::span<const Hit> hits);
  // Waits for the writer (every query must be final) and rethrows its error.
  void finish();
  // Stops the writer and removes the partial file; rethrows the writer's own error if it failed.
  void abort();
  // Seconds the writer spent writing (its own time, overlapping the search).
  double write_seconds() const { return busy_seconds_; }

 private:
  void run();
  void stop(bool abort);

  std::string path_;
  const MoleculeSet& queries_;
  const MoleculeSet& db_;
  std::size_t per_query_;
  int threads_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::size_t, std::size_t> arrived_;  // first query -> end, beyond the final prefix
  std::size_t final_queries_ = 0;               // queries [0, final_queries_) are final
  const Hit* result_ = nullptr;                 // hit 0 of the search's result
  bool aborted_ = false, failed_ = false;
  std::exception_ptr error_;
  double busy_seconds_ = 0;
  std::thread thread_;
};

}  // namespace molaccel::lingo::detail

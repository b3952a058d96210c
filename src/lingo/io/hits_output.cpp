#include "lingo/io/hits_output.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <iterator>

#include "runtime/parallel_writer.hpp"

namespace molaccel::lingo::detail {
namespace {

// The writer thread's way out of write_file_atomically when the search failed (not an error).
struct Stopped {};

// Blocks [block_begin, block_end) of the TSV of `hits` (the header opens block 0).
void write_tsv_blocks(std::FILE* f, const std::string& path, const MoleculeSet& queries,
                      const MoleculeSet& db, std::span<const Hit> hits, std::size_t per_query, int threads,
                      std::size_t block_begin, std::size_t block_end) {
  molaccel::io::write_blocks_in_order(
      f, path, block_end - block_begin, threads,
      [&](std::size_t b, std::string& text) {
        const std::size_t block = block_begin + b;
        if (block == 0) text = kHitsHeader;
        const std::size_t begin = block * kHitsPerBlock;
        format_hits(text, queries, db, hits, 0, begin, std::min(hits.size(), begin + kHitsPerBlock),
                    per_query);
      },
      molaccel::io::compression_for(path));
}

void write_or_fail(std::FILE* f, const std::string& path, const void* data, std::size_t size,
                   std::size_t count) {
  if (count > 0 && std::fwrite(data, size, count, f) != count)
    throw Error(fmt::format("{}: write failed (disk full?)", path), __FILE__, __LINE__);
}

std::size_t tsv_blocks(std::size_t hits) {
  return std::max<std::size_t>(1, (hits + kHitsPerBlock - 1) / kHitsPerBlock);
}

}  // namespace

// A structured array (query, target, similarity) whose records are Hit's bytes, so the hits are
// written as they are in memory.
std::string hits_npy_header(std::size_t count) {
  static_assert(std::endian::native == std::endian::little && sizeof(Hit) == 12 &&
                offsetof(Hit, target) == 4 && offsetof(Hit, similarity) == 8);
  std::string dict = fmt::format(
      "{{'descr': [('query', '<u4'), ('target', '<u4'), ('similarity', '<f4')], 'fortran_order': False, "
      "'shape': ({},), }}",
      count);
  const std::size_t unpadded = 10 + dict.size() + 1;  // magic, version, length, dict, newline
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header("\x93NUMPY\x01\x00", 8);
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

void format_hits(std::string& text, const MoleculeSet& queries, const MoleculeSet& db,
                 std::span<const Hit> hits, std::size_t first, std::size_t begin, std::size_t end,
                 std::size_t per_query) {
  format_hits(
      text, hits, first, begin, end, per_query,
      [&](std::size_t i) -> const std::string& { return queries.names[hits[i].query]; },
      [&](std::size_t i) -> const std::string& { return db.names[hits[i].target]; });
}

void write_hits(const std::string& path, const MoleculeSet& queries, const MoleculeSet& db,
                std::span<const Hit> hits, std::size_t per_query, int threads) {
  write_file_atomically(path, [&](std::FILE* f) {
    if (path.ends_with(".npy")) {
      const std::string header = hits_npy_header(hits.size());
      write_or_fail(f, path, header.data(), 1, header.size());
      write_or_fail(f, path, hits.data(), sizeof(Hit), hits.size());
      return;
    }
    write_tsv_blocks(f, path, queries, db, hits, per_query, threads, 0, tsv_blocks(hits.size()));
  });
}

StreamedHits::StreamedHits(std::string path, const MoleculeSet& queries, const MoleculeSet& db,
                           std::size_t per_query, int threads)
    : path_(std::move(path)), queries_(queries), db_(db), per_query_(per_query), threads_(threads) {
  MOLACCEL_EXPECTS(per_query_ > 0, "a search keeps at least one hit per query");
  molaccel::io::compression_for(path_);  // .zst without libzstd: fails here, not in the thread
  thread_ = std::thread([this] { run(); });
}

StreamedHits::~StreamedHits() {
  if (thread_.joinable()) stop(true);
}

void StreamedHits::ready(std::size_t first_query, std::span<const Hit> hits) {
  {
    std::lock_guard lock(mutex_);
    if (failed_) throw Error(fmt::format("{}: writing the hits failed", path_), __FILE__, __LINE__);
    if (!result_) result_ = hits.data() - first_query * per_query_;
    arrived_[first_query] = first_query + hits.size() / per_query_;
    while (!arrived_.empty() && arrived_.begin()->first == final_queries_) {
      final_queries_ = arrived_.begin()->second;
      arrived_.erase(arrived_.begin());
    }
  }
  changed_.notify_all();
}

void StreamedHits::run() {
  const std::size_t nq = queries_.size(), total = nq * per_query_;
  const bool npy = path_.ends_with(".npy");
  try {
    write_file_atomically(path_, [&](std::FILE* f) {
      if (npy) {
        const std::string header = hits_npy_header(total);
        write_or_fail(f, path_, header.data(), 1, header.size());
      }
      std::size_t done = 0;                                           // .npy: queries; TSV: blocks
      std::size_t seen = nq == 0 ? std::size_t(-1) : std::size_t(0);  // final queries last handled
      for (;;) {
        std::size_t final_queries = 0;
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] { return aborted_ || final_queries_ != seen; });
          if (aborted_) throw Stopped{};
          seen = final_queries = final_queries_;
        }
        const double t0 = now_seconds();
        if (npy) {
          write_or_fail(f, path_, result_ + done * per_query_, sizeof(Hit),
                        (final_queries - done) * per_query_);
          done = final_queries;
        } else {
          // Whole blocks only (the last one once every query is final): write_hits' blocks.
          const std::size_t end =
              final_queries == nq ? tsv_blocks(total) : final_queries * per_query_ / kHitsPerBlock;
          if (end > done)
            write_tsv_blocks(f, path_, queries_, db_, std::span<const Hit>(result_, total), per_query_,
                             threads_, done, end);
          done = std::max(done, end);
        }
        busy_seconds_ += now_seconds() - t0;
        if (final_queries == nq) break;
      }
    });
  } catch (const Stopped&) {
  } catch (...) {
    std::lock_guard lock(mutex_);
    failed_ = true;
    error_ = std::current_exception();
  }
}

void StreamedHits::stop(bool abort) {
  if (abort) {
    std::lock_guard lock(mutex_);
    aborted_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void StreamedHits::finish() {
  {
    std::lock_guard lock(mutex_);
    if (!failed_ && final_queries_ != queries_.size()) {
      aborted_ = true;
      changed_.notify_all();
    }
  }
  stop(false);
  if (error_) std::rethrow_exception(error_);
  if (aborted_)
    throw Error(fmt::format("{}: the search ended before every query's hits", path_), __FILE__, __LINE__);
}

void StreamedHits::abort() {
  stop(true);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace molaccel::lingo::detail

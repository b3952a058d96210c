// Ordered, parallel block writer: threads format (and compress) blocks; whichever thread finds the
// next block in order ready writes it, so formatting never waits for the disk and vice versa.
#include "runtime/parallel_writer.hpp"

#include <zlib.h>
#ifdef MOLACCEL_HAVE_ZSTD
#include <zstd.h>
#endif

#include <condition_variable>
#include <mutex>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::io {

Compression compression_for(const std::filesystem::path& path) {
  if (path.extension() == ".gz") return Compression::gzip;
  if (path.extension() != ".zst") return Compression::none;
#ifndef MOLACCEL_HAVE_ZSTD
  throw NotCompiled(
      fmt::format("Zstandard output ({}): this build has no libzstd (libzstd-dev); use .gz", path.string()),
      __FILE__, __LINE__);
#else
  return Compression::zstd;
#endif
}

namespace {

// One gzip member holding `text`. Level 1: deflate's fastest, so that compressing on every core
// keeps up with formatting (text from the engines compresses well at any level).
std::string gzip_member(const std::string& text, const std::string& display) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error(fmt::format("{}: cannot start gzip compression", display), __FILE__, __LINE__);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (status != Z_STREAM_END)
    throw Error(fmt::format("{}: gzip compression failed", display), __FILE__, __LINE__);
  return out;
}

// One Zstandard frame holding `text`, at level 1 for the same reason as gzip's level 1.
std::string zstd_frame(const std::string& text, const std::string& display) {
#ifdef MOLACCEL_HAVE_ZSTD
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const std::size_t size = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 1);
  if (ZSTD_isError(size))
    throw Error(fmt::format("{}: Zstandard compression failed: {}", display, ZSTD_getErrorName(size)),
                __FILE__, __LINE__);
  out.resize(size);
  return out;
#else
  (void)text;
  throw NotCompiled(fmt::format("Zstandard output ({}): this build has no libzstd", display), __FILE__,
                    __LINE__);
#endif
}

}  // namespace

void write_blocks_in_order(std::FILE* f, const std::string& display, std::size_t n_blocks, int threads,
                           const std::function<void(std::size_t block, std::string& text)>& format,
                           Compression compression) {
  const std::size_t thread_count =
      threads > 0 ? static_cast<std::size_t>(threads) : static_cast<std::size_t>(cpu_info().logical_cores);
  const std::size_t window = 4 * std::max<std::size_t>(1, thread_count);  // blocks in memory at most
  std::mutex mutex;
  std::condition_variable slot_freed;
  std::vector<std::string> slots(window);
  std::vector<bool> ready(window, false);
  std::size_t written = 0;
  bool writing = false, failed = false;
  ProgressBar bar("write " + std::filesystem::path(display).filename().string(), n_blocks, "blocks");

  auto write_ready_blocks = [&] {  // called by the thread that holds the writer role
    for (;;) {
      std::string text;
      {
        std::lock_guard lock(mutex);
        if (failed || written == n_blocks || !ready[written % window]) {
          writing = false;
          return;
        }
        text = std::move(slots[written % window]);
        ready[written % window] = false;
      }
      if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f) != text.size())
        throw Error(fmt::format("{}: write failed (disk full?)", display), __FILE__, __LINE__);
      std::lock_guard lock(mutex);
      ++written;
      bar.set(written);
      slot_freed.notify_all();
    }
  };
  parallel_for(n_blocks, static_cast<int>(thread_count), 1, [&](std::size_t begin, std::size_t end) {
    try {
      for (std::size_t block = begin; block < end; ++block) {
        {
          std::unique_lock lock(mutex);
          slot_freed.wait(lock, [&] { return failed || block < written + window; });
          if (failed) return;
        }
        std::string text;
        format(block, text);
        if (compression == Compression::gzip) text = gzip_member(text, display);
        if (compression == Compression::zstd) text = zstd_frame(text, display);
        {
          std::lock_guard lock(mutex);
          slots[block % window] = std::move(text);
          ready[block % window] = true;
          if (writing) continue;
          writing = true;
        }
        write_ready_blocks();
      }
    } catch (...) {
      std::lock_guard lock(mutex);
      failed = true;
      writing = false;
      slot_freed.notify_all();
      throw;
    }
  });
}

}  // namespace molaccel::io

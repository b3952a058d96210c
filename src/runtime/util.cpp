// Small shared utilities: atomic file writes, hashing, clocks.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "molaccel/runtime.hpp"
#include "runtime/device_hooks.hpp"

namespace molaccel {

namespace {
std::string temporary_name_for(const std::filesystem::path& path) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())};
  return fmt::format(".{}.tmp.{}.{:016x}", path.filename().string(), ::getpid(), rng());
}
}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::FILE*)>& write) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const auto tmp = dir / temporary_name_for(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw InputError(path.string(), 0, fmt::format("cannot create output file: {}", std::strerror(errno)),
                     __FILE__, __LINE__);
  try {
    write(f);
    if (std::fflush(f) != 0 || std::ferror(f))
      throw InputError(path.string(), 0, fmt::format("write failed: {}", std::strerror(errno)), __FILE__,
                       __LINE__);
  } catch (...) {
    std::fclose(f);
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  if (std::fclose(f) != 0) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw InputError(path.string(), 0, fmt::format("write failed: {}", std::strerror(errno)), __FILE__,
                     __LINE__);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw InputError(path.string(), 0,
                     fmt::format("cannot rename temporary output into place: {}", ec.message()), __FILE__,
                     __LINE__);
  }
}

namespace {
inline std::uint64_t rotl(std::uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
inline std::uint64_t finalize(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}
}  // namespace

// Word-at-a-time multiply/rotate hash with a strong finaliser: fast and well mixed; used for
// cache keys and entry checksums (corruption detection, not security).
std::uint64_t hash64(std::string_view data, std::uint64_t seed) {
  constexpr std::uint64_t k1 = 0x9e3779b97f4a7c15ULL, k2 = 0xbf58476d1ce4e5b9ULL, k3 = 0x94d049bb133111ebULL;
  std::uint64_t h = seed ^ (data.size() * k1);
  const char* p = data.data();
  std::size_t n = data.size();
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h ^= finalize(w * k2);
    h = rotl(h, 29) * k3 + k1;
    p += 8;
    n -= 8;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  h ^= finalize((tail ^ (static_cast<std::uint64_t>(n) << 56)) * k2);
  return finalize(h);
}

std::string hash_hex(std::string_view data) {
  return fmt::format("{:016x}{:016x}", hash64(data, 0x6d6f6c6163636531ULL),
                     hash64(data, 0x2545f4914f6cdd1dULL));
}

bool stderr_is_terminal() {
  return ::isatty(STDERR_FILENO) == 1;
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

HostBuffer allocate_host_buffer(std::size_t bytes) {
  HostBuffer buffer;
  buffer.bytes = bytes;
  if (bytes == 0) return buffer;
  if (void* p = detail::allocate_page_locked(bytes)) {
    buffer.data = std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                             [](std::byte* q) { detail::free_page_locked(q); });
    buffer.page_locked = true;
  } else {
    buffer.data = std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }
  return buffer;
}

}  // namespace molaccel

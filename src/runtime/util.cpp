// Small shared utilities: atomic file writes, hashing, clocks.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "molaccel/runtime.hpp"
#include "runtime/device_hooks.hpp"
#include "runtime/secure_file.hpp"

namespace molaccel {

namespace detail {

std::string temporary_name_for(const std::filesystem::path& target) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())};
  std::string name = target.filename().string();
  if (name.size() > 200) name.resize(200);  // ".NAME.tmp.PID.RANDOM" must fit NAME_MAX (255)
  return fmt::format(".{}.tmp.{}.{:016x}", name, ::getpid(), rng());
}

mode_t current_umask() {
  if (std::FILE* f = std::fopen("/proc/self/status", "re")) {
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "Umask: %o", &mask) == 1) {
        found = true;
        break;
      }
    std::fclose(f);
    if (found) return static_cast<mode_t>(mask);
  }
  const mode_t mask = ::umask(022);  // kernels before 4.7: read it by setting it (briefly)
  ::umask(mask);
  return mask;
}

int create_exclusively(const std::filesystem::path& path, mode_t mode) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
}

TemporaryFile create_temporary_file(const std::filesystem::path& dir,
                                    const std::function<std::string()>& next_name,
                                    const std::string& display) {
  int err = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    TemporaryFile t;
    t.path = dir / next_name();
    t.fd = create_exclusively(t.path, 0600);
    if (t.fd >= 0) return t;
    err = errno;
    if (err != EEXIST) break;  // a name taken (a file, a planted link): try another
  }
  throw InputError(display, 0, fmt::format("cannot create output file: {}", std::strerror(err)), __FILE__,
                   __LINE__);
}

OutputTarget resolve_output_target(const std::filesystem::path& path) {
  OutputTarget t;
  const std::string s = path.string();
  if (s == "-" || s == "/dev/stdout" || s == "/proc/self/fd/1" || s == "/dev/fd/1") {
    t.kind = OutputTarget::Kind::standard_output;
    t.path = path;
    return t;
  }
  if (s == "/dev/stderr" || s == "/proc/self/fd/2" || s == "/dev/fd/2") {
    t.kind = OutputTarget::Kind::standard_error;
    t.path = path;
    return t;
  }
  if (s.rfind("/dev/fd/", 0) == 0 || s.rfind("/proc/self/fd/", 0) == 0) {
    // An inherited descriptor (e.g. bash's process substitution): its "link" is not a path.
    t.kind = OutputTarget::Kind::write_through;
    t.path = path;
    return t;
  }
  std::filesystem::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {  // nothing there (or unreadable): a new file, errors come later
      t.path = p;
      return t;
    }
    if (S_ISLNK(st.st_mode)) {  // the user's link: replace the file it points to, keep the link
      std::error_code ec;
      const auto to = std::filesystem::read_symlink(p, ec);
      if (ec)
        throw InputError(s, 0, fmt::format("cannot read symbolic link: {}", ec.message()), __FILE__,
                         __LINE__);
      p = to.is_absolute() ? to : (p.has_parent_path() ? p.parent_path() : std::filesystem::path(".")) / to;
      continue;
    }
    t.path = p;
    if (S_ISDIR(st.st_mode))
      throw InputError(s, 0, "cannot write output: it is a directory", __FILE__, __LINE__);
    if (S_ISREG(st.st_mode)) {
      t.st = st;
      return t;
    }
    t.kind = OutputTarget::Kind::write_through;  // device, FIFO, socket
    return t;
  }
  throw InputError(s, 0, "cannot write output: too many levels of symbolic links", __FILE__, __LINE__);
}

StagedFile stage_file(const std::filesystem::path& target, mode_t mode, std::optional<FileOwner> owner,
                      const std::function<void(std::FILE*)>& write, const std::string& display) {
  const auto dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  TemporaryFile tmp = create_temporary_file(
      dir, [&] { return temporary_name_for(target); }, display);
  StagedFile staged{tmp.path, target, display, std::make_unique<CleanupOnSignal>(tmp.path)};
  auto fail = [&](int err, const char* what) {
    ::unlink(tmp.path.c_str());
    throw InputError(display, 0, fmt::format("{}: {}", what, std::strerror(err)), __FILE__, __LINE__);
  };
  std::FILE* f = ::fdopen(tmp.fd, "wb");
  if (!f) {
    const int err = errno;
    ::close(tmp.fd);
    fail(err, "cannot create output file");
  }
  try {
    errno = 0;
    write(f);
    if (std::fflush(f) != 0 || std::ferror(f)) {
      const int err = errno ? errno : EIO;
      throw InputError(display, 0, fmt::format("write failed: {}", std::strerror(err)), __FILE__, __LINE__);
    }
  } catch (...) {
    std::fclose(f);
    ::unlink(tmp.path.c_str());
    throw;
  }
  // Owner first (a chown clears set-id bits), then the final permissions; the rename is commit_staged.
  if (owner && ::fchown(::fileno(f), owner->uid, owner->gid) != 0) {
    // Only root may give a file away: the new file then belongs to this user.
  }
  if (::fchmod(::fileno(f), mode) != 0) {
    const int err = errno;
    std::fclose(f);
    fail(err, "cannot set the output file's permissions");
  }
  if (std::fclose(f) != 0) fail(errno, "write failed");
  return staged;
}

void commit_staged(StagedFile& staged) {
  if (::rename(staged.temporary.c_str(), staged.target.c_str()) != 0) {
    const int err = errno;
    ::unlink(staged.temporary.c_str());
    throw InputError(staged.display, 0,
                     fmt::format("cannot rename temporary output into place: {}", std::strerror(err)),
                     __FILE__, __LINE__);
  }
  staged.cleanup.reset();
}

void replace_file(const std::filesystem::path& target, mode_t mode, std::optional<FileOwner> owner,
                  const std::function<void(std::FILE*)>& write, const std::string& display) {
  StagedFile staged = stage_file(target, mode, owner, write, display);
  commit_staged(staged);
}

namespace {
// Whether `st` (from stat or fstat; `status` its return value) is of the wanted type, owned by this
// user and writable by nobody else; `why` says what is wrong when not.
bool is_private(int status, const struct stat& st, bool want_directory, std::string& why) {
  if (status != 0) {
    why = std::strerror(errno);
    return false;
  }
  if (want_directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    why = want_directory ? "not a directory" : "not a regular file";
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    why = fmt::format("owned by uid {}, not by this user (uid {})", st.st_uid, ::geteuid());
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    why = fmt::format("writable by {} (mode {:04o})", (st.st_mode & S_IWOTH) ? "everyone" : "its group",
                      st.st_mode & 07777);
    return false;
  }
  return true;
}
}  // namespace

bool directory_is_private(const std::filesystem::path& dir, std::string& why) {
  struct stat st {};
  const int status = ::stat(dir.c_str(), &st);
  return is_private(status, st, true, why);
}

bool file_is_private(int fd, std::string& why) {
  struct stat st {};
  const int status = ::fstat(fd, &st);
  return is_private(status, st, false, why);
}

}  // namespace detail

namespace {
// Writes to a stream that is not ours to replace (stdout, a device, a pipe): no temporary file.
void write_through(std::FILE* f, const std::string& display, const std::function<void(std::FILE*)>& write) {
  errno = 0;
  write(f);
  if (std::fflush(f) != 0 || std::ferror(f)) {
    const int err = errno ? errno : EIO;
    std::clearerr(f);
    throw InputError(display, 0, fmt::format("write failed: {}", std::strerror(err)), __FILE__, __LINE__);
  }
}
}  // namespace

struct OutputGroup::Impl {
  std::vector<detail::StagedFile> staged;
  Impl* outer = nullptr;  // the group active before this one on this thread
  bool joined = false;    // made inside another group: that one stages and commits
};

namespace {
thread_local OutputGroup::Impl* active_group = nullptr;

// The group that stages this thread's outputs now (the outermost active one), or null.
OutputGroup::Impl* staging_group() {
  OutputGroup::Impl* g = active_group;
  while (g && g->joined) g = g->outer;
  return g;
}
}  // namespace

OutputGroup::OutputGroup() : impl_(std::make_unique<Impl>()) {
  impl_->outer = active_group;
  impl_->joined = active_group != nullptr;
  active_group = impl_.get();
}

OutputGroup::~OutputGroup() {
  active_group = impl_->outer;
  for (const detail::StagedFile& s : impl_->staged) ::unlink(s.temporary.c_str());
}

void OutputGroup::commit() {
  if (impl_->joined) return;
  active_group = impl_->outer;  // later writes on this thread are on their own again
  std::vector<detail::StagedFile> staged = std::move(impl_->staged);
  impl_->staged.clear();
  for (std::size_t i = 0; i < staged.size(); ++i) {
    try {
      detail::commit_staged(staged[i]);
    } catch (...) {
      for (std::size_t j = i + 1; j < staged.size(); ++j) ::unlink(staged[j].temporary.c_str());
      throw;
    }
  }
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::FILE*)>& write) {
  const std::string display = path.string();
  const detail::OutputTarget target = detail::resolve_output_target(path);
  switch (target.kind) {
    case detail::OutputTarget::Kind::standard_output:
      write_through(stdout, display, write);
      return;
    case detail::OutputTarget::Kind::standard_error:
      write_through(stderr, display, write);
      return;
    case detail::OutputTarget::Kind::write_through: {
      const int fd = ::open(target.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd < 0)
        throw InputError(display, 0, fmt::format("cannot open output: {}", std::strerror(errno)), __FILE__,
                         __LINE__);
      std::FILE* f = ::fdopen(fd, "wb");
      if (!f) {
        const int err = errno;
        ::close(fd);
        throw InputError(display, 0, fmt::format("cannot open output: {}", std::strerror(err)), __FILE__,
                         __LINE__);
      }
      try {
        write_through(f, display, write);
      } catch (...) {
        std::fclose(f);
        throw;
      }
      if (std::fclose(f) != 0)
        throw InputError(display, 0, fmt::format("write failed: {}", std::strerror(errno)), __FILE__,
                         __LINE__);
      return;
    }
    case detail::OutputTarget::Kind::replace:
      break;
  }
  // A regular file keeps its permissions (and, where permitted, its owner); a new one gets the umask's.
  mode_t mode = 0666 & ~detail::current_umask();
  std::optional<detail::FileOwner> owner;
  if (target.st) {
    mode = target.st->st_mode & 07777;
    if (target.st->st_uid != ::geteuid() || target.st->st_gid != ::getegid())
      owner = detail::FileOwner{target.st->st_uid, target.st->st_gid};
  }
  if (OutputGroup::Impl* group = staging_group())
    group->staged.push_back(detail::stage_file(target.path, mode, owner, write, display));
  else
    detail::replace_file(target.path, mode, owner, write, display);
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

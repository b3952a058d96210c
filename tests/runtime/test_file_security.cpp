// Issue 27 and issue 24 item 5: how molaccel creates output files, JIT cache entries and kernel
// dumps (exclusive owner-only temporaries, no following of planted links, the target's mode kept,
// devices, pipes and stdout written through) and which cache entries it trusts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "runtime/jit_cache_format.hpp"
#include "runtime/secure_file.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

namespace fs = std::filesystem;

struct stat lstat_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

mode_t mode_of(const fs::path& p) {
  return lstat_of(p).st_mode & 07777;
}

// Sets the umask for the test's lifetime.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

void write_text(const fs::path& p, const std::string& text) {
  write_file_atomically(p, [&](std::FILE* f) { std::fwrite(text.data(), 1, text.size(), f); });
}

std::size_t entries_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// ---- output files ----------------------------------------------------------------------------

TEST(OutputFiles, NewFileGetsTheUmasksPermissionsAndNoTemporaryRemains) {
  testing::TempDir dir;
  ScopedUmask mask(027);
  EXPECT_EQ(detail::current_umask(), 027u);
  write_text(dir / "out.txt", "new");
  EXPECT_EQ(testing::read_file(dir / "out.txt"), "new");
  EXPECT_TRUE(S_ISREG(lstat_of(dir / "out.txt").st_mode));
  EXPECT_EQ(mode_of(dir / "out.txt"), 0640u);
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(OutputFiles, TemporaryIsCreatedOwnerOnlyBesideTheTarget) {
  testing::TempDir dir;
  ScopedUmask mask(0);  // a new output would be 0666: the temporary must still be 0600
  std::vector<std::pair<fs::path, mode_t>> seen;
  write_file_atomically(dir / "out.txt", [&](std::FILE* f) {
    std::fputs("x", f);
    for (auto& e : fs::directory_iterator(dir.path())) seen.emplace_back(e.path(), mode_of(e.path()));
  });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].second, 0600u) << seen[0].first;
  EXPECT_EQ(seen[0].first.filename().string().rfind(".out.txt.tmp.", 0), 0u) << seen[0].first;
  EXPECT_EQ(mode_of(dir / "out.txt"), 0666u);
}

TEST(OutputFiles, ExistingTargetKeepsItsMode) {
  testing::TempDir dir;
  ScopedUmask mask(022);
  for (mode_t mode : {0640u, 0600u, 0755u, 0664u}) {
    const auto p = dir / fmt::format("out{:o}.txt", mode);
    testing::write_file(p, "old");
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
    write_text(p, "new");
    EXPECT_EQ(testing::read_file(p), "new");
    EXPECT_EQ(mode_of(p), mode) << fmt::format("{:o}", mode);
  }
}

TEST(OutputFiles, SymlinkPlantedAtTheTemporaryNameIsNotFollowed) {
  testing::TempDir dir;
  const auto victim = dir / "victim";       // an existing file a planted link points to
  const auto absent = dir / "not-created";  // a file a dangling planted link points to
  testing::write_file(victim, "precious");
  fs::create_symlink(victim, dir / "planted1");
  fs::create_symlink(absent, dir / "planted2");
  // The lower-level helper writes under the names it is given: the planted ones are skipped.
  const std::vector<std::string> names = {"planted1", "planted2", "fresh"};
  std::size_t next = 0;
  auto tmp = detail::create_temporary_file(
      dir.path(), [&] { return names.at(next++); }, "out");
  ASSERT_GE(tmp.fd, 0);
  EXPECT_EQ(tmp.path, dir / "fresh");
  EXPECT_EQ(::write(tmp.fd, "x", 1), 1);
  ::close(tmp.fd);
  EXPECT_EQ(mode_of(dir / "fresh"), 0600u);
  EXPECT_EQ(testing::read_file(victim), "precious");
  EXPECT_FALSE(fs::exists(absent));
  EXPECT_TRUE(fs::is_symlink(dir / "planted1"));
  // And the primitive itself refuses a dangling link (O_EXCL | O_NOFOLLOW).
  errno = 0;
  EXPECT_EQ(detail::create_exclusively(dir / "planted2"), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_FALSE(fs::exists(absent));
  // Only planted names: a clear error, nothing written anywhere.
  EXPECT_THROW(detail::create_temporary_file(
                   dir.path(), [] { return std::string("planted1"); }, "out"),
               InputError);
  EXPECT_EQ(testing::read_file(victim), "precious");
}

TEST(OutputFiles, DevNullIsWrittenThroughAndStaysADevice) {
  ASSERT_TRUE(S_ISCHR(lstat_of("/dev/null").st_mode));
  const auto before = lstat_of("/dev/null");
  write_text("/dev/null", "discarded");
  const auto after = lstat_of("/dev/null");
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_rdev, before.st_rdev);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(after.st_ino, before.st_ino);
}

TEST(OutputFiles, WriteErrorOnADeviceNamesTheRealError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  try {
    write_text("/dev/full", std::string(1 << 16, 'x'));
    FAIL() << "writing /dev/full succeeded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("Success"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(S_ISCHR(lstat_of("/dev/full").st_mode));
}

TEST(OutputFiles, FifoIsWrittenThroughAndStaysAFifo) {
  testing::TempDir dir;
  const auto fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);  // blocks until the writer opens it
    if (fd < 0) return;
    char buf[256];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) received.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
  });
  write_text(fifo, "through the pipe\n");
  reader.join();
  EXPECT_EQ(received, "through the pipe\n");
  EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode));
  EXPECT_EQ(entries_in(dir.path()), 1u);  // no temporary, no regular file beside it
}

// Runs `body` with standard output redirected into a pipe; returns what it printed.
std::string capture_stdout(const std::function<void()>& body) {
  std::fflush(stdout);
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  const int saved = ::dup(STDOUT_FILENO);
  ::dup2(p[1], STDOUT_FILENO);
  ::close(p[1]);
  try {
    body();
  } catch (...) {
    std::fflush(stdout);
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
    ::close(p[0]);
    throw;
  }
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  return out;
}

// Runs `body` with the working directory set to `dir`.
void in_directory(const fs::path& dir, const std::function<void()>& body) {
  const auto old = fs::current_path();
  fs::current_path(dir);
  try {
    body();
  } catch (...) {
    fs::current_path(old);
    throw;
  }
  fs::current_path(old);
}

TEST(OutputFiles, DashWritesToStandardOutput) {
  testing::TempDir dir;
  std::string out;
  in_directory(dir.path(), [&] { out = capture_stdout([] { write_text("-", "to stdout\n"); }); });
  EXPECT_EQ(out, "to stdout\n");
  EXPECT_EQ(entries_in(dir.path()), 0u);  // no file named "-"
}

TEST(OutputFiles, DevStdoutIsWrittenThroughNotReplaced) {
  const bool was_link = fs::is_symlink("/dev/stdout");
  const std::string out = capture_stdout([] { write_text("/dev/stdout", "via /dev/stdout\n"); });
  EXPECT_EQ(out, "via /dev/stdout\n");
  EXPECT_EQ(fs::is_symlink("/dev/stdout"), was_link);
}

TEST(OutputFiles, SymlinkTargetStaysALinkAndThePointedToFileIsReplaced) {
  testing::TempDir dir;
  ScopedUmask mask(022);
  fs::create_directory(dir / "real");
  const auto real = dir / "real" / "data.txt";
  testing::write_file(real, "old");
  ASSERT_EQ(::chmod(real.c_str(), 0640), 0);
  fs::create_symlink("real/data.txt", dir / "link1");  // relative, resolved against the link's directory
  fs::create_symlink(dir / "link1", dir / "link2");    // a chain of two links
  write_text(dir / "link2", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link1"));
  EXPECT_TRUE(fs::is_symlink(dir / "link2"));
  EXPECT_EQ(fs::read_symlink(dir / "link1"), "real/data.txt");
  EXPECT_EQ(testing::read_file(real), "new");
  EXPECT_EQ(mode_of(real), 0640u);
  EXPECT_EQ(entries_in(dir / "real"), 1u);  // the temporary was made beside the real file
  EXPECT_EQ(entries_in(dir.path()), 3u);

  // A dangling link: the file it names is created, the link stays.
  fs::create_symlink("real/later.txt", dir / "dangling");
  write_text(dir / "dangling", "created");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling"));
  EXPECT_EQ(testing::read_file(dir / "real" / "later.txt"), "created");
}

TEST(OutputFiles, LoopsAndDirectoriesAreRefused) {
  testing::TempDir dir;
  fs::create_symlink("b", dir / "a");
  fs::create_symlink("a", dir / "b");
  EXPECT_THROW(write_text(dir / "a", "x"), InputError);
  fs::create_directory(dir / "d");
  EXPECT_THROW(write_text(dir / "d", "x"), InputError);
  EXPECT_TRUE(fs::is_directory(dir / "d"));
}

TEST(OutputFiles, FailedWriteLeavesTheTargetAndNoTemporary) {
  testing::TempDir dir;
  testing::write_file(dir / "out.txt", "old");
  EXPECT_THROW(write_file_atomically(dir / "out.txt",
                                     [](std::FILE* f) {
                                       std::fputs("partial", f);
                                       throw InputError("in", 1, "bad input");
                                     }),
               InputError);
  EXPECT_EQ(testing::read_file(dir / "out.txt"), "old");
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(OutputFiles, RenameFailureNamesTheRealErrorNotSuccess) {
  testing::TempDir dir;
  const auto target = dir / "out";
  try {
    // The target becomes a non-empty directory while the output is written: the rename fails.
    write_file_atomically(target, [&](std::FILE* f) {
      std::fputs("x", f);
      fs::create_directories(target / "inside");
    });
    FAIL() << "the rename over a directory succeeded";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot rename temporary output into place"), std::string::npos) << what;
    EXPECT_EQ(what.find("Success"), std::string::npos) << what;
  }
  EXPECT_EQ(entries_in(dir.path()), 1u);  // the temporary was removed
}

// ---- JIT cache ---------------------------------------------------------------------------------

JitRequest tiny_request(const std::string& tag) {
  JitRequest r;
  r.program_name = "tiny.cu";
  r.source = "// " + tag + "\nextern \"C\" __global__ void tiny(int* x) { *x = 1; }\n";
  r.kernel_names = {"tiny"};
  r.arch = "sm_90";
  return r;
}

// A well-formed entry for `key` that is not what NVRTC would produce: loading it is observable.
std::string planted_entry(const std::string& key) {
  JitProgram p;
  p.key = key;
  p.arch = "sm_90";
  p.cubin = "PLANTED-CUBIN";
  p.kernel_names = {"tiny"};
  p.lowered_names = {"tiny"};
  return detail::encode_cache_entry(p);
}

void plant(const fs::path& entry, const std::string& bytes, mode_t mode) {
  fs::create_directories(entry.parent_path());
  ::chmod(entry.parent_path().c_str(), 0700);
  testing::write_file(entry, bytes);
  ASSERT_EQ(::chmod(entry.c_str(), mode), 0);
}

// Compiles (or fails for want of NVRTC); returns the program when one came back.
std::optional<JitProgram> try_compile(JitCache& cache, const JitRequest& request) {
  try {
    return cache.compile(request);
  } catch (const NotCompiled&) {
    return std::nullopt;  // no NVRTC here: what matters is that the planted entry was not loaded
  }
}

fs::path private_dir(const testing::TempDir& dir, const std::string& name) {
  const auto d = dir / name;
  fs::create_directory(d);
  ::chmod(d.c_str(), 0700);
  return d;
}

TEST(JitCacheSecurity, DirectoryIsCreatedOwnerOnly) {
  testing::TempDir dir;
  ScopedUmask mask(0);  // 0700 must not come from the umask
  JitCache cache(dir / "parent" / "cache");
  const auto request = tiny_request("mkdir");
  auto program = try_compile(cache, request);
  EXPECT_EQ(mode_of(dir / "parent" / "cache"), 0700u);
  const auto entry = cache.entry_path(cache.key_for(request));
  EXPECT_EQ(mode_of(entry.parent_path()), 0700u);
  if (program) {  // with NVRTC, the stored entry is owner-only
    EXPECT_EQ(mode_of(entry), 0600u);
    EXPECT_EQ(entries_in(entry.parent_path()), 1u);
  }
}

TEST(JitCacheSecurity, PlantedEntryInAPrivateDirectoryIsLoaded) {
  // The control for the tests below: the planted entry is loadable when nothing is wrong.
  testing::TempDir dir;
  JitCache cache(private_dir(dir, "cache"));
  const auto request = tiny_request("control");
  const auto key = cache.key_for(request);
  plant(cache.entry_path(key), planted_entry(key), 0600);
  const auto program = cache.compile(request);
  EXPECT_EQ(program.origin, JitProgram::Origin::disk_cache);
  EXPECT_EQ(program.cubin, "PLANTED-CUBIN");
  EXPECT_EQ(cache.stats().disk_hits, 1u);
}

TEST(JitCacheSecurity, WorldOrGroupWritableDirectoryIsNotUsed) {
  for (mode_t mode : {0777u, 01777u, 0770u}) {
    testing::TempDir dir;
    const auto cache_dir = private_dir(dir, "cache");
    JitCache cache(cache_dir);
    const auto request = tiny_request("shared-dir");
    const auto key = cache.key_for(request);
    const auto entry = cache.entry_path(key);
    plant(entry, planted_entry(key), 0600);
    ASSERT_EQ(::chmod(cache_dir.c_str(), mode), 0);
    const auto program = try_compile(cache, request);
    if (program) {
      EXPECT_EQ(program->origin, JitProgram::Origin::compiled);
      EXPECT_NE(program->cubin, "PLANTED-CUBIN");
      EXPECT_EQ(try_compile(cache, request)->origin, JitProgram::Origin::memory_cache);
    }
    EXPECT_EQ(cache.stats().disk_hits, 0u) << fmt::format("{:o}", mode);
    EXPECT_EQ(testing::read_file(entry), planted_entry(key));  // nothing written there either
    EXPECT_EQ(mode_of(cache_dir), mode);                       // and nothing "repaired"
  }
}

TEST(JitCacheSecurity, EntryWritableByOthersIsIgnoredAndReplaced) {
  for (mode_t mode : {0666u, 0620u, 0602u}) {
    testing::TempDir dir;
    JitCache cache(private_dir(dir, "cache"));
    const auto request = tiny_request("writable-entry");
    const auto key = cache.key_for(request);
    const auto entry = cache.entry_path(key);
    plant(entry, planted_entry(key), mode);
    const auto program = try_compile(cache, request);
    EXPECT_EQ(cache.stats().disk_hits, 0u) << fmt::format("{:o}", mode);
    EXPECT_EQ(cache.stats().untrusted_ignored, 1u) << fmt::format("{:o}", mode);
    if (program) {  // rebuilt and stored owner-only over the planted one
      EXPECT_EQ(program->origin, JitProgram::Origin::compiled);
      EXPECT_EQ(mode_of(entry), 0600u);
      EXPECT_NE(testing::read_file(entry), planted_entry(key));
    }
  }
}

TEST(JitCacheSecurity, EntryThatIsALinkIsNotFollowed) {
  testing::TempDir dir;
  JitCache cache(private_dir(dir, "cache"));
  const auto request = tiny_request("linked-entry");
  const auto key = cache.key_for(request);
  const auto entry = cache.entry_path(key);
  const auto elsewhere = dir / "elsewhere.jit";
  testing::write_file(elsewhere, planted_entry(key));
  ::chmod(elsewhere.c_str(), 0600);
  fs::create_directories(entry.parent_path());
  ::chmod(entry.parent_path().c_str(), 0700);
  fs::create_symlink(elsewhere, entry);
  const auto program = try_compile(cache, request);
  EXPECT_EQ(cache.stats().disk_hits, 0u);
  EXPECT_EQ(cache.stats().untrusted_ignored, 1u);
  EXPECT_EQ(testing::read_file(elsewhere), planted_entry(key));  // not written through
  if (program) {
    EXPECT_FALSE(fs::is_symlink(entry));  // the link was replaced
  }
}

TEST(JitCacheSecurity, ForeignOwnedEntryIsIgnored) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  testing::TempDir dir;
  JitCache cache(private_dir(dir, "cache"));
  const auto request = tiny_request("foreign-entry");
  const auto key = cache.key_for(request);
  const auto entry = cache.entry_path(key);
  plant(entry, planted_entry(key), 0600);
  ASSERT_EQ(::chown(entry.c_str(), 65534, 65534), 0);
  const auto program = try_compile(cache, request);
  EXPECT_EQ(cache.stats().disk_hits, 0u);
  EXPECT_EQ(cache.stats().untrusted_ignored, 1u);
  if (program) {
    EXPECT_EQ(program->origin, JitProgram::Origin::compiled);
    EXPECT_EQ(lstat_of(entry).st_uid, ::geteuid());  // replaced by this user's entry
  }
}

TEST(JitCacheSecurity, ForeignOwnedDirectoryIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  testing::TempDir dir;
  const auto cache_dir = private_dir(dir, "cache");
  JitCache cache(cache_dir);
  const auto request = tiny_request("foreign-dir");
  const auto key = cache.key_for(request);
  plant(cache.entry_path(key), planted_entry(key), 0600);
  ASSERT_EQ(::chown(cache_dir.c_str(), 65534, 65534), 0);
  try_compile(cache, request);
  EXPECT_EQ(cache.stats().disk_hits, 0u);
}

TEST(JitCacheSecurity, PrivateDirectoryHelperSaysWhy) {
  testing::TempDir dir;
  const auto d = private_dir(dir, "d");
  std::string why;
  EXPECT_TRUE(detail::directory_is_private(d, why)) << why;
  ::chmod(d.c_str(), 0777);
  EXPECT_FALSE(detail::directory_is_private(d, why));
  EXPECT_NE(why.find("everyone"), std::string::npos) << why;
  ::chmod(d.c_str(), 0770);
  EXPECT_FALSE(detail::directory_is_private(d, why));
  EXPECT_NE(why.find("group"), std::string::npos) << why;
}

// ---- MOLACCEL_DUMP_KERNELS ---------------------------------------------------------------------

TEST(KernelDumps, WrittenThroughAnExclusiveTemporaryAndNeverThroughALink) {
  testing::TempDir dir;
  ScopedUmask mask(022);
  const auto dumps = dir / "dumps";
  fs::create_directory(dumps);
  const auto victim = dir / "victim";
  testing::write_file(victim, "precious");
  fs::create_symlink(victim, dumps / "k.cu");  // planted at the dump's name
  ::setenv("MOLACCEL_DUMP_KERNELS", dumps.c_str(), 1);
  dump_kernel_source("k.cu", "__global__ void k() {}\n");
  dump_kernel_source("fresh.cu", "// fresh\n");
  ::unsetenv("MOLACCEL_DUMP_KERNELS");
  EXPECT_EQ(testing::read_file(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(dumps / "k.cu"));
  EXPECT_EQ(testing::read_file(dumps / "k.cu"), "__global__ void k() {}\n");
  EXPECT_EQ(mode_of(dumps / "fresh.cu"), 0644u);
  EXPECT_EQ(entries_in(dumps), 2u);
}

}  // namespace
}  // namespace molaccel

// Issue 24 (items 9 and 10, faults end to end): the memory and disk checks made before a job, a
// group of outputs committed together or not at all, SIGKILL during the final write, and two
// processes filling one JIT cache directory at once.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "molaccel/display.hpp"
#include "runtime/jit_cache_format.hpp"
#include "runtime/resource_limits.hpp"
#include "runtime/secure_file.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

using molaccel::testing::TempDir;

// Restores the system's numbers when a test ends.
struct FakeLimits {
  FakeLimits(std::optional<std::uint64_t> memory, std::optional<std::uint64_t> space) {
    detail::set_resource_probes_for_testing([memory] { return memory; },
                                            [space](const std::filesystem::path&) { return space; });
  }
  ~FakeLimits() { detail::set_resource_probes_for_testing({}, {}); }
};

std::string message_of(const std::function<void()>& step) {
  try {
    step();
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

TEST(ResourceLimits, MemoryRefusalGivesTheEstimateWhatIsAvailableAndTheHint) {
  const FakeLimits limits(std::uint64_t(2) << 30, std::nullopt);
  EXPECT_NO_THROW(detail::require_memory(double(std::uint64_t(1) << 30), "small", "never shown"));
  const std::string what = message_of(
      [] { detail::require_memory(3.0 * double(std::uint64_t(1) << 30), "--poisson 9", "use a smaller N"); });
  EXPECT_NE(what.find("--poisson 9"), std::string::npos) << what;
  EXPECT_NE(what.find("3.0 GiB"), std::string::npos) << what;
  EXPECT_NE(what.find("2.0 GiB are available"), std::string::npos) << what;
  EXPECT_NE(what.find("use a smaller N"), std::string::npos) << what;
}

TEST(ResourceLimits, DiskRefusalNamesTheOutputAndItsFreeSpace) {
  TempDir dir;
  const FakeLimits limits(std::nullopt, std::uint64_t(8) << 10);
  EXPECT_NO_THROW(detail::require_output_space(dir / "a.npy", 8192, "never shown"));
  const std::string what =
      message_of([&] { detail::require_output_space(dir / "a.npy", 40000, "a smaller --output-type"); });
  EXPECT_NE(what.find("a.npy"), std::string::npos) << what;
  EXPECT_NE(what.find("39.1 KiB"), std::string::npos) << what;
  EXPECT_NE(what.find("8.0 KiB free"), std::string::npos) << what;
  EXPECT_NE(what.find("a smaller --output-type"), std::string::npos) << what;
  EXPECT_FALSE(std::filesystem::exists(dir / "a.npy"));
}

TEST(ResourceLimits, UnknownLimitsAndWriteThroughOutputsPass) {
  {
    const FakeLimits limits(std::nullopt, std::nullopt);
    EXPECT_NO_THROW(detail::require_memory(1e30, "anything", ""));
    EXPECT_NO_THROW(detail::require_output_space("x.npy", 1e30, ""));
  }
  // The system's numbers: standard output and devices store nothing.
  EXPECT_FALSE(detail::output_space("-").has_value());
  EXPECT_FALSE(detail::output_space("/dev/null").has_value());
  TempDir dir;
  ASSERT_TRUE(detail::output_space(dir / "new.cube").has_value());
  EXPECT_GT(*detail::output_space(dir / "new.cube"), 0u);
  ASSERT_TRUE(detail::available_memory().has_value());
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path, [&](std::FILE* f) { std::fwrite(text.data(), 1, text.size(), f); });
}

std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(OutputGroup, NothingAppearsBeforeCommitAndEverythingAfter) {
  TempDir dir;
  OutputGroup group;
  write_text(dir / "a.cube", "A");
  write_text(dir / "b.cube", "B");
  EXPECT_FALSE(std::filesystem::exists(dir / "a.cube"));
  EXPECT_FALSE(std::filesystem::exists(dir / "b.cube"));
  group.commit();
  EXPECT_EQ(testing::read_file(dir / "a.cube"), "A");
  EXPECT_EQ(testing::read_file(dir / "b.cube"), "B");
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"a.cube", "b.cube"}));
  // After the commit, writes on this thread are on their own again.
  write_text(dir / "c.cube", "C");
  EXPECT_EQ(testing::read_file(dir / "c.cube"), "C");
}

// Issue 24, defect 10: the second field failing leaves the old files of both names as they were
// and no temporary file.
TEST(OutputGroup, AFailedWriteLeavesEveryOldFileAndNoTemporary) {
  TempDir dir;
  testing::write_file(dir / "h.homo.cube", "old homo");
  testing::write_file(dir / "h.lumo.cube", "old lumo");
  EXPECT_THROW(
      {
        OutputGroup group;
        write_text(dir / "h.homo.cube", "new homo");
        write_file_atomically(dir / "h.lumo.cube", [](std::FILE*) {
          throw InputError("h.lumo.cube", 0, "write failed: No space left on device");
        });
        group.commit();
      },
      InputError);
  EXPECT_EQ(testing::read_file(dir / "h.homo.cube"), "old homo");
  EXPECT_EQ(testing::read_file(dir / "h.lumo.cube"), "old lumo");
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"h.homo.cube", "h.lumo.cube"}));
  // An output that cannot even be created (its directory is gone) fails the group the same way.
  EXPECT_THROW(
      {
        OutputGroup group;
        write_text(dir / "h.homo.cube", "new homo");
        write_text(dir / "missing" / "h.lumo.cube", "new lumo");
        group.commit();
      },
      InputError);
  EXPECT_EQ(testing::read_file(dir / "h.homo.cube"), "old homo");
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"h.homo.cube", "h.lumo.cube"}));
}

TEST(OutputGroup, AnInnerGroupJoinsTheOuterOne) {
  TempDir dir;
  {
    OutputGroup outer;
    {
      OutputGroup inner;  // e.g. OBJ + MTL inside a command's group of meshes
      write_text(dir / "m.obj", "obj");
      write_text(dir / "m.mtl", "mtl");
      inner.commit();
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "m.obj"));  // the outer group commits
    EXPECT_FALSE(std::filesystem::exists(dir / "m.mtl"));
    write_text(dir / "n.obj", "obj");
  }  // destroyed without commit: nothing
  EXPECT_TRUE(entries(dir.path()).empty());
}

TEST(OutputGroup, WriteThroughOutputsAreWrittenAtOnce) {
  TempDir dir;
  OutputGroup group;
  EXPECT_NO_THROW(write_text("/dev/null", "through"));
  write_text(dir / "a.txt", "a");
  group.commit();
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"a.txt"}));
}

// OBJ + MTL: an OBJ that cannot be written (a directory holds its name) leaves no new MTL either.
TEST(OutputGroup, ObjAndMtlAppearTogetherOrNotAtAll) {
  TempDir dir;
  display::Scene scene;
  display::ScenePart part;
  part.name = "triangle";
  part.mesh.positions = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  part.mesh.normals = {0, 0, 1, 0, 0, 1, 0, 0, 1};
  part.mesh.indices = {0, 1, 2};
  scene.parts.push_back(part);
  std::filesystem::create_directories(dir / "m.obj");
  EXPECT_THROW(display::write_obj(dir / "m.obj", scene), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir / "m.mtl"));
  std::filesystem::remove(dir / "m.obj");
  display::write_obj(dir / "m.obj", scene);
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "m.mtl"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "m.obj"));
}

// SIGKILL (nothing can clean up) during the final write: the output's name still holds the old
// file, whole; only the hidden temporary may be left.
TEST(FaultsEndToEnd, SigkillDuringTheFinalWriteLeavesNoPartialFileUnderTheName) {
  TempDir dir;
  const auto target = dir / "result.tsv";
  testing::write_file(target, "old result\n");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      write_file_atomically(target, [&](std::FILE* f) {
        const std::string block(1 << 16, 'x');
        for (int i = 0;; ++i) {
          std::fwrite(block.data(), 1, block.size(), f);
          std::fflush(f);
          if (i == 4) (void)!::write(ready[1], "w", 1);  // part of the file is on disk
          ::usleep(1000);
        }
      });
    } catch (...) {
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(testing::read_file(target), "old result\n");
}

// Two processes storing and loading one JIT cache entry at once (the cache's own protocol:
// replace_file into the entry's name, then read and decode): every load is one process's whole
// entry, never a torn mix, and never reported corrupt.
TEST(FaultsEndToEnd, TwoProcessesFillingOneJitCacheNeverLoadATornEntry) {
  TempDir dir;
  const auto entry = dir / "ab" / "entry.bin";
  std::filesystem::create_directories(entry.parent_path());
  const std::string key = std::string(32, 'a');
  auto program = [&](char fill, std::size_t bytes) {
    JitProgram p;
    p.key = key;
    p.arch = "sm_90";
    p.cubin.assign(bytes, fill);
    p.kernel_names = {"k"};
    p.lowered_names = {"_Z1kv"};
    return p;
  };
  // Different sizes: a torn read would mix them or cut one short.
  const std::string bytes_a = detail::encode_cache_entry(program('A', 300000));
  const std::string bytes_b = detail::encode_cache_entry(program('B', 700001));
  auto run = [&](const std::string& mine) {
    int bad = 0;
    for (int i = 0; i < 200; ++i) {
      detail::replace_file(
          entry, 0600, std::nullopt, [&](std::FILE* f) { std::fwrite(mine.data(), 1, mine.size(), f); },
          entry.string());
      std::ifstream in(entry, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      const std::string read = text.str();
      const auto decoded = detail::decode_cache_entry(read, key);
      if (!decoded || (read != bytes_a && read != bytes_b)) ++bad;
    }
    return bad;
  };
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(run(bytes_b) == 0 ? 0 : 1);
  const int bad_here = run(bytes_a);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(bad_here, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Only the entry: every temporary file was renamed.
  EXPECT_EQ(entries(entry.parent_path()), (std::vector<std::string>{"entry.bin"}));
}

}  // namespace
}  // namespace molaccel

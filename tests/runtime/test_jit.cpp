#include <fstream>
#include <thread>

#include "runtime/jit_cache_format.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

// A generated kernel, as an engine would emit it (templated, so name lowering is exercised).
JitRequest saxpy_request(const std::string& tag = "") {
  JitRequest r;
  r.program_name = "saxpy.cu";
  r.source = "// " + tag + "\n" + R"(
template <typename T>
__global__ void saxpy(int n, T a, const T* __restrict__ x, T* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";
  r.kernel_names = {"saxpy<float>", "saxpy<double>"};
  r.arch = "sm_90";
  return r;
}

TEST(JitCacheFormat, RoundTripAndRejections) {
  JitProgram p;
  p.key = "0123abcd";
  p.arch = "sm_90";
  p.log = "warning: x";
  p.cubin = std::string(
      "\x7f"
      "ELF\0\1\2",
      7);
  p.kernel_names = {"k<float>"};
  p.lowered_names = {"_Z1kIfEvv"};
  const auto bytes = detail::encode_cache_entry(p);
  auto back = detail::decode_cache_entry(bytes, "0123abcd");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->cubin, p.cubin);
  EXPECT_EQ(back->lowered_names, p.lowered_names);
  EXPECT_FALSE(detail::decode_cache_entry(bytes, "other-key"));  // foreign entry
  for (std::size_t cut : {0ul, 5ul, 20ul, bytes.size() - 1})     // truncated
    EXPECT_FALSE(detail::decode_cache_entry(bytes.substr(0, cut), "0123abcd")) << cut;
  auto flipped = bytes;
  flipped[bytes.size() - 3] ^= 0x40;  // corrupt payload
  EXPECT_FALSE(detail::decode_cache_entry(flipped, "0123abcd"));
}

TEST(Jit, CompilesGeneratedKernelAndCaches) {
  MOLACCEL_REQUIRE_NVRTC();
  testing::TempDir dir;
  JitCache cache(dir.path());
  const auto request = saxpy_request("cache-test");

  auto first = cache.compile(request);  // miss: NVRTC compiles
  EXPECT_EQ(first.origin, JitProgram::Origin::compiled);
  EXPECT_GT(first.cubin.size(), 100u);
  EXPECT_EQ(first.cubin.substr(1, 3), "ELF");
  EXPECT_EQ(first.arch, "sm_90");
  ASSERT_EQ(first.lowered_names.size(), 2u);
  EXPECT_NE(first.lowered("saxpy<float>"), first.lowered("saxpy<double>"));
  EXPECT_TRUE(std::filesystem::exists(cache.entry_path(first.key)));

  auto second = cache.compile(request);  // memory hit
  EXPECT_EQ(second.origin, JitProgram::Origin::memory_cache);
  EXPECT_EQ(second.cubin, first.cubin);

  JitCache fresh(dir.path());  // a new process would see the disk entry
  auto third = fresh.compile(request);
  EXPECT_EQ(third.origin, JitProgram::Origin::disk_cache);
  EXPECT_EQ(third.cubin, first.cubin);

  auto s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(fresh.stats().disk_hits, 1u);
}

TEST(Jit, KeyCoversSourceOptionsAndArch) {
  testing::TempDir dir;
  JitCache cache(dir.path());
  auto a = saxpy_request();
  auto b = a;
  b.options.push_back("-use_fast_math");
  auto c = a;
  c.arch = "sm_80";
  auto d = a;
  d.source += " ";
  EXPECT_NE(cache.key_for(a), cache.key_for(b));
  EXPECT_NE(cache.key_for(a), cache.key_for(c));
  EXPECT_NE(cache.key_for(a), cache.key_for(d));
  EXPECT_EQ(cache.key_for(a), cache.key_for(saxpy_request()));
}

TEST(Jit, CorruptOrTruncatedEntryIsRebuiltNotLoaded) {
  MOLACCEL_REQUIRE_NVRTC();
  testing::TempDir dir;
  const auto request = saxpy_request("corrupt-test");
  std::string good_cubin;
  std::filesystem::path entry;
  {
    JitCache cache(dir.path());
    auto p = cache.compile(request);
    good_cubin = p.cubin;
    entry = cache.entry_path(p.key);
  }
  // Truncate the entry, as a crash in the middle of a non-atomic write would.
  auto bytes = testing::read_file(entry);
  testing::write_file(entry, bytes.substr(0, bytes.size() / 2));
  {
    JitCache cache(dir.path());
    auto p = cache.compile(request);
    EXPECT_EQ(p.origin, JitProgram::Origin::compiled);
    EXPECT_EQ(p.cubin, good_cubin);
    EXPECT_EQ(cache.stats().corrupt_rebuilt, 1u);
  }
  // Flip one byte in the middle (bit rot): checksum mismatch, rebuilt again.
  bytes = testing::read_file(entry);
  bytes[bytes.size() / 2] ^= 0x01;
  testing::write_file(entry, bytes);
  {
    JitCache cache(dir.path());
    auto p = cache.compile(request);
    EXPECT_EQ(p.origin, JitProgram::Origin::compiled);
    EXPECT_EQ(cache.stats().corrupt_rebuilt, 1u);
  }
  // The rebuilt entry is good again.
  JitCache cache(dir.path());
  EXPECT_EQ(cache.compile(request).origin, JitProgram::Origin::disk_cache);
}

TEST(Jit, ConcurrentCompilesShareTheCacheSafely) {
  MOLACCEL_REQUIRE_NVRTC();
  testing::TempDir dir;
  const auto request = saxpy_request("concurrent-test");
  std::vector<std::string> cubins(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      JitCache cache(dir.path());  // separate caches = separate processes sharing the directory
      cubins[static_cast<std::size_t>(i)] = cache.compile(request).cubin;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(cubins[0], cubins[1]);
  EXPECT_EQ(cubins[1], cubins[2]);
  JitCache check(dir.path());
  EXPECT_EQ(check.compile(request).origin, JitProgram::Origin::disk_cache);
  // No temporary files left behind.
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (e.is_regular_file()) {
      EXPECT_EQ(e.path().extension(), ".jit") << e.path();
    }
  }
}

TEST(Jit, CompileErrorCarriesLogAndOffendingLine) {
  MOLACCEL_REQUIRE_NVRTC();
  testing::TempDir dir;
  JitCache cache(dir.path());
  JitRequest r;
  r.program_name = "broken.cu";
  r.source = "__global__ void k(float* x) {\n  x[0] = 1.0f;\n  x[1] = undefined_symbol;\n}\n";
  r.kernel_names = {"k"};
  r.arch = "sm_90";
  try {
    cache.compile(r);
    FAIL() << "expected NvrtcError";
  } catch (const NvrtcError& e) {
    EXPECT_NE(e.log().find("undefined_symbol"), std::string::npos) << e.log();
    EXPECT_EQ(e.offending_line(), "  x[1] = undefined_symbol;");
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

TEST(Jit, DumpsKernelsWhenAsked) {
  MOLACCEL_REQUIRE_NVRTC();
  testing::TempDir dir;
  testing::TempDir dump;
  setenv("MOLACCEL_DUMP_KERNELS", dump.path().c_str(), 1);
  JitCache cache(dir.path());
  cache.compile(saxpy_request("dump-test"));
  unsetenv("MOLACCEL_DUMP_KERNELS");
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dump.path())) {
    ++files;
    EXPECT_NE(testing::read_file(e.path()).find("saxpy"), std::string::npos);
  }
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace molaccel

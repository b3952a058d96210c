// The JIT hand-over: with --backend auto, a basis set whose JIT kernel is not cached is computed
// with the generic kernel while the JIT kernel compiles in the background, and with the JIT kernel
// once it is ready. Without a GPU: the background-compile logic (detail::BackgroundCompiles) with
// stand-in compiles. With a GPU: a fresh JIT cache directory for this process, the first grid from
// the generic kernel, later ones from the JIT kernel, both within the fp32 tolerance of the
// reference and of each other, and the compiled kernel in the disk cache.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <future>

#include "orbital/jit_source.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/reference/reference.hpp"
#include "orbital_test_util.hpp"

namespace molaccel::orbital {
namespace {

// A JIT cache directory of this process's own, empty, set before the default cache is first used
// (at static initialisation; the cache is created on first use, inside a test), removed at exit
// (after the process-wide background compiles and JIT cache, created later, are gone).
struct FreshCacheDir {
  std::filesystem::path path;
  FreshCacheDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "molaccel-jit-handover-XXXXXX").string();
    if (const char* made = ::mkdtemp(pattern.data())) {
      ::setenv("MOLACCEL_CACHE_DIR", made, 1);
      path = made;
    }
  }
  ~FreshCacheDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};
const FreshCacheDir kFreshCache;

JitProgram program_named(const std::string& key) {
  JitProgram p;
  p.key = key;
  p.cubin = "stand-in";
  return p;
}

TEST(OrbitalJitHandover, OneBackgroundCompilePerKeyAndItsProgramOnceReady) {
  detail::BackgroundCompiles compiles;
  std::promise<void> gate;
  const std::shared_future<void> open = gate.get_future().share();
  std::atomic<int> calls{0};
  const auto compile = [&] {
    ++calls;
    open.wait();
    return program_named("k");
  };
  EXPECT_FALSE(compiles.started("k"));
  EXPECT_FALSE(compiles.get("k", compile, false).has_value());  // starts it
  EXPECT_TRUE(compiles.started("k"));
  EXPECT_FALSE(compiles.get("k", compile, false).has_value());  // still compiling: generic meanwhile
  gate.set_value();
  const auto waited = compiles.get("k", compile, true);  // waits for the one in flight
  ASSERT_TRUE(waited.has_value());
  EXPECT_EQ(waited->key, "k");
  const auto ready = compiles.get("k", compile, false);  // ready: no wait, no second compile
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->key, "k");
  EXPECT_EQ(calls.load(), 1);
  // Needed now with nothing in flight: compiled on the calling thread, nothing started.
  const auto here = compiles.get(
      "other", [] { return program_named("other"); }, true);
  ASSERT_TRUE(here.has_value());
  EXPECT_EQ(here->key, "other");
  EXPECT_FALSE(compiles.started("other"));
}

// Held compiles begin only once released, however long that takes.
TEST(OrbitalJitHandover, AHeldCompileBeginsWhenReleased) {
  detail::BackgroundCompiles compiles;
  std::atomic<int> calls{0};
  const auto compile = [&] {
    ++calls;
    return program_named("held");
  };
  compiles.hold();
  EXPECT_FALSE(compiles.get("held", compile, false).has_value());  // started, and held
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(compiles.get("held", compile, false).has_value());
  EXPECT_EQ(calls.load(), 0);
  compiles.release();
  compiles.wait_all();
  const auto ready = compiles.get("held", compile, false);
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->key, "held");
  EXPECT_EQ(calls.load(), 1);
}

TEST(OrbitalJitHandover, AFailedCompileLeavesTheGenericKernelOrIsReportedWhenWaitedFor) {
  detail::BackgroundCompiles compiles;
  const auto failing = []() -> JitProgram { throw Error("stand-in compile error"); };
  EXPECT_FALSE(compiles.get("bad", failing, false).has_value());
  compiles.wait_all();
  EXPECT_FALSE(compiles.get("bad", failing, false).has_value());  // generic from then on
  EXPECT_FALSE(compiles.get("bad", failing, false).has_value());
  EXPECT_THROW(compiles.get("bad", failing, true), Error);  // a caller that needs the JIT kernel
}

TEST(OrbitalJitHandover, TheDestructorWaitsForCompilesInFlight) {
  std::atomic<bool> finished{false};
  {
    detail::BackgroundCompiles compiles;
    (void)compiles.get(
        "slow",
        [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          finished = true;
          return program_named("slow");
        },
        false);
  }
  EXPECT_TRUE(finished.load());
}

// The JIT kernel of a basis set, for sm_90 (NVRTC compiles it without a GPU).
JitRequest jit_request_for(const Wavefunction& wfn) {
  const auto source =
      detail::generate_jit_source(detail::pack_basis(wfn, 1e-9), detail::parse_cull_layout("8x8x8/4"));
  JitRequest request;
  request.source = source.source;
  request.program_name = "orbital_jit_handover_test.cu";
  request.kernel_names = {source.kernel_name};
  request.arch = "sm_90";
  return request;
}

// A real compile (NVRTC, no GPU needed) through the process-wide instance: started in the
// background, then its program, and the entry in this process's fresh disk cache.
TEST(OrbitalJitHandover, ABackgroundNvrtcCompileLandsInTheDiskCache) {
  MOLACCEL_REQUIRE_NVRTC();
  ASSERT_FALSE(kFreshCache.path.empty());
  const JitRequest request = jit_request_for(test::random_wavefunction(21, 3, 1));
  JitCache& cache = default_jit_cache();
  ASSERT_EQ(cache.directory(), kFreshCache.path);
  const std::string key = cache.key_for(request);
  auto& compiles = detail::background_jit_compiles();
  const auto compile = [&cache, request] { return cache.compile(request); };
  (void)compiles.get(key, compile, false);  // starts it (nullopt unless NVRTC beat this line)
  EXPECT_TRUE(compiles.started(key));
  compiles.wait_all();
  const auto program = compiles.get(key, compile, false);
  ASSERT_TRUE(program.has_value());
  EXPECT_FALSE(program->cubin.empty());
  EXPECT_TRUE(std::filesystem::exists(cache.entry_path(key)));
}

// A process that ends while a background NVRTC compile is in flight: finish_background_work (as
// the CLI's main, the Python module's atexit and the test programs call it) lets it end cleanly.
// Joined only from the destructor, in exit(), the compile ran on with NVRTC's statics destroyed:
// a segmentation fault, or a process that never ended (measured: the CLI's first orbital grid of
// a new basis set, on an H200).
TEST(OrbitalJitHandover, AProcessEndingMidCompileFinishesItFirst) {
  MOLACCEL_REQUIRE_NVRTC();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto end_mid_compile = [] {
    // A source no other test compiles (its own basis set), so the compile is not cached.
    const JitRequest request = jit_request_for(test::random_wavefunction(4242, 4, 2));
    JitCache& cache = default_jit_cache();
    (void)detail::background_jit_compiles().get(
        cache.key_for(request), [&cache, request] { return cache.compile(request); }, false);
    // The command's own work (a first grid) while NVRTC has begun, and made its statics.
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    finish_background_work();
    std::exit(0);
  };
  EXPECT_EXIT(end_mid_compile(), ::testing::ExitedWithCode(0), "");
}

// fp32 tolerance of the GPU kernels against the reference (test_cuda.cpp: 2e-5 of the largest
// value); a grid of the generic kernel and one of the JIT kernel, each within it of the
// reference, are within twice it of each other.
constexpr double kFp32Tolerance = 2e-5;

TEST(OrbitalCudaJitHandover, GenericWhileTheJitKernelCompilesThenJitWithTheSameGrid) {
  MOLACCEL_REQUIRE_GPU();
  MOLACCEL_REQUIRE_NVRTC();
  ASSERT_FALSE(kFreshCache.path.empty());
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  const Resources resources = Resources::create(o);
  const auto wfn = read_molden(test::bundled("threonine_631gs.molden"));
  const GridSpec grid = automatic_grid(wfn, 2.0, 0.3);
  const std::vector<OrbitalRef> homo{parse_orbital("homo", wfn)};
  EvaluateOptions automatic;  // --backend auto
  EvaluationInfo first_info;
  // The compile is held until the first grid is done (NVRTC takes most of a second and the grid
  // milliseconds, but under the load of other GPU tests a GPU's worker may begin only after the
  // compile ended): the generic kernel computes it.
  std::vector<float> first;
  {
    struct Held {
      Held() { detail::background_jit_compiles().hold(); }
      ~Held() { detail::background_jit_compiles().release(); }
    } held;
    first = evaluate_orbitals(resources, wfn, grid, homo, automatic, &first_info);
  }
  EXPECT_EQ(first_info.backend.rfind("cuda/generic", 0), 0u) << first_info.backend;
  EXPECT_EQ(first_info.backend.find("jit"), std::string::npos) << first_info.backend;
  detail::background_jit_compiles().wait_all();
  std::size_t entries = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kFreshCache.path))
    entries += e.path().extension() == ".jit" ? 1 : 0;
  EXPECT_GE(entries, 1u) << "the compiled kernel is in the disk cache";
  EvaluationInfo second_info;
  const auto second = evaluate_orbitals(resources, wfn, grid, homo, automatic, &second_info);
  EXPECT_EQ(second_info.backend.rfind("cuda/jit-cull-", 0), 0u) << second_info.backend;

  EvaluateOptions jit, generic;
  jit.backend = Backend::cuda_jit;
  generic.backend = Backend::cuda_generic;
  const auto jit_grid = evaluate_orbitals(resources, wfn, grid, homo, jit);
  const auto generic_grid = evaluate_orbitals(resources, wfn, grid, homo, generic);
  EXPECT_EQ(second, jit_grid);
  if (first_info.backend == "cuda/generic") {
    EXPECT_EQ(first, generic_grid);
  }
  const auto expected = reference::evaluate_orbitals(wfn, grid, homo, 0);
  EXPECT_LT(test::relative_max_error(first, expected), kFp32Tolerance) << first_info.backend;
  EXPECT_LT(test::relative_max_error(second, expected), kFp32Tolerance) << second_info.backend;
  EXPECT_LT(test::relative_max_error(first, jit_grid), 2 * kFp32Tolerance);
}

}  // namespace
}  // namespace molaccel::orbital

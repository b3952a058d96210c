// Costs of the runtime itself: tile hand-out by the scheduler, JIT cache hits, and (with a GPU)
// empty-kernel launch, launch + synchronise round trip and small copies.
#include <unistd.h>

#include <cstdio>

#include "common/harness.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::bench {
void run_gpu_runtime_benchmarks();  // bench_runtime_gpu.cu; absent without CUDA
}

int main() {
  using namespace molaccel;
  using namespace molaccel::bench;
  const std::string cpu = cpu_info().model;
  print_header();

  // Tile hand-out: empty tiles through a pool of 1 and 4 workers; time per tile = scheduler cost.
  for (int workers : {1, 4}) {
    std::vector<WorkerInfo> w(static_cast<std::size_t>(workers));
    WorkerPool pool(w);
    constexpr std::size_t tiles = 100000;
    auto t = measure([&] { pool.run(tiles, [](WorkerContext&, std::size_t) {}); }, 1, 5);
    print_row({.benchmark = fmt::format("runtime/tile-handout/{}-workers", workers),
               .device = cpu,
               .size = fmt::format("{} tiles", tiles),
               .timing = t,
               .work = double(tiles),
               .work_unit = "tiles",
               .note = fmt::format("{:.0f} ns per tile", t.median_s / tiles * 1e9)});
  }
  // Job start/stop on the persistent pool: one job of one tile.
  {
    auto r = Resources::cpu(2);
    auto t = measure([&] { run_tiles(r, 1, [](WorkerContext&, std::size_t) {}); }, 10, 201);
    print_row({.benchmark = "runtime/job-round-trip",
               .device = cpu,
               .size = "1 tile",
               .timing = t,
               .note = "wake workers, run, join"});
  }
  if (nvrtc_available()) {
    const auto dir =
        std::filesystem::temp_directory_path() / fmt::format("molaccel-bench-cache-{}", ::getpid());
    JitRequest req;
    req.program_name = "bench.cu";
    req.source = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n";
    req.kernel_names = {"k"};
    req.arch = "sm_90";
    {
      JitCache cache(dir);
      auto miss = measure(
          [&] {
            cache.clear_memory();
            std::filesystem::remove_all(dir);
            cache.compile(req);
          },
          1, 3);
      print_row({.benchmark = "runtime/jit-compile (miss)",
                 .device = cpu,
                 .size = "1 kernel",
                 .timing = miss,
                 .note = "NVRTC"});
      auto hit = measure([&] { cache.compile(req); }, 10, 1001);
      print_row(
          {.benchmark = "runtime/jit-cache-hit (memory)", .device = cpu, .size = "1 kernel", .timing = hit});
      auto disk = measure(
          [&] {
            cache.clear_memory();
            cache.compile(req);
          },
          5, 201);
      print_row({.benchmark = "runtime/jit-cache-hit (disk)",
                 .device = cpu,
                 .size = "1 kernel",
                 .timing = disk,
                 .note = "read + checksum"});
    }
    std::filesystem::remove_all(dir);
  } else {
    std::printf("runtime/jit: skipped (NVRTC not found)\n");
  }
#ifdef MOLACCEL_HAVE_CUDA
  if (!gpu_list().empty())
    run_gpu_runtime_benchmarks();
  else
    std::printf("runtime/gpu: skipped (%s)\n", gpu_absence_reason().c_str());
#endif
  return 0;
}

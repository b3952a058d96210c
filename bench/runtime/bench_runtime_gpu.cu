#include <cstring>
#include <vector>

#include "common/harness.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::bench {

namespace {
__global__ void empty_kernel() {}
}  // namespace

// The host-link ceiling of results that must land in host memory: 2 GiB copied device-to-host
// (and host-to-device) into one page-locked buffer, split evenly over the first 1, 2, ... visible
// GPUs, all copies in flight at once (one stream per GPU). Engines whose multi-GPU output goes to
// the host (orbital batches, lingo matrices) are bounded by the aggregate figure, not by the GPUs.
void host_link_ceiling() {
  const auto gpus = gpu_list();
  const std::size_t total = std::size_t{2} << 30;
  cuda::PinnedBuffer<unsigned char> host(total);
  std::memset(host.data(), 1, total);  // touched once, so no first-touch cost is timed
  for (std::size_t g = 1; g <= gpus.size(); ++g) {
    const std::size_t share = total / g;
    std::vector<cuda::DeviceBuffer<unsigned char>> device(g);
    std::vector<cuda::Stream> streams;
    for (std::size_t d = 0; d < g; ++d) {
      cuda::DeviceGuard guard(gpus[d].index);
      streams.emplace_back();
      device[d].resize(share);
      device[d].fill_zero(streams[d]);
      streams[d].synchronize();
    }
    for (const bool to_host : {true, false}) {
      auto t = measure(
          [&] {
            for (std::size_t d = 0; d < g; ++d) {
              cuda::DeviceGuard guard(gpus[d].index);
              unsigned char* h = host.data() + d * share;
              if (to_host)
                MOLACCEL_CUDA_TRY(
                    cudaMemcpyAsync(h, device[d].data(), share, cudaMemcpyDeviceToHost, streams[d]));
              else
                MOLACCEL_CUDA_TRY(
                    cudaMemcpyAsync(device[d].data(), h, share, cudaMemcpyHostToDevice, streams[d]));
            }
            for (std::size_t d = 0; d < g; ++d) {
              cuda::DeviceGuard guard(gpus[d].index);
              streams[d].synchronize();
            }
          },
          1, 5);
      print_row(
          {.benchmark = fmt::format(fmt::runtime("runtime/{}-aggregate/{}gpu"), to_host ? "d2h" : "h2d", g),
           .device = g == 1 ? gpus[0].name : fmt::format(fmt::runtime("{} x {}"), g, gpus[0].name),
           .size = "2 GiB, one page-locked buffer",
           .timing = t,
           .work = double(g * share),
           .work_unit = "B",
           .note = "all GPUs' copies in flight at once"});
    }
    for (std::size_t d = 0; d < g; ++d) {
      cuda::DeviceGuard guard(gpus[d].index);
      device[d].reset();
      streams[d].synchronize();
    }
  }
}

void run_gpu_runtime_benchmarks() {
  const auto gpu = gpu_list().front();
  cuda::Stream stream;
  // Launch throughput: many empty launches, one synchronise.
  constexpr int launches = 10000;
  auto t = measure(
      [&] {
        for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32, 0, stream>>>();
        stream.synchronize();
      },
      2, 7);
  print_row({.benchmark = "runtime/empty-kernel-launch",
             .device = gpu.name,
             .size = fmt::format(fmt::runtime("{} launches"), launches),
             .timing = t,
             .work = double(launches),
             .work_unit = "launches",
             .note = fmt::format(fmt::runtime("{:.2f} us per launch"), t.median_s / launches * 1e6)});
  // Round trip: launch + synchronise, one at a time.
  auto rt = measure(
      [&] {
        empty_kernel<<<1, 32, 0, stream>>>();
        stream.synchronize();
      },
      20, 501);
  print_row(
      {.benchmark = "runtime/launch+sync-round-trip", .device = gpu.name, .size = "1 launch", .timing = rt});
  // 4-byte copy round trip to pinned memory.
  cuda::DeviceBuffer<int> d(1);
  cuda::PinnedBuffer<int> h(1);
  auto cp = measure(
      [&] {
        d.copy_from_host(h.data(), 1, stream);
        d.copy_to_host(h.data(), 1, stream);
        stream.synchronize();
      },
      20, 501);
  print_row(
      {.benchmark = "runtime/4-byte-copy-round-trip", .device = gpu.name, .size = "H2D+D2H", .timing = cp});
  // JIT kernel launch through cudaLibraryLoadData + cudaKernel_t.
  if (nvrtc_available()) {
    JitRequest req;
    req.program_name = "bench_empty.cu";
    req.source = "__global__ void jit_empty() {}\n";
    req.kernel_names = {"jit_empty"};
    auto program = default_jit_cache().compile(req);
    cuda::LoadedProgram loaded(program);
    auto k = loaded.kernel("jit_empty");
    auto jt = measure(
        [&] {
          for (int i = 0; i < launches; ++i) cuda::launch(k, dim3(1), dim3(32), 0, stream.get());
          stream.synchronize();
        },
        2, 7);
    print_row({.benchmark = "runtime/jit-kernel-launch",
               .device = gpu.name,
               .size = fmt::format(fmt::runtime("{} launches"), launches),
               .timing = jt,
               .work = double(launches),
               .work_unit = "launches",
               .note = fmt::format(fmt::runtime("{:.2f} us per launch"), jt.median_s / launches * 1e6)});
  }
  // Large device-to-device copy: the memory-bandwidth ceiling other benchmarks compare with.
  const std::size_t n = std::size_t{1} << 28;  // 1 GiB of floats... as bytes: 2^28 * 4
  cuda::DeviceBuffer<float> a(n), b(n);
  a.fill_zero(stream);
  cuda::Event e0, e1;
  auto bw = measure_with(
      [&] {
        e0.record(stream);
        MOLACCEL_CUDA_TRY(
            cudaMemcpyAsync(b.data(), a.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        e1.record(stream);
        e1.synchronize();
        return e1.elapsed_ms_since(e0) / 1e3;
      },
      2, 9);
  print_row({.benchmark = "runtime/d2d-copy-bandwidth",
             .device = gpu.name,
             .size = "1 GiB",
             .timing = bw,
             .work = 2.0 * n * sizeof(float),
             .work_unit = "B",
             .note = "read + write bytes"});
  a.reset();
  b.reset();
  host_link_ceiling();
}

}  // namespace molaccel::bench

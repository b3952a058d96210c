// Runtime pieces that need a GPU: buffers, streams, events, JIT load + launch, GPU workers.
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "runtime/cuda/cuda_support.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

__global__ void iota_kernel(int n, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}

TEST(GpuRuntime, BuffersStreamsAndLaunchChecks) {
  MOLACCEL_REQUIRE_GPU();
  cuda::Stream stream;
  cuda::DeviceBuffer<int> buf(1000);
  cuda::Event start, stop;
  start.record(stream);
  iota_kernel<<<4, 256, 0, stream>>>(1000, buf.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("iota_kernel");
  stop.record(stream);
  auto host = buf.download(stream);
  ASSERT_EQ(host.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(host[static_cast<std::size_t>(i)], 3 * i + 1);
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0f);
  cuda::PinnedBuffer<int> pinned(1000);
  buf.copy_to_host(pinned.data(), 1000, stream);
  stream.synchronize();
  EXPECT_EQ(pinned[999], 2998);
}

// A moved (or swapped) buffer keeps its capacity: shrinking and growing back within it must not
// reallocate (a cudaFree in a pipelined loop waits for every copy in flight).
TEST(GpuRuntime, MovedBuffersKeepTheirCapacity) {
  MOLACCEL_REQUIRE_GPU();
  cuda::DeviceBuffer<int> a(1000), b(10);
  a.resize(100);
  const int* original = a.data();
  std::swap(a, b);
  EXPECT_EQ(b.data(), original);
  EXPECT_EQ(b.size(), 100u);
  b.resize(1000);
  EXPECT_EQ(b.data(), original);
  cuda::DeviceBuffer<int> c(std::move(b));
  c.resize(900);
  EXPECT_EQ(c.data(), original);
  EXPECT_EQ(b.data(), nullptr);
  b.resize(5);  // a moved-from buffer allocates afresh
  EXPECT_NE(b.data(), nullptr);
}

TEST(GpuRuntime, OutOfMemoryIsACudaErrorThatSaysSo) {
  MOLACCEL_REQUIRE_GPU();
  try {
    cuda::DeviceBuffer<char> huge(std::size_t{1} << 50);
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_TRUE(e.is_out_of_memory()) << e.what();
  }
  cuda::DeviceBuffer<int> fine(10);  // the device is still usable afterwards
  EXPECT_EQ(fine.size(), 10u);
}

TEST(GpuRuntime, JitKernelLoadsAndRuns) {
  MOLACCEL_REQUIRE_GPU();
  MOLACCEL_REQUIRE_NVRTC();
  testing::TempDir dir;
  JitCache cache(dir.path());
  JitRequest r;
  r.program_name = "jit_axpy.cu";
  r.source = R"(
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";
  r.kernel_names = {"axpy<double>"};
  auto program = cache.compile(r);  // arch from the GPU
  EXPECT_EQ(program.arch, gpu_list().front().arch());
  cuda::LoadedProgram loaded(program);
  const int n = 1234;
  std::vector<double> x(n), y(n);
  std::iota(x.begin(), x.end(), 0.0);
  std::fill(y.begin(), y.end(), 1.0);
  cuda::DeviceBuffer<double> dx, dy;
  dx.upload(x);
  dy.upload(y);
  cuda::launch(loaded.kernel("axpy<double>"), dim3((n + 127) / 128), dim3(128), 0, nullptr, n, 2.0,
               static_cast<const double*>(dx.data()), dy.data());
  auto out = dy.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], 2.0 * i + 1.0);
  EXPECT_THROW(loaded.kernel("missing"), Error);
}

TEST(GpuRuntime, GpuWorkersRunTilesAndFailedTilesMoveToTheCpu) {
  MOLACCEL_REQUIRE_GPU();
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  o.cpu_worker_with_gpus = true;
  auto r = Resources::create(o);
  ASSERT_TRUE(r.uses_gpu());
  std::atomic<int> gpu_tiles{0}, cpu_tiles{0};
  std::vector<std::atomic<int>> done_on_gpu(32);
  JobOptions options;
  // Every fourth tile fails on a GPU worker (as an out-of-memory tile would); the CPU worker is
  // slowed down so that the GPU certainly meets some of them first.
  options.inject_fault = [](const WorkerInfo& w, std::size_t tile, int) {
    return w.kind == WorkerInfo::Kind::gpu && tile % 4 == 3;
  };
  auto stats = run_tiles(
      r, 32,
      [&](WorkerContext& ctx, std::size_t tile) {
        if (ctx.worker().kind == WorkerInfo::Kind::gpu) {
          int device = -1;
          MOLACCEL_CUDA_TRY(cudaGetDevice(&device));
          EXPECT_EQ(device, ctx.worker().device);
          auto& buf = ctx.local<cuda::DeviceBuffer<int>>(256);
          iota_kernel<<<1, 256>>>(256, buf.data());
          MOLACCEL_CUDA_CHECK_LAUNCH("iota_kernel");
          MOLACCEL_CUDA_TRY(cudaDeviceSynchronize());
          done_on_gpu[tile] = 1;
          gpu_tiles++;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          cpu_tiles++;
        }
      },
      options);
  EXPECT_EQ(gpu_tiles + cpu_tiles, 32);
  EXPECT_GE(stats.retries, 1u);
  EXPECT_GE(cpu_tiles.load(), 1);
  for (std::size_t t = 3; t < 32; t += 4) EXPECT_EQ(done_on_gpu[t].load(), 0) << "tile " << t;
}

}  // namespace
}  // namespace molaccel

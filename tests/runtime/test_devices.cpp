#include <cstring>

#include "testing/testing.hpp"

namespace molaccel {
namespace {

TEST(DeviceSpec, ParsesEveryForm) {
  EXPECT_EQ(DeviceSpec::parse("auto").kind, DeviceSpec::Kind::automatic);
  EXPECT_EQ(DeviceSpec::parse("cpu").kind, DeviceSpec::Kind::cpu);
  auto all = DeviceSpec::parse("gpu");
  EXPECT_EQ(all.kind, DeviceSpec::Kind::gpu);
  EXPECT_TRUE(all.gpu_ids.empty());
  auto some = DeviceSpec::parse("gpu:0,2");
  EXPECT_EQ(some.kind, DeviceSpec::Kind::gpu);
  EXPECT_EQ(some.gpu_ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(some.to_string(), "gpu:0,2");
  EXPECT_EQ(DeviceSpec::parse("gpu:3").gpu_ids, std::vector<int>{3});
}

TEST(DeviceSpec, RejectsMalformedSpecs) {
  for (const char* bad :
       {"", "GPU", "gpu:", "gpu:a", "gpu:1,", "gpu:-1", "gpu:1,1", "tpu", "gpu:1;2", "cpu:0"}) {
    EXPECT_THROW(DeviceSpec::parse(bad), InputError) << bad;
  }
  try {
    DeviceSpec::parse("gpu:x");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--device"), std::string::npos);
  }
}

TEST(Devices, CpuInfoIsSane) {
  const auto& c = cpu_info();
  EXPECT_GE(c.logical_cores, 1);
  EXPECT_FALSE(c.model.empty());
  EXPECT_FALSE(to_string(c.simd).empty());
}

TEST(Devices, CpuResources) {
  auto r = Resources::cpu(2);
  EXPECT_FALSE(r.uses_gpu());
  EXPECT_TRUE(r.uses_cpu());
  EXPECT_EQ(r.cpu_threads(), 2);
  ASSERT_EQ(r.pool().workers().size(), 1u);
  EXPECT_EQ(r.pool().workers()[0].kind, WorkerInfo::Kind::cpu);
  EXPECT_EQ(r.describe(), "cpu (2 threads)");
}

TEST(Devices, GpuRequestWithoutGpuIsAnErrorNeverASilentCpuRun) {
  if (testing::gpu_available()) GTEST_SKIP() << "this machine has a GPU";
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  if (build_info().cuda) {
    EXPECT_THROW(Resources::create(o), DeviceUnavailable);
  } else {
    EXPECT_THROW(Resources::create(o), NotCompiled);
  }
  EXPECT_FALSE(gpu_absence_reason().empty());
}

TEST(Devices, AutoFallsBackToCpuWithoutGpu) {
  if (testing::gpu_available()) GTEST_SKIP() << "this machine has a GPU";
  Resources::Options o;
  auto r = Resources::create(o);
  EXPECT_FALSE(r.uses_gpu());
  EXPECT_TRUE(r.uses_cpu());
}

TEST(Devices, BuildInfo) {
  const auto& b = build_info();
  EXPECT_FALSE(b.version.empty());
#ifdef MOLACCEL_HAVE_CUDA
  EXPECT_TRUE(b.cuda);
  EXPECT_FALSE(b.cuda_archs.empty());
#else
  EXPECT_FALSE(b.cuda);
#endif
}

}  // namespace
}  // namespace molaccel

namespace molaccel {
namespace {

// Page-locked where a driver is usable, ordinary memory otherwise; writable either way.
TEST(HostBuffer, AllocatesWritableMemoryWithOrWithoutAGpu) {
  const auto empty = allocate_host_buffer(0);
  EXPECT_EQ(empty.bytes, 0u);
  auto buffer = allocate_host_buffer(1 << 20);
  ASSERT_TRUE(buffer.data);
  EXPECT_EQ(buffer.bytes, std::size_t{1} << 20);
  std::memset(buffer.data.get(), 7, buffer.bytes);
  EXPECT_EQ(static_cast<int>(buffer.data.get()[buffer.bytes - 1]), 7);
  if (gpu_list().empty()) {
    EXPECT_FALSE(buffer.page_locked);
  }
}

}  // namespace
}  // namespace molaccel

namespace molaccel {
namespace {

TEST(ComputeBackend, ParsesEveryNameAndRejectsOthers) {
  for (auto b :
       {ComputeBackend::automatic, ComputeBackend::reference, ComputeBackend::cpu, ComputeBackend::cuda})
    EXPECT_EQ(parse_compute_backend(to_string(b)), b);
  EXPECT_EQ(parse_compute_backend("gpu"), ComputeBackend::cuda);
  EXPECT_THROW(parse_compute_backend("fpga"), InputError);
}

}  // namespace
}  // namespace molaccel

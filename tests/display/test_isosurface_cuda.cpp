// The CUDA isosurface against the CPU path: the same arrays (indices, edge ids) and bit-identical
// vertices (both run surface_math.hpp's float operations, the device without contraction); the
// device-grid entry point as the orbital pipeline will call it. Skipped without a GPU.
#include <cstring>

#include "display/backends.hpp"
#include "display_test_util.hpp"

namespace molaccel::display {
namespace {

using test::Field;

Resources gpu_resources() {
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  o.cpu_threads = 2;
  return Resources::create(o);
}

void expect_identical(const Mesh& gpu, const Mesh& cpu) {
  ASSERT_EQ(gpu.indices, cpu.indices);
  ASSERT_EQ(gpu.edge_ids, cpu.edge_ids);
  ASSERT_EQ(gpu.positions.size(), cpu.positions.size());
  EXPECT_EQ(std::memcmp(gpu.positions.data(), cpu.positions.data(), cpu.positions.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(gpu.normals.data(), cpu.normals.data(), cpu.normals.size() * sizeof(float)), 0);
}

TEST(DisplayCuda, SameMeshAsCpuOnSpheresLobesAndRandomFields) {
  MOLACCEL_REQUIRE_GPU();
  const Resources gpu = gpu_resources();
  const Resources cpu = Resources::cpu(2);
  {
    Field f;
    test::fill_gaussian(f, {61, 63, 59}, 0.1, {-3.0, -3.1, -2.9}, {0.013, -0.021, 0.007}, 1.0);
    expect_identical(extract_isosurface(gpu, f.grid, 0.05f, Inside::above, SurfaceBackend::cuda),
                     extract_isosurface(cpu, f.grid, 0.05f, Inside::above, SurfaceBackend::cpu));
  }
  {
    Field f;
    test::fill_gaussian(f, {50, 41, 41}, 0.12, {-3.0, -2.4, -2.4}, {0, 0, 0}, 1.0, true);
    for (Inside side : {Inside::above, Inside::below}) {
      const float level = side == Inside::above ? 0.05f : -0.05f;
      const Mesh m = extract_isosurface(gpu, f.grid, level, side, SurfaceBackend::cuda);
      EXPECT_EQ(test::closed_surface_problem(m), "");
      expect_identical(m, extract_isosurface(cpu, f.grid, level, side, SurfaceBackend::cpu));
    }
  }
  const std::array<std::array<double, 3>, 3> skewed{{{0.3, 0.05, 0}, {0.04, 0.25, 0}, {0.02, 0.03, 0.2}}};
  const std::array<std::array<double, 3>, 3> left_handed{{{0, 0.25, 0}, {0.3, 0, 0}, {0, 0, 0.2}}};
  std::uint32_t seed = 40;
  for (const auto& axes : {skewed, left_handed})
    // Past a 256-thread block, odd sizes, and a thin grid.
    for (std::array<std::size_t, 3> counts :
         {std::array<std::size_t, 3>{2, 2, 2}, {37, 29, 131}, {3, 300, 2}}) {
      Field f;
      test::fill_random(f, counts, ++seed, axes);
      for (float level : {0.0f, 0.7f}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " level " << level);
        expect_identical(extract_isosurface(gpu, f.grid, level, Inside::above, SurfaceBackend::cuda),
                         extract_isosurface(cpu, f.grid, level, Inside::above, SurfaceBackend::cpu));
      }
    }
}

// The entry point the orbital pipeline will call with its device grid, on a worker context made by
// hand: scratch kept between calls (a large grid, then a smaller one, then the large one again).
TEST(DisplayCuda, DeviceGridEntryPointWithKeptScratch) {
  MOLACCEL_REQUIRE_GPU();
  WorkerInfo gpu;
  gpu.kind = WorkerInfo::Kind::gpu;
  gpu.device = 0;
  WorkerContext ctx(gpu);
  const Resources cpu = Resources::cpu(2);
  Field big, small;
  test::fill_gaussian(big, {64, 70, 66}, 0.1, {-3.2, -3.5, -3.3}, {0.01, 0.02, -0.03}, 1.0, true);
  test::fill_random(small, {9, 8, 7}, 5, {{{0.3, 0, 0}, {0, 0.25, 0}, {0, 0, 0.2}}});
  for (const Field* f : {&big, &small, &big}) {
    const auto geometry = detail::make_geometry(f->grid, 0.05f, Inside::above);
    const float* on_device = cuda::upload_grid(ctx, f->values.data(), f->values.size());
    expect_identical(cuda::extract_isosurface_on_device(ctx, geometry, on_device),
                     extract_isosurface(cpu, f->grid, 0.05f, Inside::above, SurfaceBackend::cpu));
  }
}

// Both phases in one pass (the frame loop's call): each level's mesh equals the CPU path's, on
// random fields with skewed and left-handed axes and sizes past a block and a thin grid.
TEST(DisplayCuda, BothLevelsInOnePassMatchTheCpu) {
  MOLACCEL_REQUIRE_GPU();
  WorkerInfo gpu;
  gpu.kind = WorkerInfo::Kind::gpu;
  gpu.device = 0;
  WorkerContext ctx(gpu);
  const Resources cpu = Resources::cpu(2);
  const std::array<std::array<double, 3>, 3> skewed{{{0.3, 0.05, 0}, {0.04, 0.25, 0}, {0.02, 0.03, 0.2}}};
  const std::array<std::array<double, 3>, 3> left_handed{{{0, 0.25, 0}, {0.3, 0, 0}, {0, 0, 0.2}}};
  std::uint32_t seed = 90;
  for (const auto& axes : {skewed, left_handed})
    for (std::array<std::size_t, 3> counts :
         {std::array<std::size_t, 3>{2, 2, 2}, {37, 29, 131}, {3, 300, 2}, {64, 64, 64}}) {
      Field f;
      test::fill_random(f, counts, ++seed, axes);
      for (float iso : {0.0f, 0.3f}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " iso " << iso);
        const detail::GridGeometry levels[2] = {detail::make_geometry(f.grid, iso, Inside::above),
                                                detail::make_geometry(f.grid, -iso, Inside::below)};
        const float* on_device = cuda::upload_grid(ctx, f.values.data(), f.values.size());
        const cuda::DeviceSurfaces both = cuda::extract_surfaces_on_device(ctx, levels, 2, on_device);
        expect_identical(cuda::download(both.mesh[0]),
                         extract_isosurface(cpu, f.grid, iso, Inside::above, SurfaceBackend::cpu));
        expect_identical(cuda::download(both.mesh[1]),
                         extract_isosurface(cpu, f.grid, -iso, Inside::below, SurfaceBackend::cpu));
      }
    }
}

TEST(DisplayCuda, NoCrossingIsAnEmptyMesh) {
  MOLACCEL_REQUIRE_GPU();
  Field f;
  test::fill_gaussian(f, {10, 10, 10}, 0.2, {-1, -1, -1}, {0, 0, 0}, 1.0);
  EXPECT_TRUE(extract_isosurface(gpu_resources(), f.grid, 2.0f, Inside::above, SurfaceBackend::cuda).empty());
}

}  // namespace
}  // namespace molaccel::display

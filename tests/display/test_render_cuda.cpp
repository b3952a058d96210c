// The CUDA rasteriser against the CPU one, and the GPU frame loop (grid in device memory -> both
// surfaces on the device -> image) against the CPU path. Skipped without a GPU.
//
// Tolerance: both renderers cover the same samples (camera.hpp's double-precision edge functions,
// compiled without contraction on both sides) and shade with the same operations, so a pixel can
// differ only (a) by one level where device and host libm round pow/sqrt differently across a
// rounding boundary of the final byte, and (b) where two fragments reach a sample at equal float
// depth and the renderers keep different ones: the CPU keeps a later fragment whose double depth
// is above the earlier one's stored float, the GPU the first in scene order at equal float depth.
// (b) happens on the shared edges of a surface's triangles (the two normals agree there up to
// rounding: again about one level) and where two surfaces touch. So: every channel within one level
// except on at most 0.5% of the pixels (edge samples), and a mean difference below 0.05 levels.
#include <cstdlib>

#include "display/render/render_backends.hpp"
#include "display_test_util.hpp"
#include "molaccel/orbital.hpp"
#if MOLACCEL_HAVE_CUDA
#include "orbital/cuda/orbital_cuda.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/tuning.hpp"
#endif

namespace molaccel::display {
namespace {

Resources gpu_resources() {
  Resources::Options o;
  o.device = DeviceSpec::parse("gpu");
  o.cpu_threads = 2;
  return Resources::create(o);
}

Scene lobes_and_atoms() {
  Scene scene = test::lobe_pair_scene();
  // Water-like atoms in the middle: spheres cut by cylinders and by the lobes.
  for (ScenePart& part :
       ball_and_stick({{0, 0, 0.2}, {0.0, 1.4, -0.9}, {0.0, -1.4, -0.9}}, {8, 1, 1}, 0.529177210903))
    scene.parts.push_back(std::move(part));
  return scene;
}

struct Difference {
  int max = 0;
  double mean = 0, over_one = 0;  // mean per channel; fraction of pixels with a channel off by > 1
};
Difference compare(const Image& a, const Image& b) {
  Difference d;
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.rgba.size(), b.rgba.size());
  if (a.rgba.size() != b.rgba.size()) return {255, 255, 1};
  std::size_t over = 0;
  double sum = 0;
  for (std::size_t p = 0; p < a.rgba.size() / 4; ++p) {
    int worst = 0;
    for (int k = 0; k < 4; ++k) {
      const int diff = std::abs(int(a.rgba[4 * p + k]) - int(b.rgba[4 * p + k]));
      worst = std::max(worst, diff);
      sum += diff;
    }
    d.max = std::max(d.max, worst);
    if (worst > 1) ++over;
  }
  d.mean = sum / static_cast<double>(a.rgba.size());
  d.over_one = static_cast<double>(over) / static_cast<double>(a.rgba.size() / 4);
  return d;
}

void expect_close(const Image& gpu, const Image& cpu) {
  const Difference d = compare(gpu, cpu);
  EXPECT_LE(d.over_one, 0.005) << "max " << d.max << ", mean " << d.mean;
  EXPECT_LT(d.mean, 0.05) << "max " << d.max << ", fraction over one level " << d.over_one;
}

TEST(RenderCuda, MatchesTheCpuRasteriser) {
  MOLACCEL_REQUIRE_GPU();
  const Scene scene = lobes_and_atoms();
  for (const char* view : {"", "rx=-30,ry=25", "rx=70,ry=-140,rz=10,zoom=1.7", "zoom=6"})
    for (auto [w, h, ss] : {std::array<int, 3>{320, 240, 2}, {257, 131, 3}, {96, 200, 1}}) {
      SCOPED_TRACE(::testing::Message() << "view '" << view << "' " << w << "x" << h << " ss " << ss);
      RenderOptions options;
      options.width = w;
      options.height = h;
      options.supersampling = ss;
      if (*view) options.view = parse_view(view);
      options.backend = RenderBackend::cpu;
      const Image cpu = render_scene(scene, options);
      options.backend = RenderBackend::cuda;
      expect_close(render_scene(scene, options), cpu);
    }
}

// The framing fitted on the device is framing_of's, exactly: the same image as with it given.
TEST(RenderCuda, DeviceFramingIsTheHostFraming) {
  MOLACCEL_REQUIRE_GPU();
  const Scene scene = lobes_and_atoms();
  RenderOptions options;
  options.width = 200;
  options.height = 150;
  options.backend = RenderBackend::cuda;
  const Image fitted = render_scene(scene, options);
  options.framing = framing_of(scene);
  EXPECT_EQ(render_scene(scene, options).rgba, fitted.rgba);
  // A given framing is kept: a larger sphere draws the scene smaller.
  options.framing.radius *= 2;
  options.backend = RenderBackend::cpu;
  const Image cpu = render_scene(scene, options);
  options.backend = RenderBackend::cuda;
  expect_close(render_scene(scene, options), cpu);
}

TEST(RenderCuda, ResourcesPickTheGpuAutomatically) {
  MOLACCEL_REQUIRE_GPU();
  const Scene scene = lobes_and_atoms();
  RenderOptions options;
  options.width = 120;
  options.height = 90;
  RenderInfo info;
  const Image gpu = render_scene(gpu_resources(), scene, options, &info);
  EXPECT_EQ(info.backend, "cuda");
  expect_close(gpu, render_scene(Resources::cpu(2), scene, options));
}

// The frame loop's path: a grid in device memory, both surfaces in one pass kept on the device
// (each equal to the CPU path's mesh), drawn from there with the molecule from the host: the same
// image as the CUDA renderer gives for the CPU meshes (the same triangles in the same order).
TEST(RenderCuda, DeviceSurfacesDrawnWhereTheyAre) {
  MOLACCEL_REQUIRE_GPU();
  test::Field f;
  test::fill_gaussian(f, {60, 47, 45}, 0.11, {-3.3, -2.5, -2.4}, {0.02, -0.01, 0.03}, 1.0, true);
  const Resources cpu = Resources::cpu(2);
  const Mesh positive = extract_isosurface(cpu, f.grid, 0.05f, Inside::above, SurfaceBackend::cpu);
  const Mesh negative = extract_isosurface(cpu, f.grid, -0.05f, Inside::below, SurfaceBackend::cpu);
  Scene molecule;
  molecule.parts = ball_and_stick({{0, 0, 0}, {1.5, 0, 0}}, {6, 8}, 0.529177210903);

  WorkerInfo worker;
  worker.kind = WorkerInfo::Kind::gpu;
  worker.device = 0;
  WorkerContext ctx(worker);
  const detail::GridGeometry levels[2] = {detail::make_geometry(f.grid, 0.05f, Inside::above),
                                          detail::make_geometry(f.grid, -0.05f, Inside::below)};
  const float* grid = cuda::upload_grid(ctx, f.values.data(), f.values.size());
  RenderOptions options;
  options.width = 300;
  options.height = 200;
  options.view = parse_view("rx=20,ry=-35");
  Image from_device;
  for (int frame = 0; frame < 3; ++frame) {  // kept buffers reused from frame to frame
    const cuda::DeviceSurfaces surfaces = cuda::extract_surfaces_on_device(ctx, levels, 2, grid);
    ASSERT_EQ(surfaces.count, 2);
    const Mesh down[2] = {cuda::download(surfaces.mesh[0]), cuda::download(surfaces.mesh[1])};
    EXPECT_EQ(down[0].indices, positive.indices);
    EXPECT_EQ(down[0].edge_ids, positive.edge_ids);
    EXPECT_EQ(down[0].positions, positive.positions);
    EXPECT_EQ(down[0].normals, positive.normals);
    EXPECT_EQ(down[1].indices, negative.indices);
    EXPECT_EQ(down[1].edge_ids, negative.edge_ids);
    EXPECT_EQ(down[1].positions, negative.positions);
    EXPECT_EQ(down[1].normals, negative.normals);
    from_device = cuda::render_on_device(
        ctx, {{surfaces.mesh[0], positive_phase_colour()}, {surfaces.mesh[1], negative_phase_colour()}},
        molecule, options);
  }
  Scene host;
  host.parts.push_back({"positive lobe", positive, positive_phase_colour()});
  host.parts.push_back({"negative lobe", negative, negative_phase_colour()});
  for (const ScenePart& part : molecule.parts) host.parts.push_back(part);
  options.backend = RenderBackend::cuda;
  EXPECT_EQ(render_scene(host, options).rgba, from_device.rgba);
  options.backend = RenderBackend::cpu;
  expect_close(from_device, render_scene(host, options));
}

// The commands' device path: the orbital kernel writes the grid into device memory, orbital after
// orbital on one worker (the device state keeps the basis and takes each orbital's coefficients;
// the first orbital again at the end), and the surfaces come from it. Each grid matches the
// library's GPU grid of that orbital (same kernel; float rounding allowed, a stale orbital would be
// off by the orbitals' difference), and the surfaces equal the CPU path's on that very grid.
TEST(RenderCuda, OrbitalGridsOnTheDeviceOrbitalAfterOrbital) {
  MOLACCEL_REQUIRE_GPU();
#if MOLACCEL_HAVE_CUDA  // the orbital engine's device entry point exists in CUDA builds only
  using namespace molaccel::orbital;
  const Wavefunction wfn =
      read_wavefunction(molaccel::testing::source_dir() / "data/orbital/h2o_631gs.molden");
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.2);
  const orbital::detail::PackedBasis basis =
      orbital::detail::pack_basis(wfn, EvaluateOptions{}.screening_tolerance);
  WorkerInfo worker;
  worker.kind = WorkerInfo::Kind::gpu;
  worker.device = 0;
  WorkerContext ctx(worker);
  const Resources gpu = gpu_resources();
  const Resources cpu = Resources::cpu(2);
  const float unused = 0;
  const ScalarGrid shape{grid.origin, grid.axes, grid.counts, &unused};
  const display::detail::GridGeometry levels[2] = {
      display::detail::make_geometry(shape, 0.05f, Inside::above),
      display::detail::make_geometry(shape, -0.05f, Inside::below)};
  for (const char* name : {"homo", "lumo", "homo-1", "homo"}) {
    SCOPED_TRACE(name);
    const OrbitalRef ref = parse_orbital(name, wfn);
    const std::vector<float> coefficients = orbital::detail::cartesian_coefficients(wfn, {ref});
    cuda_backend::GpuJob job;
    job.basis = &basis;
    job.coefficients = coefficients.data();
    job.orbitals = 1;
    job.grid = &grid;
    job.tuning = orbital::detail::tuning_for(0, {1, false});
    job.basis_id = 1ull << 63 | 1;
    job.coefficients_id = 1ull << 63 | (ref.index + 1);
    float* values = cuda::device_grid(ctx, grid.point_count());
    void* stream = cuda_backend::evaluate_on_device(ctx, job, values);
    const cuda::DeviceSurfaces both = cuda::extract_surfaces_on_device(ctx, levels, 2, values, stream);
    const std::vector<float> on_device = cuda::download_grid(ctx, values, grid.point_count());
    EvaluateOptions library;
    library.backend = Backend::cuda_jit;
    const std::vector<float> expected = evaluate_orbitals(gpu, wfn, grid, {ref}, library);
    ASSERT_EQ(on_device.size(), expected.size());
    float largest = 0, worst = 0;
    for (std::size_t p = 0; p < expected.size(); ++p) {
      largest = std::max(largest, std::abs(expected[p]));
      worst = std::max(worst, std::abs(on_device[p] - expected[p]));
    }
    EXPECT_LE(worst, 1e-5f * largest);
    const ScalarGrid host{grid.origin, grid.axes, grid.counts, on_device.data()};
    EXPECT_EQ(cuda::download(both.mesh[0], stream).indices,
              extract_isosurface(cpu, host, 0.05f, Inside::above, SurfaceBackend::cpu).indices);
    EXPECT_EQ(cuda::download(both.mesh[1], stream).positions,
              extract_isosurface(cpu, host, -0.05f, Inside::below, SurfaceBackend::cpu).positions);
  }
#endif
}

// One level per call and a grid without a crossing at one of two levels.
TEST(RenderCuda, OneLevelAndAnEmptyLevel) {
  MOLACCEL_REQUIRE_GPU();
  test::Field f;
  test::fill_gaussian(f, {30, 30, 30}, 0.2, {-3, -3, -3}, {0, 0, 0}, 1.0);  // positive everywhere
  WorkerInfo worker;
  worker.kind = WorkerInfo::Kind::gpu;
  worker.device = 0;
  WorkerContext ctx(worker);
  const float* grid = cuda::upload_grid(ctx, f.values.data(), f.values.size());
  const detail::GridGeometry levels[2] = {detail::make_geometry(f.grid, 0.05f, Inside::above),
                                          detail::make_geometry(f.grid, -0.05f, Inside::below)};
  const cuda::DeviceSurfaces both = cuda::extract_surfaces_on_device(ctx, levels, 2, grid);
  EXPECT_GT(both.mesh[0].triangles, 0u);
  EXPECT_EQ(both.mesh[1].triangles, 0u);
  EXPECT_EQ(both.mesh[1].vertices, 0u);
  EXPECT_TRUE(cuda::download(both.mesh[1]).empty());
  const Mesh one = cuda::download(cuda::extract_surfaces_on_device(ctx, levels, 1, grid).mesh[0]);
  EXPECT_EQ(one.indices,
            extract_isosurface(Resources::cpu(2), f.grid, 0.05f, Inside::above, SurfaceBackend::cpu).indices);
}

}  // namespace
}  // namespace molaccel::display

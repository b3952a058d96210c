// The display pipeline's GPU path (grid, surfaces and image in one GPU's memory per item) against
// its host path on the same GPUs (grid copied to the host, CPU surfaces): orbitals, a negated
// orbital and a density; the same items spread over every GPU give the same results as on one.
// Skipped without a GPU.
#include <cstdlib>

#include "display_test_util.hpp"
#include "molaccel/orbital_display.hpp"

namespace molaccel::orbital {
namespace {

namespace display = molaccel::display;

Resources gpus(const std::string& spec) {
  Resources::Options o;
  o.device = DeviceSpec::parse(spec);
  o.cpu_threads = 2;
  return Resources::create(o);
}

Wavefunction water() {
  return read_wavefunction(molaccel::testing::source_dir() / "data/orbital/h2o_631gs.molden");
}

std::vector<DisplayItem> items_of(const Wavefunction& wfn) {
  const OrbitalRef homo = parse_orbital("homo", wfn);
  return {{&wfn, orbital_field(homo)},
          {&wfn, orbital_field(parse_orbital("lumo", wfn))},
          {&wfn, orbital_field(homo, true)},
          {&wfn, density_field(DensityKind::total)}};
}

// The two paths' grids come from the same kernels launched over different chunks of planes, equal
// to float rounding (test_render_cuda: 1e-5 of the largest value); only points within that of the
// isovalue can change the surface, so the triangle counts agree to well within 0.5%.
void expect_close(std::size_t a, std::size_t b) {
  EXPECT_LE(std::abs(static_cast<double>(a) - static_cast<double>(b)), 0.005 * static_cast<double>(b) + 2)
      << a << " vs " << b;
}

TEST(DisplayPipelineCuda, DevicePathMatchesTheHostPath) {
  MOLACCEL_REQUIRE_GPU();
  const Resources gpu = gpus("gpu:0");
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.15);
  const std::vector<DisplayItem> items = items_of(wfn);
  DisplayOptions options;
  options.framing = true;
  options.image = true;
  options.render.width = 160;
  options.render.height = 120;
  DisplayInfo device_info, host_info;
  const auto device = display_fields(gpu, items, grid, options, &device_info);
  EXPECT_TRUE(device_info.on_device);
  EXPECT_EQ(device_info.surface_backend, "cuda");
  DisplayOptions host_options = options;
  host_options.surface_backend = display::SurfaceBackend::cpu;
  const auto host = display_fields(gpu, items, grid, host_options, &host_info);
  EXPECT_FALSE(host_info.on_device);
  ASSERT_EQ(device.size(), items.size());
  ASSERT_EQ(host.size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    SCOPED_TRACE(i);
    expect_close(device[i].positive_triangles, host[i].positive_triangles);
    expect_close(device[i].negative_triangles, host[i].negative_triangles);
    ASSERT_EQ(device[i].scene.parts.size(), host[i].scene.parts.size());
    for (std::size_t p = 0; p < host[i].scene.parts.size(); ++p) {
      EXPECT_EQ(device[i].scene.parts[p].name, host[i].scene.parts[p].name);
      expect_close(device[i].scene.parts[p].mesh.triangle_count(),
                   host[i].scene.parts[p].mesh.triangle_count());
      EXPECT_NEAR(display::mesh_area(device[i].scene.parts[p].mesh),
                  display::mesh_area(host[i].scene.parts[p].mesh),
                  0.005 * display::mesh_area(host[i].scene.parts[p].mesh));
    }
    EXPECT_NEAR(device[i].framing.radius, host[i].framing.radius, 1e-3 * host[i].framing.radius);
    // Pictures: the renderers' tie rule and the grids' rounding move a few edge samples by a shade.
    ASSERT_EQ(device[i].image.rgba.size(), host[i].image.rgba.size());
    double sum = 0;
    for (std::size_t b = 0; b < host[i].image.rgba.size(); ++b)
      sum += std::abs(int(device[i].image.rgba[b]) - int(host[i].image.rgba[b]));
    EXPECT_LT(sum / static_cast<double>(host[i].image.rgba.size()), 1.0);
  }
  // Negated coefficients give exactly the negated grid: the lobes swap.
  EXPECT_EQ(device[2].positive_triangles, device[0].negative_triangles);
  EXPECT_EQ(device[2].negative_triangles, device[0].positive_triangles);
  EXPECT_EQ(device[3].scene.parts[0].name, "surface");
  EXPECT_EQ(device[3].negative_triangles, 0u);
  // No surface: the first item in order is named, as on the host path.
  options.iso = 50;
  EXPECT_THROW((void)display_fields(gpu, items, grid, options), InputError);
}

TEST(DisplayPipelineCuda, EveryGpuGivesTheResultsOfOne) {
  MOLACCEL_REQUIRE_GPU();
  const Resources all = gpus("gpu");
  if (all.gpus().size() < 2) GTEST_SKIP() << "one GPU";
  const Resources one = gpus("gpu:0");
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.15);
  std::vector<DisplayItem> items;
  for (std::size_t i = 0; i < 8; ++i) items.push_back({&wfn, orbital_field({Spin::alpha, i}, i % 2 == 1)});
  DisplayOptions options;
  options.iso = 0.03;
  options.image = true;
  options.render.width = 64;
  options.render.height = 48;
  const auto a = display_fields(one, items, grid, options);
  const auto b = display_fields(all, items, grid, options);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(a[i].scene.parts.size(), b[i].scene.parts.size());
    for (std::size_t p = 0; p < a[i].scene.parts.size(); ++p)
      EXPECT_EQ(a[i].scene.parts[p].mesh.indices, b[i].scene.parts[p].mesh.indices);
    EXPECT_EQ(a[i].image.rgba, b[i].image.rgba);
  }
}

// Results kept from call to call: each image is drawn into the memory of the last call's image at
// its position (same pixels as a fresh call), a smaller batch shrinks the results, images dropped
// when the options ask for none.
TEST(DisplayPipelineCuda, KeptResultsDrawIntoTheirImages) {
  MOLACCEL_REQUIRE_GPU();
  const Resources gpu = gpus("gpu:0");
  const Wavefunction wfn = water();
  const GridSpec grid = automatic_grid(wfn, 3.0, 0.15);
  std::vector<DisplayItem> items;
  for (std::size_t i = 0; i < 4; ++i) items.push_back({&wfn, orbital_field({Spin::alpha, i})});
  DisplayOptions options;
  options.iso = 0.03;
  options.meshes = false;
  options.image = true;
  options.render.width = 64;
  options.render.height = 48;
  std::vector<DisplayResult> kept;
  display_fields(gpu, items, grid, options, kept);
  ASSERT_EQ(kept.size(), 4u);
  std::vector<const std::uint8_t*> memory;
  for (const DisplayResult& r : kept) memory.push_back(r.image.rgba.data());
  const std::vector<DisplayItem> reversed(items.rbegin(), items.rend());
  const auto fresh = display_fields(gpu, reversed, grid, options);
  display_fields(gpu, reversed, grid, options, kept);
  ASSERT_EQ(kept.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(kept[i].image.rgba.data(), memory[i]);
    EXPECT_EQ(kept[i].image.rgba, fresh[i].image.rgba);
    EXPECT_EQ(kept[i].positive_triangles, fresh[i].positive_triangles);
  }
  display_fields(gpu, {items[1]}, grid, options, kept);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].image.rgba, fresh[2].image.rgba);
  options.image = false;
  display_fields(gpu, {items[1]}, grid, options, kept);
  EXPECT_TRUE(kept[0].image.rgba.empty());
}

}  // namespace
}  // namespace molaccel::orbital

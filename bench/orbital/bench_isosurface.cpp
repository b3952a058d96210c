// The display loop's stages on the seed's case: C60 6-31G* HOMO on a 0.075 A grid (172^3 points),
// both phase surfaces at +/-0.05, one 1920x1080 image. Rows: the grid (the library's automatic
// backend), isosurface extraction on one CPU thread, on all threads and (with a GPU) on the device
// from a host grid (one upload per call included) and from a grid already in device memory, and the
// CPU renderer; then frames per second of the whole loop without video encoding. Checks that the CPU
// and GPU meshes are identical.
//
//   bench_orbital_isosurface [--quick] [--reference]
//     --quick: a 0.15 A grid; --reference: also time the double-precision reference (slow).
#include <cstring>

#include "c60_wavefunction.hpp"
#include "common/harness.hpp"
#include "display/backends.hpp"
#include "molaccel/display.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/tuning.hpp"
#if MOLACCEL_HAVE_CUDA
#include "display_on_device.hpp"
#endif

using namespace molaccel;

namespace {

struct Surfaces {
  display::Mesh positive, negative;
};

Surfaces both(const Resources& r, const display::ScalarGrid& grid, display::SurfaceBackend backend) {
  return {display::extract_isosurface(r, grid, 0.05f, display::Inside::above, backend),
          display::extract_isosurface(r, grid, -0.05f, display::Inside::below, backend)};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, reference = false;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--reference") {
      reference = true;
    } else {
      std::fprintf(stderr, "usage: bench_orbital_isosurface [--quick] [--reference]\n");
      return 2;
    }
  }
  const orbital::Wavefunction wfn = orbital::bench_data::c60_631gs(180);
  const orbital::GridSpec spec = orbital::automatic_grid(wfn, 3.0, quick ? 0.15 : 0.075);
  const std::string size = fmt::format("{}x{}x{}", spec.counts[0], spec.counts[1], spec.counts[2]);
  const double points = static_cast<double>(spec.point_count());
  Resources::Options auto_options;
  const Resources automatic = Resources::create(auto_options);
  const Resources cpu_all = Resources::cpu(0), cpu_one = Resources::cpu(1);
  const std::string cpu_name = cpu_info().model;
  std::printf("C60 6-31G* HOMO (generated coefficients), grid %s = %.0f points; surfaces at +/-0.05\n",
              size.c_str(), points);
  bench::print_header();

  // Stage 1: the grid.
  const orbital::OrbitalRef homo{orbital::Spin::alpha, 179};
  std::vector<float> values;
  orbital::EvaluationInfo info;
  const bench::Timing grid_time =
      bench::measure([&] { values = orbital::evaluate_orbitals(automatic, wfn, spec, {homo}, {}, &info); }, 1,
                     quick ? 3 : 5);
  bench::print_row({.benchmark = "display/grid/" + info.backend,
                    .device = automatic.describe(),
                    .size = size,
                    .timing = grid_time,
                    .work = points,
                    .work_unit = "points"});
  const display::ScalarGrid grid{spec.origin, spec.axes, spec.counts, values.data()};

  // Stage 2: both surfaces.
  Surfaces cpu_mesh;
  const bench::Timing one_thread =
      bench::measure([&] { cpu_mesh = both(cpu_one, grid, display::SurfaceBackend::cpu); }, 1, 3);
  const std::string triangles = fmt::format("{} + {} triangles", cpu_mesh.positive.triangle_count(),
                                            cpu_mesh.negative.triangle_count());
  bench::print_row({.benchmark = "display/isosurface/cpu",
                    .device = cpu_name + " (1 thread)",
                    .size = size,
                    .timing = one_thread,
                    .work = points,
                    .work_unit = "points",
                    .note = triangles});
  const bench::Timing all_threads =
      bench::measure([&] { cpu_mesh = both(cpu_all, grid, display::SurfaceBackend::cpu); }, 1, quick ? 3 : 5);
  bench::print_row({.benchmark = "display/isosurface/cpu",
                    .device = fmt::format("{} ({} threads)", cpu_name, cpu_all.cpu_threads()),
                    .size = size,
                    .timing = all_threads,
                    .work = points,
                    .work_unit = "points",
                    .note = triangles});
  bench::Timing surface_time = all_threads;
  int status = 0;
  if (automatic.uses_gpu()) {
    Surfaces gpu_mesh;
    const bench::Timing gpu_time =
        bench::measure([&] { gpu_mesh = both(automatic, grid, display::SurfaceBackend::cuda); }, 2, 9);
    bench::print_row({.benchmark = "display/isosurface/cuda (host grid, upload included)",
                      .device = automatic.describe(),
                      .size = size,
                      .timing = gpu_time,
                      .work = points,
                      .work_unit = "points",
                      .note = triangles});
    surface_time = gpu_time;
    // The grid already in device memory (as the orbital pipeline will hand it over): kernels,
    // scans, the two totals and the mesh copied back.
    WorkerInfo worker;
    worker.kind = WorkerInfo::Kind::gpu;
    worker.device = automatic.gpus().front();
    WorkerContext ctx(worker);
    const float* on_device = display::cuda::upload_grid(ctx, values.data(), values.size());
    const auto above = display::detail::make_geometry(grid, 0.05f, display::Inside::above);
    const auto below = display::detail::make_geometry(grid, -0.05f, display::Inside::below);
    const bench::Timing resident = bench::measure(
        [&] {
          (void)display::cuda::extract_isosurface_on_device(ctx, above, on_device);
          (void)display::cuda::extract_isosurface_on_device(ctx, below, on_device);
        },
        2, 9);
    bench::print_row({.benchmark = "display/isosurface/cuda (device grid)",
                      .device = automatic.describe(),
                      .size = size,
                      .timing = resident,
                      .work = points,
                      .work_unit = "points",
                      .note = triangles + ", mesh to host included"});
    const bool same = gpu_mesh.positive.indices == cpu_mesh.positive.indices &&
                      gpu_mesh.negative.indices == cpu_mesh.negative.indices &&
                      gpu_mesh.positive.positions == cpu_mesh.positive.positions &&
                      gpu_mesh.negative.normals == cpu_mesh.negative.normals;
    std::printf("cuda and cpu meshes identical: %s\n", same ? "yes" : "NO");
    if (!same) status = 1;
  }
#if MOLACCEL_HAVE_CUDA
  if (automatic.uses_gpu()) {
    // Grid kernel and both surfaces on one GPU, the grid never leaving device memory.
    const int device = automatic.gpus().front();
    const orbital::detail::PackedBasis basis = orbital::detail::pack_basis(wfn, 1e-9);
    const auto coefficients = orbital::detail::cartesian_coefficients(wfn, {homo});
    orbital::cuda_backend::GpuJob job;
    job.basis = &basis;
    job.coefficients = coefficients.data();
    job.orbitals = 1;
    job.grid = &spec;
    job.tuning = orbital::detail::tuning_for(device, {1, false});
    const auto above = display::detail::make_geometry(grid, 0.05f, display::Inside::above);
    const auto below = display::detail::make_geometry(grid, -0.05f, display::Inside::below);
    const bench_display::DeviceLoop loop =
        bench_display::time_device_loop(device, job, above, below, quick ? 5 : 11);
    std::printf(
        "on the GPU, grid in device memory: grid kernel %.3f ms, both surfaces %.3f ms (%zu + %zu triangles, "
        "meshes to the host included)\n",
        loop.grid_ms, loop.surfaces_ms, loop.positive.triangle_count(), loop.negative.triangle_count());
    // The JIT kernel's grid differs from the CPU grid by float rounding, so compare sizes, not bits.
    std::printf("device loop vs CPU mesh: %zu vs %zu triangles\n",
                loop.positive.triangle_count() + loop.negative.triangle_count(),
                cpu_mesh.positive.triangle_count() + cpu_mesh.negative.triangle_count());
  }
#endif
  if (reference) {
    const bench::Timing ref =
        bench::measure([&] { (void)both(cpu_one, grid, display::SurfaceBackend::reference); }, 0, 1);
    bench::print_row({.benchmark = "display/isosurface/reference",
                      .device = cpu_name + " (1 thread)",
                      .size = size,
                      .timing = ref,
                      .work = points,
                      .work_unit = "points"});
  }

  // Stage 3: one 1920x1080 image of both lobes (no atoms: the lobes are the work).
  display::Scene scene;
  scene.parts.push_back({"positive lobe", cpu_mesh.positive, display::positive_phase_colour()});
  scene.parts.push_back({"negative lobe", cpu_mesh.negative, display::negative_phase_colour()});
  display::RenderOptions render;
  render.width = 1920;
  render.height = 1080;
  const bench::Timing render_time = bench::measure([&] { (void)display::render_scene(scene, render); }, 1, 3);
  bench::print_row({.benchmark = "display/render/cpu",
                    .device = fmt::format("{} ({} threads)", cpu_name, cpu_all.cpu_threads()),
                    .size = "1920x1080 (2x2 samples)",
                    .timing = render_time,
                    .work = 1920.0 * 1080.0,
                    .work_unit = "pixels"});
  const double frame = grid_time.median_s + surface_time.median_s + render_time.median_s;
  std::printf(
      "one frame (grid + both surfaces + image): %.1f ms = %.2f frames/s (grid %.1f ms, surfaces %.1f ms, "
      "image %.1f ms)\n",
      frame * 1e3, 1.0 / frame, grid_time.median_s * 1e3, surface_time.median_s * 1e3,
      render_time.median_s * 1e3);
  return status;
}

// The display loop of issue 20 on the seed's case, frames per second: C60 6-31G*, a 0.075 A grid
// (172^3 points), one orbital per frame (HOMO, HOMO-1, ... in turn), both phase surfaces at
// +/-0.05, the molecule as balls and sticks, one 1920x1080 image (2x2 samples per pixel).
//
//   bench_orbital_display [--quick] [--cpu] [--frames N]
//     --quick: a 0.15 A grid and fewer frames; --cpu: the same job on the CPU only (grid, surfaces,
//     image on all cores, through the library's display pipeline, orbital::display_fields, one
//     frame per call); --frames N: frames per timed run (default 30).
//
// With a GPU, rows: the time of each stage on the GPU (grid kernel into device memory, both
// surfaces from it in one pass kept on the device, the CUDA image copied to the host; the host
// waits after each stage), frames/s of the whole loop without video encoding (stages back to
// back), frames/s into an MP4 (H.264 through FFmpeg, encoded on the writer's thread while the GPU
// makes the next frame); then the library call display_fields with the frames as scheduler tiles
// on 1 GPU and on every GPU of the machine (frames/s of each and the ratio, the results kept from
// call to call, and again with fresh image memory in every call; with an MP4 too where the build
// has FFmpeg), and the baseline in the same run: the CPU-image path (grid to the host,
// surfaces from the host grid, CPU rasteriser). Medians of repeated runs after warm-up frames.
// Frame 1 drawn both ways is compared (the fraction of pixels off by more than one level; the two
// paths' grids come from different launches of the orbital kernels, so this is a check of sense,
// not the renderers' tolerance test, which is tests/display/test_render_cuda.cpp).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include "c60_wavefunction.hpp"
#include "common/harness.hpp"
#include "display/render/render_backends.hpp"
#include "molaccel/display.hpp"
#include "molaccel/orbital_display.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/tuning.hpp"
#if MOLACCEL_HAVE_CUDA
#include "display_frames.hpp"
#endif

using namespace molaccel;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, cpu_only = false;
  int frames = 30;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--cpu") {
      cpu_only = true;
    } else if (arg == "--frames" && a + 1 < argc) {
      frames = std::max(1, std::atoi(argv[++a]));
    } else {
      std::fprintf(stderr, "usage: bench_orbital_display [--quick] [--cpu] [--frames N]\n");
      return 2;
    }
  }
  if (quick) frames = std::min(frames, 10);
  const orbital::Wavefunction wfn = orbital::bench_data::c60_631gs(180);
  const orbital::GridSpec spec = orbital::automatic_grid(wfn, 3.0, quick ? 0.15 : 0.075);
  const std::string size = fmt::format("{}x{}x{}", spec.counts[0], spec.counts[1], spec.counts[2]);
  const std::size_t points = spec.point_count();
  auto orbital_of_frame = [](int f) {
    return orbital::OrbitalRef{orbital::Spin::alpha, 179 - std::size_t(f % 20)};
  };
  auto items_of = [&](int first, int count) {
    std::vector<orbital::DisplayItem> items;
    for (int f = first; f < first + count; ++f)
      items.push_back({&wfn, orbital::orbital_field(orbital_of_frame(f))});
    return items;
  };

  // The frame of the library call: both surfaces at +/-0.05, balls and sticks, the image only.
  orbital::DisplayOptions pipeline;
  pipeline.iso = 0.05;
  pipeline.meshes = false;
  pipeline.image = true;
  pipeline.render.width = 1920;
  pipeline.render.height = 1080;
  const std::string image_size = "1920x1080 (2x2 samples)";
  std::printf(
      "C60 6-31G* (generated coefficients), grid %s = %zu points, one orbital per frame (HOMO, HOMO-1, "
      "...), surfaces at +/-0.05, balls and sticks, %s\n",
      size.c_str(), points, image_size.c_str());
  bench::print_header();

  // The host path of display_fields, one frame per call: the grid into host memory, surfaces from
  // it, the image (CPU rasteriser where `options` says so). With GPU resources and a CPU image it is
  // the baseline; with CPU resources, the CPU frame rate. Rows: its stages and frames/s.
  auto host_rate = [&](const Resources& r, const orbital::DisplayOptions& options, const std::string& device,
                       const std::string& name, int runs, int per_run) {
    (void)orbital::display_fields(r, items_of(0, 1), spec, options);  // warm-up
    std::vector<double> rates, cpu_seconds;
    std::vector<double> stage_s[3];
    for (int run = 0; run < runs; ++run) {
      double sums[3] = {0, 0, 0};
      const auto start = Clock::now();
      const std::clock_t cpu_start = std::clock();
      for (int f = 0; f < per_run; ++f) {
        orbital::DisplayInfo info;
        (void)orbital::display_fields(r, items_of(f, 1), spec, options, &info);
        sums[0] += info.grid_seconds;
        sums[1] += info.surface_seconds;
        sums[2] += info.render_seconds;
      }
      rates.push_back(per_run / since(start));
      cpu_seconds.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC / per_run);
      for (int s = 0; s < 3; ++s) stage_s[s].push_back(sums[s] / per_run);
    }
    const char* names[3] = {"grid to host", "surfaces from the host grid", "image"};
    for (int s = 0; s < 3; ++s)
      bench::print_row({.benchmark = fmt::format("display/{}/{}", name, names[s]),
                        .device = device,
                        .size = s == 2 ? image_size : size,
                        .timing = bench::summarise(stage_s[s]),
                        .work = 1,
                        .work_unit = "frames"});
    const double rate = median(rates);
    // The process's CPU time per frame: on a machine shared with other jobs, what the frame costs
    // the cores whatever the wall clock says.
    std::printf("%s (%s): %.2f frames/s (median of %d runs of %d frames); %.2f CPU-seconds per frame\n",
                name.c_str(), device.c_str(), rate, runs, per_run, median(cpu_seconds));
    return rate;
  };

  if (cpu_only) {
    const Resources cpu = Resources::cpu(0);
    orbital::DisplayOptions on_cpu = pipeline;
    on_cpu.render.backend = display::RenderBackend::cpu;
    host_rate(cpu, on_cpu,
              fmt::format("{} ({} threads, {} logical cores)", cpu_info().model, cpu.cpu_threads(),
                          std::thread::hardware_concurrency()),
              "cpu", 3, quick ? 2 : 3);
    return 0;
  }
  Resources::Options auto_options;
  const Resources automatic = Resources::create(auto_options);
  if (!automatic.uses_gpu()) {
    std::printf("no GPU: the GPU rows are skipped (give --cpu for the CPU frame rate)\n");
    return 0;
  }
#if MOLACCEL_HAVE_CUDA
  const display::RenderOptions& render = pipeline.render;
  const int device = automatic.gpus().front();
  const std::string gpu_name = automatic.describe();
  display::Scene molecule;  // bohr, like the grid
  {
    std::vector<std::array<double, 3>> positions;
    std::vector<int> numbers;
    for (const orbital::Atom& atom : wfn.atoms) {
      positions.push_back(atom.position);
      numbers.push_back(atom.atomic_number);
    }
    molecule.parts = display::ball_and_stick(positions, numbers, orbital::bohr_in_angstrom);
  }
  const orbital::detail::PackedBasis basis = orbital::detail::pack_basis(wfn, 1e-9);
  std::vector<std::vector<float>> coefficients;
  for (int o = 0; o < 20; ++o)
    coefficients.push_back(orbital::detail::cartesian_coefficients(wfn, {orbital_of_frame(o)}));
  orbital::cuda_backend::GpuJob job;
  job.basis = &basis;
  job.orbitals = 1;
  job.grid = &spec;
  job.tuning = orbital::detail::tuning_for(device, {1, false});
  auto job_for = [&](int f) {
    orbital::cuda_backend::GpuJob j = job;
    j.coefficients = coefficients[static_cast<std::size_t>(f % 20)].data();
    // Ids for the worker's device state (the top bit keeps them apart from the request cache's):
    // one basis, so each frame uploads only its orbital's coefficients.
    j.basis_id = 1ull << 63 | 1;
    j.coefficients_id = 1ull << 63 | static_cast<std::uint64_t>(f % 20 + 1);
    return j;
  };
  // The grid geometry of both levels (make_geometry checks a host pointer it never reads here).
  const float unused = 0;
  const display::ScalarGrid grid_shape{spec.origin, spec.axes, spec.counts, &unused};
  const display::detail::GridGeometry levels[2] = {
      display::detail::make_geometry(grid_shape, 0.05f, display::Inside::above),
      display::detail::make_geometry(grid_shape, -0.05f, display::Inside::below)};
  bench_display::GpuFrames gpu(device, points);
  const int warmup = 3;
  for (int f = 0; f < warmup; ++f) (void)gpu.frame(job_for(f), levels, molecule, render);

  // Stages, the host waiting after each.
  std::vector<double> stage_s[3];
  std::size_t triangles = 0;
  for (int f = 0; f < frames; ++f) {
    bench_display::StageSeconds s;
    (void)gpu.frame(job_for(f), levels, molecule, render, &s, f == 0 ? &triangles : nullptr);
    stage_s[0].push_back(s.grid);
    stage_s[1].push_back(s.surfaces);
    stage_s[2].push_back(s.image);
  }
  const char* names[3] = {"grid kernel (device memory)", "both surfaces (one pass, kept on the device)",
                          "image (cuda rasteriser, to the host)"};
  for (int s = 0; s < 3; ++s)
    bench::print_row({.benchmark = fmt::format("display/gpu loop/{}", names[s]),
                      .device = gpu_name,
                      .size = s == 2 ? image_size : size,
                      .timing = bench::summarise(stage_s[s]),
                      .work = 1,
                      .work_unit = "frames",
                      .note = s == 1 ? fmt::format("{} triangles (frame 1)", triangles) : ""});

  // The whole loop, stages back to back: without encoding, then into an MP4.
  const int runs = quick ? 3 : 5;
  std::vector<double> rates, video_rates;
  for (int run = 0; run < runs; ++run) {
    const auto start = Clock::now();
    for (int f = 0; f < frames; ++f) (void)gpu.frame(job_for(f), levels, molecule, render);
    rates.push_back(frames / since(start));
  }
  const double rate = median(rates);
  std::printf(
      "gpu loop, no encoding (%s): %.1f frames/s = %.2f ms per frame (median of %d runs of %d frames)\n",
      gpu_name.c_str(), rate, 1e3 / rate, runs, frames);
  const auto video_path =
      std::filesystem::temp_directory_path() / fmt::format("bench_display_{}.mp4", ::getpid());
  if (display::video_available()) {
    for (int run = 0; run < runs; ++run) {
      const auto start = Clock::now();
      display::VideoWriter encoder(video_path, render.width, render.height, 30);  // encodes on its own thread
      for (int f = 0; f < frames; ++f) encoder.add_frame(gpu.frame(job_for(f), levels, molecule, render));
      encoder.finish();
      video_rates.push_back(frames / since(start));
    }
    std::filesystem::remove(video_path);
    std::printf(
        "gpu loop into an MP4 (H.264, encoded on a second thread): %.1f frames/s (median of %d runs)\n",
        median(video_rates), runs);
  } else {
    std::printf("this build has no FFmpeg libraries: no MP4 rows\n");
  }

  // The library call on 1 GPU and on every GPU: display_fields with `frames` frames per GPU as
  // scheduler tiles (each frame on one GPU: grid, surfaces and image in its memory), one call per
  // run, the results kept from call to call as a frame loop keeps them (each image drawn into the
  // memory of the last call's: no page faults of fresh memory); with an MP4, calls of 2 frames per
  // GPU, each call's frames encoded on a second thread while the next call runs, drawn into the
  // memory of frames the writer has encoded. `fresh`: a new results vector for every call (fresh
  // memory for every image), the way to see what the reuse saves on the host at hand.
  const std::size_t all_gpus = automatic.gpus().size();
  auto scheduler_rate = [&](std::size_t n, bool into_video, bool fresh) {
    const Resources r = bench::first_gpus(n);
    const int count = frames * static_cast<int>(n);
    std::vector<orbital::DisplayResult> results;
    orbital::display_fields(r, items_of(0, count), spec, pipeline, results);  // warm-up
    std::vector<double> per_run;
    for (int run = 0; run < runs; ++run) {
      if (fresh) results = {};
      const auto start = Clock::now();
      if (into_video) {
        display::VideoWriter encoder(video_path, render.width, render.height, 30);
        const int batch = 2 * static_cast<int>(n);
        for (int f = 0; f < count; f += batch) {
          orbital::display_fields(r, items_of(f, std::min(batch, count - f)), spec, pipeline, results);
          for (orbital::DisplayResult& result : results) {
            encoder.add_frame(std::move(result.image));
            if (!fresh) result.image = encoder.spent_frame();
          }
        }
        encoder.finish();
      } else {
        orbital::display_fields(r, items_of(0, count), spec, pipeline, results);
      }
      per_run.push_back(count / since(start));
    }
    if (into_video) std::filesystem::remove(video_path);
    return median(per_run);
  };
  const double one = scheduler_rate(1, false, false);
  std::printf("display_fields on 1 GPU (%d frames per call, scheduler tiles): %.1f frames/s\n", frames, one);
  std::printf("display_fields on 1 GPU, fresh image memory in every call: %.1f frames/s\n",
              scheduler_rate(1, false, true));
  if (all_gpus > 1) {
    const double spread = scheduler_rate(all_gpus, false, false);
    std::printf("display_fields on %zu GPUs (%zu frames per call): %.1f frames/s = %.2fx 1 GPU\n", all_gpus,
                frames * all_gpus, spread, spread / one);
    std::printf("display_fields on %zu GPUs, fresh image memory in every call: %.1f frames/s\n", all_gpus,
                scheduler_rate(all_gpus, false, true));
  }
  if (display::video_available()) {
    const double one_video = scheduler_rate(1, true, false);
    std::printf("display_fields into an MP4 on 1 GPU (calls of 2 frames per GPU): %.1f frames/s\n",
                one_video);
    if (all_gpus > 1) {
      const double spread_video = scheduler_rate(all_gpus, true, false);
      std::printf("display_fields into an MP4 on %zu GPUs: %.1f frames/s = %.2fx 1 GPU\n", all_gpus,
                  spread_video, spread_video / one_video);
    }
  }

  // The baseline in the same run (grid and surfaces on the GPU through the host, CPU image), and
  // frame 1 drawn both ways.
  orbital::DisplayOptions cpu_image = pipeline;
  cpu_image.render.backend = display::RenderBackend::cpu;
  const double baseline = host_rate(automatic, cpu_image, gpu_name + " grid and surfaces, cpu image",
                                    "cpu-image path", 3, quick ? 2 : 5);
  std::printf("speed-up of the gpu loop over the cpu-image path: %.1fx\n", rate / baseline);
  const display::Image cpu_frame =
      orbital::display_fields(automatic, items_of(0, 1), spec, cpu_image)[0].image;
  const display::Image gpu_frame =
      orbital::display_fields(automatic, items_of(0, 1), spec, pipeline)[0].image;
  std::size_t over_one = 0;
  for (std::size_t p = 0; p < cpu_frame.rgba.size() / 4; ++p)
    for (int k = 0; k < 3; ++k)
      if (std::abs(int(cpu_frame.rgba[4 * p + k]) - int(gpu_frame.rgba[4 * p + k])) > 1) {
        ++over_one;
        break;
      }
  const double fraction = static_cast<double>(over_one) / (cpu_frame.rgba.size() / 4.0);
  std::printf("frame 1, gpu vs cpu image: %.4f%% of pixels differ by more than one level\n", 100 * fraction);
#endif
  return 0;
}

// The display loop of issue 20 on the seed's case, frames per second: C60 6-31G*, a 0.075 A grid
// (172^3 points), one orbital per frame (HOMO, HOMO-1, ... in turn), both phase surfaces at
// +/-0.05, the molecule as balls and sticks, one 1920x1080 image (2x2 samples per pixel).
//
//   bench_orbital_display [--quick] [--cpu] [--frames N]
//     --quick: a 0.15 A grid and fewer frames; --cpu: the same job on the CPU only (grid, surfaces,
//     image on all cores); --frames N: frames per timed run (default 30).
//
// With a GPU, rows: the time of each stage on the GPU (grid kernel into device memory, both
// surfaces from it in one pass kept on the device, the CUDA image copied to the host; the host
// waits after each stage), frames/s of the whole loop without video encoding (stages back to
// back), the same on every GPU of the machine when there are several (frames spread round-robin),
// frames/s into an MP4 (H.264 through FFmpeg, encoded on a second thread while the GPU makes
// the next frame), and the baseline in the same run: the CPU-image path (grid to the host, surfaces
// from the host grid, CPU rasteriser). Medians of repeated runs after warm-up frames. Frame 1 drawn
// both ways is compared (the fraction of pixels off by more than one level; the two paths' grids
// come from different launches of the orbital kernels, so this is a check of sense, not the
// renderers' tolerance test, which is tests/display/test_render_cuda.cpp).
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "c60_wavefunction.hpp"
#include "common/harness.hpp"
#include "display/render/render_backends.hpp"
#include "molaccel/display.hpp"
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

// H.264 encoding on its own thread, at most two frames waiting (the next frame is made meanwhile).
class BackgroundEncoder {
 public:
  BackgroundEncoder(const std::filesystem::path& path, int w, int h)
      : writer_(path, w, h, 30), thread_([this] { loop(); }) {}
  ~BackgroundEncoder() {
    if (thread_.joinable()) finish();
  }
  void add(display::Image image) {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return queue_.size() < 2; });
    queue_.push_back(std::move(image));
    ready_.notify_one();
  }
  void finish() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
      ready_.notify_one();
    }
    thread_.join();
    writer_.finish();
  }

 private:
  void loop() {
    for (;;) {
      display::Image image;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return done_ || !queue_.empty(); });
        if (queue_.empty()) return;
        image = std::move(queue_.front());
        queue_.pop_front();
        room_.notify_one();
      }
      writer_.add_frame(image);
    }
  }
  display::VideoWriter writer_;
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<display::Image> queue_;
  bool done_ = false;
  std::thread thread_;
};

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

  // The molecule in bohr, like the grid (the CLI scales whole scenes to angstrom before writing).
  std::vector<std::array<double, 3>> positions;
  std::vector<int> numbers;
  for (const orbital::Atom& atom : wfn.atoms) {
    positions.push_back(atom.position);
    numbers.push_back(atom.atomic_number);
  }
  display::Scene molecule;
  molecule.parts = display::ball_and_stick(positions, numbers, orbital::bohr_in_angstrom);
  display::RenderOptions render;
  render.width = 1920;
  render.height = 1080;
  const std::string image_size = "1920x1080 (2x2 samples)";
  std::printf(
      "C60 6-31G* (generated coefficients), grid %s = %zu points, one orbital per frame (HOMO, HOMO-1, "
      "...), surfaces at +/-0.05, balls and sticks, %s\n",
      size.c_str(), points, image_size.c_str());
  bench::print_header();

  // The CPU-image path of one frame: the grid to the host, surfaces from the host grid, the CPU
  // rasteriser. With GPU resources it is the baseline; with CPU resources, the CPU frame rate.
  auto host_frame = [&](const Resources& r, int f, bench::Timing* stages, display::Scene* scene_out) {
    const auto t0 = Clock::now();
    const std::vector<float> values = orbital::evaluate_orbitals(r, wfn, spec, {orbital_of_frame(f)});
    const double grid_s = since(t0);
    const display::ScalarGrid grid{spec.origin, spec.axes, spec.counts, values.data()};
    const auto t1 = Clock::now();
    display::Scene scene;
    scene.parts.push_back({"positive lobe",
                           display::extract_isosurface(r, grid, 0.05f, display::Inside::above),
                           display::positive_phase_colour()});
    scene.parts.push_back({"negative lobe",
                           display::extract_isosurface(r, grid, -0.05f, display::Inside::below),
                           display::negative_phase_colour()});
    for (const auto& part : molecule.parts) scene.parts.push_back(part);
    const double surfaces_s = since(t1);
    const auto t2 = Clock::now();
    display::RenderOptions cpu_render = render;
    cpu_render.backend = display::RenderBackend::cpu;
    cpu_render.threads = r.cpu_threads();
    display::Image image = display::render_scene(scene, cpu_render);
    const double image_s = since(t2);
    if (stages) {
      stages[0].median_s += grid_s;
      stages[1].median_s += surfaces_s;
      stages[2].median_s += image_s;
    }
    if (scene_out) *scene_out = std::move(scene);
    return image;
  };
  auto host_rate = [&](const Resources& r, const std::string& device, int runs, int per_run) {
    (void)host_frame(r, 0, nullptr, nullptr);  // warm-up
    std::vector<double> rates;
    std::vector<double> stage_s[3];
    for (int run = 0; run < runs; ++run) {
      bench::Timing sums[3];
      const auto start = Clock::now();
      for (int f = 0; f < per_run; ++f) (void)host_frame(r, f, sums, nullptr);
      rates.push_back(per_run / since(start));
      for (int s = 0; s < 3; ++s) stage_s[s].push_back(sums[s].median_s / per_run);
    }
    const char* names[3] = {"grid to host", "surfaces from the host grid", "image (cpu rasteriser)"};
    for (int s = 0; s < 3; ++s)
      bench::print_row({.benchmark = fmt::format("display/cpu-image path/{}", names[s]),
                        .device = device,
                        .size = s == 2 ? image_size : size,
                        .timing = bench::summarise(stage_s[s]),
                        .work = 1,
                        .work_unit = "frames"});
    const double rate = median(rates);
    std::printf("cpu-image path (%s): %.2f frames/s (median of %d runs of %d frames)\n", device.c_str(), rate,
                runs, per_run);
    return rate;
  };

  if (cpu_only) {
    const Resources cpu = Resources::cpu(0);
    host_rate(cpu, fmt::format("{} ({} threads)", cpu_info().model, cpu.cpu_threads()), 3, quick ? 2 : 3);
    return 0;
  }
  Resources::Options auto_options;
  const Resources automatic = Resources::create(auto_options);
  if (!automatic.uses_gpu()) {
    std::printf("no GPU: the GPU rows are skipped (give --cpu for the CPU frame rate)\n");
    return 0;
  }
#if MOLACCEL_HAVE_CUDA
  const int device = automatic.gpus().front();
  const std::string gpu_name = automatic.describe();
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
  // Frames spread over every GPU (a loop and a thread each; frame f on GPU f mod n).
  const std::size_t gpus = automatic.gpus().size();
  if (gpus > 1) {
    std::vector<std::unique_ptr<bench_display::GpuFrames>> loops;
    for (int d : automatic.gpus()) loops.push_back(std::make_unique<bench_display::GpuFrames>(d, points));
    auto spread = [&](int count) {
      std::vector<std::thread> threads;
      for (std::size_t g = 0; g < gpus; ++g)
        threads.emplace_back([&, g] {
          for (int f = static_cast<int>(g); f < count; f += static_cast<int>(gpus))
            (void)loops[g]->frame(job_for(f), levels, molecule, render);
        });
      for (std::thread& t : threads) t.join();
    };
    spread(static_cast<int>(gpus) * warmup);
    std::vector<double> spread_rates;
    for (int run = 0; run < runs; ++run) {
      const auto start = Clock::now();
      spread(frames * static_cast<int>(gpus));
      spread_rates.push_back(frames * static_cast<double>(gpus) / since(start));
    }
    std::printf(
        "gpu loop on %zu GPUs, no encoding: %.1f frames/s = %.2fx one GPU (median of %d runs of %zu "
        "frames)\n",
        gpus, median(spread_rates), median(spread_rates) / rate, runs, frames * gpus);
  }
  if (display::video_available()) {
    const auto path =
        std::filesystem::temp_directory_path() / fmt::format("bench_display_{}.mp4", ::getpid());
    for (int run = 0; run < runs; ++run) {
      const auto start = Clock::now();
      BackgroundEncoder encoder(path, render.width, render.height);
      for (int f = 0; f < frames; ++f) encoder.add(gpu.frame(job_for(f), levels, molecule, render));
      encoder.finish();
      video_rates.push_back(frames / since(start));
    }
    std::filesystem::remove(path);
    std::printf(
        "gpu loop into an MP4 (H.264, encoded on a second thread): %.1f frames/s (median of %d runs)\n",
        median(video_rates), runs);
  } else {
    std::printf("this build has no FFmpeg libraries: no MP4 row\n");
  }

  // The baseline in the same run, and frame 1 drawn both ways.
  const double baseline = host_rate(automatic, gpu_name + " grid and surfaces, cpu image", 3, quick ? 2 : 5);
  std::printf("speed-up of the gpu loop over the cpu-image path: %.1fx\n", rate / baseline);
  display::Scene scene;
  const display::Image cpu_image = host_frame(automatic, 0, nullptr, &scene);
  const display::Image gpu_image = gpu.frame(job_for(0), levels, molecule, render);
  std::size_t over_one = 0;
  for (std::size_t p = 0; p < cpu_image.rgba.size() / 4; ++p)
    for (int k = 0; k < 3; ++k)
      if (std::abs(int(cpu_image.rgba[4 * p + k]) - int(gpu_image.rgba[4 * p + k])) > 1) {
        ++over_one;
        break;
      }
  const double fraction = static_cast<double>(over_one) / (cpu_image.rgba.size() / 4.0);
  std::printf("frame 1, gpu vs cpu image: %.4f%% of pixels differ by more than one level\n", 100 * fraction);
#endif
  return 0;
}

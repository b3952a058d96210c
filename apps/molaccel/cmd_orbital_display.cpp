// `molaccel orbital surface`, `render` and `animate`: orbital lobes and densities as triangle
// meshes (glTF binary, PLY, OBJ + MTL), PNG images or videos, with the molecule as balls and sticks.
// Grid from the orbital engine, isosurfaces, files and images from the display module. On GPUs an
// orbital takes the device path: grid, surfaces and image in one GPU's memory, fields and frames
// spread over the GPUs by the scheduler.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>

#include "command.hpp"
#include "molaccel/display.hpp"
#include "molaccel/orbital.hpp"
#include "orbital_scene.hpp"
#if MOLACCEL_HAVE_CUDA
#include "display/render/render_backends.hpp"
#include "orbital/cuda/orbital_cuda.hpp"
#include "orbital/packed_basis.hpp"
#include "orbital/tuning.hpp"
#endif

namespace molaccel::cli {
namespace {

using namespace molaccel::orbital;
using namespace molaccel::cli::orbital_scene;
namespace display = molaccel::display;

struct SurfaceOptions {
  std::string input;
  std::vector<std::string> orbitals;
  std::string density;
  double iso = 0;  // 0 = the default of the field (0.05 orbitals, 0.002 densities)
  std::string output;
  bool atoms = true;
  double padding = 3.0, spacing = 0.1;
  std::string backend = "auto";
  std::string surface_backend = "auto";
  // render only
  std::string render_backend = "auto";
  std::string size = "1280x960";
  std::string view;
};

// One field to draw: an orbital (both phases) or a density (one surface).
struct Field {
  std::string label;        // for file names: "homo", "12", "beta-12", "density-total"
  std::string description;  // for messages
  std::vector<float> values;
  bool signed_field = true;
};

std::filesystem::path output_for(const std::filesystem::path& output, const std::string& label,
                                 bool several) {
  if (!several) return output;
  std::string safe;
  for (char c : label)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+') ? c : '_';
  return output.parent_path() / (output.stem().string() + "." + safe + output.extension().string());
}

enum class Output { mesh, image };

#if MOLACCEL_HAVE_CUDA
// The device path of an orbital: its grid written into a GPU worker's memory by the orbital
// engine's kernel (no host round trip), both phase surfaces extracted there in one pass and kept
// there, then drawn there or copied out as meshes. Taken when every worker is a GPU and the grid,
// surface and image backends allow the GPU.
bool gpu_path(const Resources& resources, Backend grid, display::SurfaceBackend surfaces,
              display::RenderBackend image) {
  return resources.uses_gpu() && !resources.uses_cpu() && grid != Backend::cpu &&
         grid != Backend::reference &&
         (surfaces == display::SurfaceBackend::automatic || surfaces == display::SurfaceBackend::cuda) &&
         image != display::RenderBackend::cpu;
}

struct GpuOrbital {
  display::cuda::DeviceSurfaces surfaces;
  void* stream = nullptr;  // the worker's stream the surfaces were made on
  float largest = 0;       // largest |value| on the grid, when there is no surface
  double grid_seconds = 0, surface_seconds = 0;
  bool empty() const { return surfaces.mesh[0].triangles == 0 && surfaces.mesh[1].triangles == 0; }
  std::vector<display::cuda::DevicePart> parts() const {
    std::vector<display::cuda::DevicePart> out;
    if (surfaces.mesh[0].triangles) out.push_back({surfaces.mesh[0], display::positive_phase_colour()});
    if (surfaces.mesh[1].triangles) out.push_back({surfaces.mesh[1], display::negative_phase_colour()});
    return out;
  }
};

// On a GPU worker: orbital `ref` of `wfn` (negated when `flip`) on `grid`, surfaces at +/-iso.
// `system`: which wavefunction (the animation's frame, else 0), for the ids under which the worker's
// device state keeps the basis (the next orbital of the same system uploads only its coefficients);
// the top bit keeps them apart from the orbital engine's request cache ids.
GpuOrbital gpu_orbital(WorkerContext& ctx, const Wavefunction& wfn, std::size_t system, const GridSpec& grid,
                       const OrbitalRef& ref, bool flip, float iso, const EvaluateOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const orbital::detail::PackedBasis basis = orbital::detail::pack_basis(wfn, options.screening_tolerance);
  // Negated coefficients give exactly the negated values (every product and sum changes sign).
  std::vector<float> coefficients = orbital::detail::cartesian_coefficients(wfn, {ref});
  if (flip)
    for (float& c : coefficients) c = -c;
  orbital::cuda_backend::GpuJob job;
  job.basis = &basis;
  job.coefficients = coefficients.data();
  job.orbitals = 1;
  job.grid = &grid;
  job.jit = options.backend != Backend::cuda_generic;
  job.tuning = orbital::detail::tuning_for(ctx.worker().device, {1, false});
  constexpr std::uint64_t kDisplayIds = 1ull << 63;
  job.basis_id = kDisplayIds | (system + 1);
  job.coefficients_id = kDisplayIds | static_cast<std::uint64_t>(system) << 34 |
                        static_cast<std::uint64_t>(ref.index) << 2 | (ref.spin == Spin::beta ? 2u : 0u) |
                        (flip ? 1u : 0u);
  const std::size_t n = grid.point_count();
  float* values = display::cuda::device_grid(ctx, n);
  GpuOrbital out;
  out.stream = orbital::cuda_backend::evaluate_on_device(ctx, job, values);
  display::cuda::synchronize(ctx, out.stream);
  const auto t1 = Clock::now();
  const float unused = 0;  // make_geometry checks for a host pointer; the kernels read `values`
  const display::ScalarGrid shape{grid.origin, grid.axes, grid.counts, &unused};
  const display::detail::GridGeometry levels[2] = {
      display::detail::make_geometry(shape, iso, display::Inside::above),
      display::detail::make_geometry(shape, -iso, display::Inside::below)};
  out.surfaces = display::cuda::extract_surfaces_on_device(ctx, levels, 2, values, out.stream);
  out.grid_seconds = std::chrono::duration<double>(t1 - t0).count();
  out.surface_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  if (out.empty()) {
    for (float v : display::cuda::download_grid(ctx, values, n))
      out.largest = std::max(out.largest, std::abs(v));
  }
  return out;
}

// run_display for orbitals on the GPUs: fields spread over the GPUs in batches (one tile each),
// written in order; as on the host path, a field without a surface stops the run before any file.
int run_display_gpu(RunContext& ctx, const SurfaceOptions& o, Output kind, const Wavefunction& wfn,
                    const GridSpec& grid, const Resources& resources, const EvaluateOptions& options,
                    const std::vector<OrbitalRef>& refs, const std::vector<std::string>& labels,
                    const std::vector<display::ScenePart>& molecule, const display::RenderOptions& render) {
  using Clock = std::chrono::steady_clock;
  const float iso = default_iso(o.iso, true);
  display::Scene molecule_scene;  // bohr, like the device meshes
  molecule_scene.parts = molecule;
  const bool several = refs.size() > 1;
  const std::size_t batch = std::max<std::size_t>(8, 2 * resources.gpus().size());
  const bool streamed = refs.size() > batch;
  struct Made {
    display::Mesh positive, negative;
    display::Image image;
    std::size_t triangles[2] = {0, 0};
    float largest = 0;
    double grid_seconds = 0, surface_seconds = 0, image_seconds = 0;
  };
  double grid_seconds = 0, surface_seconds = 0, render_seconds = 0;
  auto make = [&](std::size_t first, bool check_only) {
    const std::size_t count = std::min(batch, refs.size() - first);
    std::vector<Made> made(count);
    JobOptions job;
    job.name = "orbital display";
    job.progress_bar = false;
    run_tiles(
        resources, count,
        [&](WorkerContext& w, std::size_t t) {
          Made& m = made[t];
          const GpuOrbital g = gpu_orbital(w, wfn, 0, grid, refs[first + t], false, iso, options);
          m.triangles[0] = g.surfaces.mesh[0].triangles;
          m.triangles[1] = g.surfaces.mesh[1].triangles;
          m.largest = g.largest;
          m.grid_seconds = g.grid_seconds;
          m.surface_seconds = g.surface_seconds;
          if (g.empty() || check_only) return;
          const auto start = Clock::now();
          if (kind == Output::mesh) {
            m.positive = display::cuda::download(g.surfaces.mesh[0], g.stream);
            m.negative = display::cuda::download(g.surfaces.mesh[1], g.stream);
          } else {
            m.image = display::cuda::render_on_device(w, g.parts(), molecule_scene, render, g.stream);
            m.image_seconds = std::chrono::duration<double>(Clock::now() - start).count();
          }
        },
        job);
    for (std::size_t t = 0; t < count; ++t) {
      if (made[t].triangles[0] == 0 && made[t].triangles[1] == 0)
        throw no_surface(made[t].largest, true, iso, "orbital " + describe_orbital(refs[first + t], wfn));
      grid_seconds += made[t].grid_seconds;
      surface_seconds += made[t].surface_seconds;
      render_seconds += made[t].image_seconds;
    }
    return made;
  };
  if (streamed)
    for (std::size_t first = 0; first < refs.size(); first += batch) (void)make(first, true);
  std::vector<std::string> written;
  std::vector<std::size_t> triangles;
  nlohmann::json surfaces = nlohmann::json::array();
  for (std::size_t first = 0; first < refs.size(); first += batch) {
    std::vector<Made> made = make(first, false);
    for (std::size_t t = 0; t < made.size(); ++t) {
      Made& m = made[t];
      const auto path = output_for(o.output, labels[first + t], several);
      surfaces.push_back({{"field", "orbital " + describe_orbital(refs[first + t], wfn)},
                          {"iso", std::stod(fmt::format("{}", iso))},
                          {"positive_triangles", m.triangles[0]},
                          {"negative_triangles", m.triangles[1]}});
      std::size_t count = m.triangles[0] + m.triangles[1];
      for (const auto& part : molecule) count += part.mesh.triangle_count();
      if (kind == Output::mesh)
        display::write_scene(path, scene_of(std::move(m.positive), std::move(m.negative), true, molecule));
      else
        display::write_png(path, m.image);
      written.push_back(path.string());
      triangles.push_back(count);
    }
  }
  if (kind == Output::image) {
    ctx.report["render_seconds"] = render_seconds;
    ctx.report["render_backend"] = "cuda";
  }
  if (std::FILE* out = ctx.summary(o.output))
    std::fprintf(out, "%zu x %zu x %zu grid: %.3f s; surfaces: %.3f s;%s wrote %s (on the GPU)\n",
                 grid.counts[0], grid.counts[1], grid.counts[2], grid_seconds, surface_seconds,
                 kind == Output::image ? fmt::format(" images: {:.3f} s;", render_seconds).c_str() : "",
                 fmt::format("{}", fmt::join(written, ", ")).c_str());
  ctx.report["grid"] = {{"counts", grid.counts}, {"origin_bohr", grid.origin}, {"axes_bohr", grid.axes}};
  ctx.report["grid_seconds"] = grid_seconds;
  ctx.report["surface_seconds"] = surface_seconds;
  ctx.report["surface_backend"] = "cuda";
  ctx.report["surfaces"] = surfaces;
  ctx.report["outputs"] = written;
  ctx.report["output_triangles"] = triangles;
  ctx.report["length_unit"] = "angstrom";
  return 0;
}
#endif

int run_display(RunContext& ctx, const SurfaceOptions& o, Output kind) {
  if (o.orbitals.empty() && o.density.empty())
    throw InputError("--orbital", 0, "give --orbital NAME|all|FROM:TO (repeatable) and/or --density KIND");
  if (!std::isfinite(o.iso) || o.iso < 0)
    throw InputError("--iso", 0, fmt::format("must be a positive number (got {})", o.iso));
  // Bad output names and options fail before any work.
  display::RenderOptions render;
  if (kind == Output::mesh) {
    display::mesh_format_for(o.output);
  } else {
    std::string ext = std::filesystem::path(o.output).extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext != ".png") throw InputError(o.output, 0, "the image must be a .png file");
    const auto [w, h] = display::parse_image_size(o.size);
    render.width = w;
    render.height = h;
    render.backend = display::parse_render_backend(o.render_backend);
    if (!o.view.empty()) render.view = display::parse_view(o.view);
  }
  const Wavefunction wfn = read_wavefunction(o.input);
  const GridSpec grid = automatic_grid(wfn, o.padding, o.spacing);
  const Resources resources = ctx.resources();
  EvaluateOptions options;
  options.backend = parse_backend(o.backend);
  const display::SurfaceBackend surface_backend = display::parse_surface_backend(o.surface_backend);

  std::vector<OrbitalRef> refs;
  std::vector<std::string> labels;
  for (const std::string& selection : o.orbitals) {
    const auto chosen = parse_orbital_selection(selection, wfn);
    const bool one = chosen.size() == 1 && selection.find(':') == std::string::npos && selection != "all";
    for (const OrbitalRef& r : chosen) {
      refs.push_back(r);
      labels.push_back(one ? selection
                           : fmt::format("{}{}", r.spin == Spin::beta ? "beta-" : "", r.index + 1));
    }
  }
  const std::size_t fields = refs.size() + (o.density.empty() ? 0 : 1);
  const bool several = fields > 1;
  log_info("surfaces of {} field(s) on a {} x {} x {} grid, {}", fields, grid.counts[0], grid.counts[1],
           grid.counts[2], resources.describe());

  const std::vector<display::ScenePart> molecule =
      o.atoms ? molecule_parts(wfn) : std::vector<display::ScenePart>{};
#if MOLACCEL_HAVE_CUDA
  if (o.density.empty() &&
      gpu_path(resources, options.backend, surface_backend,
               kind == Output::image ? render.backend : display::RenderBackend::automatic))
    return run_display_gpu(ctx, o, kind, wfn, grid, resources, options, refs, labels, molecule, render);
#endif
  // Up to one batch of fields, everything is computed (and drawn) before the first file is written.
  // More fields (--orbital all) are checked first, grids only, then each file is written as soon as
  // it is made, so that memory holds one batch: no surface at the isovalue still stops the run
  // before any file exists.
  constexpr std::size_t batch = 8;
  const bool streamed = fields > batch;
  const std::size_t n = grid.point_count();
  double grid_seconds = 0, surface_seconds = 0, render_seconds = 0;
  std::string render_backend;
  auto for_each_field =
      [&](const std::function<void(const std::string& label, const std::string& description,
                                   const std::vector<float>& values, bool is_orbital)>& fn) {
        for (std::size_t first = 0; first < refs.size(); first += batch) {
          const std::vector<OrbitalRef> part(refs.begin() + first,
                                             refs.begin() + std::min(refs.size(), first + batch));
          EvaluationInfo info;
          const std::vector<float> values = evaluate_orbitals(resources, wfn, grid, part, options, &info);
          grid_seconds += info.seconds;
          for (std::size_t i = 0; i < part.size(); ++i)
            fn(labels[first + i], "orbital " + describe_orbital(part[i], wfn),
               std::vector<float>(values.begin() + i * n, values.begin() + (i + 1) * n), true);
        }
        if (!o.density.empty()) {
          EvaluationInfo info;
          const std::vector<float> rho =
              evaluate_density(resources, wfn, grid, parse_density(o.density), options, &info);
          grid_seconds += info.seconds;
          fn("density-" + o.density, o.density + " density", rho, false);
        }
      };
  if (streamed)
    for_each_field([&](const std::string&, const std::string& description, const std::vector<float>& values,
                       bool is_orbital) {
      const float iso = default_iso(o.iso, is_orbital);
      if (!has_surface(values, is_orbital, iso)) throw no_surface(values, is_orbital, iso, description);
    });

  std::vector<std::string> written;
  std::vector<std::size_t> triangles;
  auto emit = [&](const std::filesystem::path& path, const display::Scene& scene,
                  const display::Image* image) {
    if (kind == Output::mesh)
      display::write_scene(path, scene);
    else
      display::write_png(path, *image);
    written.push_back(path.string());
    std::size_t count = 0;
    for (const auto& part : scene.parts) count += part.mesh.triangle_count();
    triangles.push_back(count);
  };
  auto draw = [&](const display::Scene& scene) {
    const auto start = std::chrono::steady_clock::now();
    display::RenderInfo info;
    display::Image image = display::render_scene(resources, scene, render, &info);
    render_backend = info.backend;
    render_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return image;
  };
  std::vector<std::pair<std::filesystem::path, display::Scene>> scenes;
  nlohmann::json surfaces = nlohmann::json::array();
  for_each_field([&](const std::string& label, const std::string& description,
                     const std::vector<float>& values, bool is_orbital) {
    FieldScene f =
        field_scene(resources, grid, values, is_orbital, o.iso, surface_backend, molecule, description);
    surface_seconds += f.seconds;
    surfaces.push_back({{"field", description},
                        {"iso", std::stod(fmt::format("{}", f.iso))},  // 0.05, not 0.0500000007
                        {"positive_triangles", f.positive_triangles},
                        {"negative_triangles", f.negative_triangles}});
    const auto path = output_for(o.output, label, several);
    if (!streamed) {
      scenes.emplace_back(path, std::move(f.scene));
    } else if (kind == Output::image) {
      const display::Image image = draw(f.scene);
      emit(path, f.scene, &image);
    } else {
      emit(path, f.scene, nullptr);
    }
  });
  std::vector<display::Image> images;
  if (kind == Output::image)
    for (const auto& [path, scene] : scenes) images.push_back(draw(scene));
  for (std::size_t i = 0; i < scenes.size(); ++i)
    emit(scenes[i].first, scenes[i].second, kind == Output::image ? &images[i] : nullptr);
  if (kind == Output::image) {
    ctx.report["render_seconds"] = render_seconds;
    ctx.report["render_backend"] = render_backend;
  }
  if (std::FILE* out = ctx.summary(o.output))
    std::fprintf(out, "%zu x %zu x %zu grid: %.3f s; surfaces: %.3f s;%s wrote %s\n", grid.counts[0],
                 grid.counts[1], grid.counts[2], grid_seconds, surface_seconds,
                 kind == Output::image ? fmt::format(" images: {:.3f} s;", render_seconds).c_str() : "",
                 fmt::format("{}", fmt::join(written, ", ")).c_str());
  ctx.report["grid"] = {{"counts", grid.counts}, {"origin_bohr", grid.origin}, {"axes_bohr", grid.axes}};
  ctx.report["grid_seconds"] = grid_seconds;
  ctx.report["surface_seconds"] = surface_seconds;
  ctx.report["surfaces"] = surfaces;
  ctx.report["outputs"] = written;
  ctx.report["output_triangles"] = triangles;  // every triangle of each file (lobes, atoms, bonds)
  ctx.report["length_unit"] = "angstrom";
  return 0;
}

std::shared_ptr<SurfaceOptions> add_field_options(CLI::App& app, CommonOptions& common, Output kind) {
  auto opts = std::make_shared<SurfaceOptions>();
  app.add_option("FILE", opts->input, "Molden or .fchk file (plain or gzip)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--orbital", opts->orbitals,
                 "Orbitals (repeatable): homo, lumo+1, 12, all, a range homo-5:lumo+5, beta:homo");
  app.add_option("--density", opts->density, "Also (or only) a density surface: total, spin, alpha or beta");
  app.add_option("--iso", opts->iso,
                 "Isovalue (orbitals: surfaces at +iso and -iso, default 0.05; densities: default 0.002), "
                 "atomic units");
  app.add_option("-o,--output", opts->output,
                 kind == Output::mesh ? "Mesh file (.glb, .ply or .obj); several fields: FILE.<name>.ext"
                                      : "PNG image; several fields: FILE.<name>.png")
      ->required();
  app.add_flag("--atoms,!--no-atoms", opts->atoms, "Atoms and bonds as spheres and cylinders (default on)");
  add_grid_options(app, opts->padding, opts->spacing, opts->backend, opts->surface_backend, "the atoms");
  if (kind == Output::image) {
    app.add_option("--size", opts->size, "Image size WIDTHxHEIGHT")->default_val("1280x960");
    app.add_option("--view", opts->view,
                   "Rotation (degrees, applied x then y then z) and zoom: rx=30,ry=-45,rz=0,zoom=1.5");
    app.add_option("--render-backend", opts->render_backend,
                   "Renderer: auto (the GPU when the devices have one), cpu or cuda")
        ->default_val("auto");
  }
  common.add_device_options(app);
  app.footer(
      "Meshes are in angstrom; normals come from the field's gradient; triangles are wound counter-clockwise "
      "seen from outside the lobe; +iso lobes blue, -iso lobes red. See docs/orbital.md, Surfaces, images "
      "and "
      "animations.\n");
  return opts;
}

const bool surface_registered = register_command({
    .group = "orbital",
    .name = "surface",
    .purpose = "Orbital lobes (+iso blue, -iso red) or density surfaces as meshes: glTF binary, PLY or OBJ",
    .example = "molaccel orbital surface water.molden --orbital homo --iso 0.05 -o homo.glb",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto opts = add_field_options(app, common, Output::mesh);
      return [opts](RunContext& ctx) { return run_display(ctx, *opts, Output::mesh); };
    },
    .order = 3,
});

const bool render_registered = register_command({
    .group = "orbital",
    .name = "render",
    .purpose = "Orbital lobes or density surfaces drawn as PNG images (GPU or CPU rasteriser, no display)",
    .example = "molaccel orbital render water.molden --orbital homo --size 1920x1080 -o homo.png",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto opts = add_field_options(app, common, Output::image);
      return [opts](RunContext& ctx) { return run_display(ctx, *opts, Output::image); };
    },
    .order = 4,
});

// ------------------------------------------------------------------------------------------
// orbital animate: one orbital followed through the frames of a trajectory, as PNGs or an MP4.
// ------------------------------------------------------------------------------------------
struct AnimateOptions {
  std::vector<std::string> frames;
  bool as_listed = false;
  std::string orbital = "homo";
  double iso = 0;
  std::string output;
  bool atoms = true;
  double padding = 3.0, spacing = 0.1;
  std::string backend = "auto";
  std::string surface_backend = "auto";
  std::string render_backend = "auto";
  std::string size = "1280x960";
  std::string view;
  int fps = 10;
};

int run_animate(RunContext& ctx, const AnimateOptions& o) {
  if (!std::isfinite(o.iso) || o.iso < 0)
    throw InputError("--iso", 0, fmt::format("must be a positive number (got {})", o.iso));
  const std::filesystem::path out_dir = o.output;
  std::string ext = out_dir.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool video = ext == ".mp4";
  if (video && !display::video_available())
    throw NotCompiled("MP4 output (this build has no FFmpeg libraries; give a folder for PNG frames)",
                      __FILE__, __LINE__);
  if (!video && out_dir.has_extension() && !std::filesystem::is_directory(out_dir))
    throw InputError(o.output, 0, "give a folder for the PNG frames or a .mp4 file");
  if (o.fps < 1 || o.fps > 240) throw InputError("--fps", 0, fmt::format("must be 1..240 (got {})", o.fps));
  display::RenderOptions render;
  const auto [w, h] = display::parse_image_size(o.size);
  render.width = w;
  render.height = h;
  render.backend = display::parse_render_backend(o.render_backend);
  if (!o.view.empty()) render.view = display::parse_view(o.view);
  std::vector<std::string> files = o.frames;
  if (!o.as_listed) std::stable_sort(files.begin(), files.end(), natural_less);
  std::vector<Wavefunction> frames;
  for (const auto& file : files) frames.push_back(read_wavefunction(file));
  const std::vector<TrackedOrbital> track = track_orbital(frames, parse_orbital(o.orbital, frames.front()));

  // One grid and one framing for every frame, so the picture does not jump.
  Wavefunction all_atoms;
  for (const auto& f : frames) all_atoms.atoms.insert(all_atoms.atoms.end(), f.atoms.begin(), f.atoms.end());
  const GridSpec grid = automatic_grid(all_atoms, o.padding, o.spacing);
  const Resources resources = ctx.resources();
  EvaluateOptions options;
  options.backend = parse_backend(o.backend);
  const display::SurfaceBackend surface_backend = display::parse_surface_backend(o.surface_backend);
  double grid_seconds = 0, surface_seconds = 0;
  auto describe_frame = [&](std::size_t f) {
    return fmt::format("frame {} ({}), orbital {}", f + 1, frames[f].source,
                       describe_orbital(track[f].ref, frames[f]));
  };
  nlohmann::json report_frames = nlohmann::json::array();
  for (std::size_t f = 0; f < frames.size(); ++f)
    report_frames.push_back({{"file", frames[f].source},
                             {"orbital", track[f].ref.index + 1},
                             {"overlap", track[f].overlap},
                             {"sign_flipped", track[f].sign_flipped}});
  std::vector<std::string> written;
  double render_seconds = 0;
  const auto finish = [&] {
    if (std::FILE* out = ctx.summary()) {
      // The orbital followed in each frame, "(-)" where its sign was flipped (a plain loop: clang
      // with libstdc++ 12 cannot take a JSON array as a range).
      std::string followed;
      for (const nlohmann::json& j : report_frames)
        followed += fmt::format("{}{}{}", followed.empty() ? "" : " ", j["orbital"].get<std::size_t>(),
                                j["sign_flipped"].get<bool>() ? "(-)" : "");
      std::fprintf(
          out, "%zu frames, orbital followed: %s; grid %.3f s, surfaces %.3f s, images %.3f s; wrote %s\n",
          frames.size(), followed.c_str(), grid_seconds, surface_seconds, render_seconds,
          out_dir.string().c_str());
    }
    ctx.report["frames"] = report_frames;
    ctx.report["grid_seconds"] = grid_seconds;
    ctx.report["surface_seconds"] = surface_seconds;
    ctx.report["render_seconds"] = render_seconds;
    ctx.report["outputs"] = written;
    return 0;
  };
#if MOLACCEL_HAVE_CUDA
  if (gpu_path(resources, options.backend, surface_backend, render.backend)) {
    // Frames spread over the GPUs (one tile each), in batches written in frame order. Pass 1: every
    // frame's surfaces and framing (a frame without a surface stops the run before any file);
    // pass 2: each frame made again on its GPU and drawn there with the common framing.
    const float iso = default_iso(o.iso, true);
    const std::size_t batch = 2 * resources.gpus().size();
    std::vector<display::Framing> framings(frames.size());
    std::vector<float> largest(frames.size(), -1.0f);
    std::vector<display::Scene> molecules(frames.size());  // bohr, like the device meshes
    for (std::size_t f = 0; f < frames.size(); ++f)
      if (o.atoms) molecules[f].parts = molecule_parts(frames[f]);
    std::mutex time_mutex;
    auto run_frames = [&](std::size_t first, std::size_t count,
                          const std::function<void(WorkerContext&, std::size_t, const GpuOrbital&)>& fn) {
      JobOptions job;
      job.name = "animate";
      job.progress_bar = false;
      run_tiles(
          resources, count,
          [&](WorkerContext& w, std::size_t t) {
            const std::size_t f = first + t;
            const GpuOrbital g =
                gpu_orbital(w, frames[f], f, grid, track[f].ref, track[f].sign_flipped, iso, options);
            {
              std::lock_guard lock(time_mutex);
              grid_seconds += g.grid_seconds;
              surface_seconds += g.surface_seconds;
            }
            fn(w, f, g);
          },
          job);
    };
    ProgressBar surfaces_bar("animate: surfaces", frames.size(), "frames");
    for (std::size_t first = 0; first < frames.size(); first += batch) {
      const std::size_t count = std::min(batch, frames.size() - first);
      run_frames(first, count, [&](WorkerContext& w, std::size_t f, const GpuOrbital& g) {
        if (g.empty())
          largest[f] = g.largest;
        else
          framings[f] = display::cuda::framing_on_device(w, g.parts(), molecules[f], g.stream);
      });
      for (std::size_t f = first; f < first + count; ++f) {
        if (largest[f] >= 0) throw no_surface(largest[f], true, iso, describe_frame(f));
        render.framing = display::enclose(render.framing, framings[f]);
        surfaces_bar.advance();
      }
    }
    surfaces_bar.finish();
    const auto start = std::chrono::steady_clock::now();
    ProgressBar images_bar(video ? "animate: video" : "animate: images", frames.size(), "frames");
    std::unique_ptr<display::VideoWriter> writer;
    if (video)
      writer = std::make_unique<display::VideoWriter>(out_dir, render.width, render.height, o.fps);
    else
      std::filesystem::create_directories(out_dir);
    for (std::size_t first = 0; first < frames.size(); first += batch) {
      const std::size_t count = std::min(batch, frames.size() - first);
      std::vector<display::Image> images(count);
      run_frames(first, count, [&](WorkerContext& w, std::size_t f, const GpuOrbital& g) {
        images[f - first] = display::cuda::render_on_device(w, g.parts(), molecules[f], render, g.stream);
      });
      for (std::size_t t = 0; t < count; ++t) {
        if (video) {
          writer->add_frame(images[t]);
        } else {
          const auto path = out_dir / fmt::format("frame_{:04d}.png", first + t + 1);
          display::write_png(path, images[t]);
          written.push_back(path.string());
        }
        images_bar.advance();
      }
    }
    if (video) {
      writer->finish();
      written.push_back(out_dir.string());
    }
    images_bar.finish();
    render_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ctx.report["render_backend"] = "cuda";
    return finish();
  }
#endif
  auto frame_scene = [&](std::size_t f) {
    EvaluationInfo info;
    std::vector<float> values = evaluate_orbitals(resources, frames[f], grid, {track[f].ref}, options, &info);
    grid_seconds += info.seconds;
    if (track[f].sign_flipped)
      for (float& v : values) v = -v;
    const auto molecule = o.atoms ? molecule_parts(frames[f]) : std::vector<display::ScenePart>{};
    FieldScene fs =
        field_scene(resources, grid, values, true, o.iso, surface_backend, molecule, describe_frame(f));
    surface_seconds += fs.seconds;
    return std::move(fs.scene);
  };
  // Every frame's surfaces are made (a frame without one stops the run before any file is written)
  // and framed first. Up to kKeptFrames frames are kept for drawing; longer runs make them again
  // when drawing, so memory holds one frame.
  constexpr std::size_t kKeptFrames = 16;
  const bool keep = frames.size() <= kKeptFrames;
  std::vector<display::Scene> scenes;
  ProgressBar surfaces_bar("animate: surfaces", frames.size(), "frames");
  for (std::size_t f = 0; f < frames.size(); ++f) {
    display::Scene scene = frame_scene(f);
    surfaces_bar.advance();
    render.framing = display::enclose(render.framing, display::framing_of(scene));
    if (keep) scenes.push_back(std::move(scene));
  }

  surfaces_bar.finish();
  const auto start = std::chrono::steady_clock::now();
  ProgressBar images_bar(video ? "animate: video" : "animate: images", frames.size(), "frames");
  auto draw = [&](std::size_t f) {
    return display::render_scene(resources, keep ? scenes[f] : frame_scene(f), render);
  };
  if (video) {
    display::VideoWriter writer(out_dir, render.width, render.height, o.fps);
    for (std::size_t f = 0; f < frames.size(); ++f) {
      writer.add_frame(draw(f));
      images_bar.advance();
    }
    writer.finish();
    written.push_back(out_dir.string());
  } else {
    std::filesystem::create_directories(out_dir);
    for (std::size_t f = 0; f < frames.size(); ++f) {
      const auto path = out_dir / fmt::format("frame_{:04d}.png", f + 1);
      display::write_png(path, draw(f));
      written.push_back(path.string());
      images_bar.advance();
    }
  }
  images_bar.finish();
  render_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return finish();
}

const bool animate_registered = register_command({
    .group = "orbital",
    .name = "animate",
    .purpose =
        "One orbital through a trajectory's frames (a file each) as an MP4 or PNGs, tracked by overlap",
    .example = "molaccel orbital animate irc_*.molden --orbital homo -o irc.mp4",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto opts = std::make_shared<AnimateOptions>();
      app.add_option("FRAME_FILES", opts->frames,
                     "Molden or .fchk files, one per frame (same atoms and basis)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_flag("--as-listed", opts->as_listed,
                   "Keep the frames in the order given (default: natural name order)");
      app.add_option("--orbital", opts->orbital,
                     "The orbital in the first frame: homo, lumo+1, 12, beta:homo")
          ->default_val("homo");
      app.add_option("--iso", opts->iso, "Isovalue (surfaces at +iso and -iso, default 0.05), atomic units");
      app.add_option(
             "-o,--output", opts->output,
             "A .mp4 file (H.264), or a folder for PNG frames (frame_0001.png, ...; created if needed)")
          ->required();
      app.add_option("--fps", opts->fps, "Frames per second of an MP4")->default_val(10);
      app.add_flag("--atoms,!--no-atoms", opts->atoms,
                   "Atoms and bonds as spheres and cylinders (default on)");
      add_grid_options(app, opts->padding, opts->spacing, opts->backend, opts->surface_backend,
                       "all frames' atoms");
      app.add_option("--size", opts->size, "Image size WIDTHxHEIGHT")->default_val("1280x960");
      app.add_option("--view", opts->view,
                     "Rotation (degrees, x then y then z) and zoom: rx=30,ry=-45,zoom=1.5");
      app.add_option("--render-backend", opts->render_backend,
                     "Renderer: auto (the GPU when the devices have one), cpu or cuda")
          ->default_val("auto");
      common.add_device_options(app);
      app.footer(
          "The orbital is followed by maximum overlap with the previous frame's (the mixed overlap of both "
          "frames' basis functions) and its sign kept continuous; frames that differ in atoms or basis "
          "are an error naming the frame. See docs/orbital.md, Surfaces, images and animations.\n");
      return [opts](RunContext& ctx) { return run_animate(ctx, *opts); };
    },
    .order = 5,
});

}  // namespace
}  // namespace molaccel::cli

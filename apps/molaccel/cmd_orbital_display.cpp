// `molaccel orbital surface`, `render` and `animate`: orbital lobes and densities as triangle
// meshes (glTF binary, PLY, OBJ + MTL), PNG images or videos, with the molecule as balls and sticks.
// The work is the library's display pipeline (orbital::display_fields: on GPUs grid, surfaces and
// image in one GPU's memory, fields and frames spread over the GPUs); this file chooses the fields,
// batches them and writes the files, all of a run's files together or none (OutputGroup).
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "command.hpp"
#include "molaccel/display.hpp"
#include "molaccel/orbital.hpp"
#include "molaccel/orbital_display.hpp"
#include "orbital_scene.hpp"

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

std::filesystem::path output_for(const std::filesystem::path& output, const std::string& label,
                                 bool several) {
  if (!several) return output;
  std::string safe;
  for (char c : label)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+') ? c : '_';
  return output.parent_path() / (output.stem().string() + "." + safe + output.extension().string());
}

enum class Output { mesh, image };

orbital::DisplayOptions display_options(double iso, bool atoms, const std::string& backend,
                                        const std::string& surface_backend) {
  orbital::DisplayOptions options;
  options.iso = iso;
  options.atoms = atoms;
  options.grid.backend = parse_backend(backend);
  options.surface_backend = display::parse_surface_backend(surface_backend);
  return options;
}

// The PNG files of a batch's images, encoded on every core at once: one takes about 0.1 s on one
// core at 1920 x 1080, 20-40 times what a GPU takes to draw it.
std::vector<std::vector<std::uint8_t>> encode_pngs(const std::vector<DisplayResult>& results) {
  std::vector<std::vector<std::uint8_t>> pngs(results.size());
  parallel_for(results.size(), 0, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) pngs[i] = display::encode_png(results[i].image);
  });
  return pngs;
}

int run_display(RunContext& ctx, const SurfaceOptions& o, Output kind) {
  if (o.orbitals.empty() && o.density.empty())
    throw InputError("--orbital", 0, "give --orbital NAME|all|FROM:TO (repeatable) and/or --density KIND");
  if (!std::isfinite(o.iso) || o.iso < 0)
    throw InputError("--iso", 0, fmt::format("must be a positive number (got {})", o.iso));
  // Bad output names and options fail before any work.
  DisplayOptions options = display_options(o.iso, o.atoms, o.backend, o.surface_backend);
  options.meshes = kind == Output::mesh;
  options.image = kind == Output::image;
  if (kind == Output::mesh) {
    display::mesh_format_for(o.output);
  } else {
    std::string ext = std::filesystem::path(o.output).extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext != ".png") throw InputError(o.output, 0, "the image must be a .png file");
    const auto [w, h] = display::parse_image_size(o.size);
    options.render.width = w;
    options.render.height = h;
    options.render.backend = display::parse_render_backend(o.render_backend);
    if (!o.view.empty()) options.render.view = display::parse_view(o.view);
  }
  const Wavefunction wfn = read_wavefunction(o.input);
  const GridSpec grid = automatic_grid(wfn, o.padding, o.spacing);
  const Resources resources = ctx.resources();

  std::vector<DisplayItem> items;
  std::vector<std::string> labels;
  for (const std::string& selection : o.orbitals) {
    const auto chosen = parse_orbital_selection(selection, wfn);
    const bool one = chosen.size() == 1 && selection.find(':') == std::string::npos && selection != "all";
    for (const OrbitalRef& r : chosen) {
      items.push_back({&wfn, orbital_field(r)});
      labels.push_back(one ? selection
                           : fmt::format("{}{}", r.spin == Spin::beta ? "beta-" : "", r.index + 1));
    }
  }
  if (!o.density.empty()) {
    items.push_back({&wfn, density_field(parse_density(o.density))});
    labels.push_back("density-" + o.density);
  }
  const bool several = items.size() > 1;
  const bool on_device = display_on_device(resources, options);
  log_info("surfaces of {} field(s) on a {} x {} x {} grid, {}{}", items.size(), grid.counts[0],
           grid.counts[1], grid.counts[2], resources.describe(),
           on_device ? " (grid, surfaces and images on the GPUs)" : "");

  // Files are written batch by batch into one output group: a failure anywhere (no surface at the
  // isovalue, a full disk) leaves none of the new files and every older one as it was.
  const std::size_t batch = batch_size(resources, on_device);
  DisplayInfo total;
  std::vector<std::string> written;
  std::vector<std::size_t> triangles;
  nlohmann::json surfaces = nlohmann::json::array();
  OutputGroup group;
  std::vector<DisplayResult> results;  // kept: each batch's images are drawn into the last one's memory
  for (std::size_t first = 0; first < items.size(); first += batch) {
    DisplayInfo info;
    display_fields(resources, items_from(items, first, batch), grid, options, results, &info);
    total.grid_seconds += info.grid_seconds;
    total.surface_seconds += info.surface_seconds;
    total.render_seconds += info.render_seconds;
    total.grid_backend = info.grid_backend;
    total.surface_backend = info.surface_backend;
    total.render_backend = info.render_backend;
    const auto pngs = kind == Output::image ? encode_pngs(results) : std::vector<std::vector<std::uint8_t>>();
    for (std::size_t i = 0; i < results.size(); ++i) {
      DisplayResult& r = results[i];
      const DisplayItem& item = items[first + i];
      const auto path = output_for(o.output, labels[first + i], several);
      surfaces.push_back(
          {{"field", item.field.is_density ? o.density + " density"
                                           : "orbital " + describe_orbital(item.field.orbital, wfn)},
           {"iso", std::stod(fmt::format("{}", r.iso))},  // 0.05, not 0.0500000007
           {"positive_triangles", r.positive_triangles},
           {"negative_triangles", r.negative_triangles}});
      std::size_t count = r.positive_triangles + r.negative_triangles;
      if (kind == Output::mesh) {
        count = 0;
        for (const auto& p : r.scene.parts) count += p.mesh.triangle_count();
        display::write_scene(path, in_angstrom(std::move(r.scene)));
      } else {
        display::write_png_bytes(path, pngs[i]);
      }
      written.push_back(path.string());
      triangles.push_back(count);
    }
  }
  group.commit();
  if (kind == Output::image) {
    ctx.report["render_seconds"] = total.render_seconds;
    ctx.report["render_backend"] = total.render_backend;
  }
  if (std::FILE* out = ctx.summary(o.output))
    std::fprintf(out, "%zu x %zu x %zu grid: %.3f s; surfaces: %.3f s;%s wrote %s%s\n", grid.counts[0],
                 grid.counts[1], grid.counts[2], total.grid_seconds, total.surface_seconds,
                 kind == Output::image ? fmt::format(" images: {:.3f} s;", total.render_seconds).c_str() : "",
                 fmt::format("{}", fmt::join(written, ", ")).c_str(), on_device ? " (on the GPU)" : "");
  ctx.report["grid"] = {{"counts", grid.counts}, {"origin_bohr", grid.origin}, {"axes_bohr", grid.axes}};
  ctx.report["grid_seconds"] = total.grid_seconds;
  ctx.report["grid_backend"] = total.grid_backend;
  ctx.report["surface_seconds"] = total.surface_seconds;
  ctx.report["surface_backend"] = total.surface_backend;
  ctx.report["on_device"] = on_device;
  ctx.report["surfaces"] = surfaces;
  ctx.report["outputs"] = written;
  // Triangles of each file: meshes every part (lobes, atoms, bonds), images the lobes.
  ctx.report["output_triangles"] = triangles;
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
  DisplayOptions options = display_options(o.iso, o.atoms, o.backend, o.surface_backend);
  display::RenderOptions& render = options.render;
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
  std::vector<DisplayItem> items;
  nlohmann::json report_frames = nlohmann::json::array();
  for (std::size_t f = 0; f < frames.size(); ++f) {
    DisplayItem item{&frames[f], orbital_field(track[f].ref, track[f].sign_flipped)};
    item.field.description = fmt::format("frame {} ({}), orbital {}", f + 1, frames[f].source,
                                         describe_orbital(track[f].ref, frames[f]));
    items.push_back(std::move(item));
    report_frames.push_back({{"file", frames[f].source},
                             {"orbital", track[f].ref.index + 1},
                             {"overlap", track[f].overlap},
                             {"sign_flipped", track[f].sign_flipped}});
  }
  options.image = true;
  const bool on_device = display_on_device(resources, options);
  // Frames per display_fields call (GPUs: two per GPU, spread by the scheduler; the CPU: one, which
  // uses every core).
  const std::size_t batch = on_device ? 2 * resources.gpus().size() : 1;
  DisplayInfo total;
  auto add = [&](const DisplayInfo& info) {
    total.grid_seconds += info.grid_seconds;
    total.surface_seconds += info.surface_seconds;
    total.render_seconds += info.render_seconds;
    total.render_backend = info.render_backend;
  };

  // Pass 1: every frame's surfaces and framing (a frame without a surface stops the run before any
  // file). On the CPU up to kKeptFrames frames keep their scenes for drawing; otherwise pass 2 makes
  // each frame again (on a GPU a grid and two surfaces cost about 2 ms), so memory holds one batch.
  constexpr std::size_t kKeptFrames = 16;
  const bool keep = !on_device && frames.size() <= kKeptFrames;
  DisplayOptions framing = options;
  framing.image = false;
  framing.framing = true;
  framing.meshes = keep;
  std::vector<display::Scene> scenes;
  ProgressBar surfaces_bar("animate: surfaces", frames.size(), "frames");
  for (std::size_t first = 0; first < items.size(); first += batch) {
    DisplayInfo info;
    std::vector<DisplayResult> results =
        display_fields(resources, items_from(items, first, batch), grid, framing, &info);
    add(info);
    for (DisplayResult& r : results) {
      render.framing = display::enclose(render.framing, r.framing);
      if (keep) scenes.push_back(std::move(r.scene));
      surfaces_bar.advance();
    }
  }
  surfaces_bar.finish();

  // Pass 2: the images with the common framing, written in frame order, a batch at a time. PNG
  // frames come in batches of at least 8 (their encoding, on every core at once, takes longer than
  // drawing them on a GPU); video frames go to the writer, which encodes them on its own thread
  // while the next batch is made.
  options.meshes = false;
  const std::size_t image_batch = on_device && !video ? batch_size(resources, on_device) : batch;
  std::vector<std::string> written;
  ProgressBar images_bar(video ? "animate: video" : "animate: images", frames.size(), "frames");
  // One results vector for every batch: each frame is drawn into the memory of the one before it
  // (or of a frame the video writer has encoded), not into fresh memory.
  std::vector<DisplayResult> results;
  auto for_each_batch = [&](const std::function<void(std::size_t, std::vector<DisplayResult>&)>& fn) {
    for (std::size_t first = 0; first < items.size(); first += image_batch) {
      if (keep) {
        display::RenderInfo info;
        std::vector<DisplayResult> one(1);
        one[0].image = display::render_scene(resources, scenes[first], render, &info);
        total.render_seconds += info.seconds;
        total.render_backend = info.backend;
        fn(first, one);
        continue;
      }
      DisplayInfo info;
      display_fields(resources, items_from(items, first, image_batch), grid, options, results, &info);
      add(info);
      fn(first, results);
    }
  };
  if (video) {
    display::VideoWriter writer(out_dir, render.width, render.height, o.fps);
    for_each_batch([&](std::size_t, std::vector<DisplayResult>& batch_results) {
      for (DisplayResult& r : batch_results) {
        writer.add_frame(std::move(r.image));  // encoded on the writer's thread while the next batch is made
        r.image = writer.spent_frame();        // the next frame's memory
        images_bar.advance();
      }
    });
    writer.finish();
    written.push_back(out_dir.string());
  } else {
    // The frames appear together or not at all (an output group); a folder this run made is removed
    // again when it fails.
    const bool created = std::filesystem::create_directories(out_dir);
    try {
      OutputGroup group;
      for_each_batch([&](std::size_t first, std::vector<DisplayResult>& batch_results) {
        const auto pngs = encode_pngs(batch_results);
        for (std::size_t t = 0; t < batch_results.size(); ++t) {
          const auto path = out_dir / fmt::format("frame_{:04d}.png", first + t + 1);
          display::write_png_bytes(path, pngs[t]);
          written.push_back(path.string());
          images_bar.advance();
        }
      });
      group.commit();
    } catch (...) {
      std::error_code ignored;
      if (created) std::filesystem::remove(out_dir, ignored);
      throw;
    }
  }
  images_bar.finish();
  if (std::FILE* out = ctx.summary()) {
    // The orbital followed in each frame, "(-)" where its sign was flipped (a plain loop: clang
    // with libstdc++ 12 cannot take a JSON array as a range).
    std::string followed;
    for (const nlohmann::json& j : report_frames)
      followed += fmt::format("{}{}{}", followed.empty() ? "" : " ", j["orbital"].get<std::size_t>(),
                              j["sign_flipped"].get<bool>() ? "(-)" : "");
    std::fprintf(
        out, "%zu frames, orbital followed: %s; grid %.3f s, surfaces %.3f s, images %.3f s; wrote %s%s\n",
        frames.size(), followed.c_str(), total.grid_seconds, total.surface_seconds, total.render_seconds,
        out_dir.string().c_str(), on_device ? " (on the GPU)" : "");
  }
  ctx.report["frames"] = report_frames;
  ctx.report["grid_seconds"] = total.grid_seconds;
  ctx.report["surface_seconds"] = total.surface_seconds;
  ctx.report["render_seconds"] = total.render_seconds;
  ctx.report["render_backend"] = total.render_backend;
  ctx.report["on_device"] = on_device;
  ctx.report["outputs"] = written;
  return 0;
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

// `molaccel orbital view`: one self-contained HTML page (WebGL, works offline) showing orbital
// lobes or a density with the molecule. One file: each orbital chosen (and the density) is a
// frame of the page; several files: a trajectory, the orbital followed from frame to frame as in
// `orbital animate`. Surfaces from the library's display pipeline (orbital::display_fields), the
// page from display::write_html_viewer.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "orbital_scene.hpp"

namespace molaccel::cli {
namespace {

using namespace molaccel::orbital;
using namespace molaccel::cli::orbital_scene;

struct ViewOptions {
  std::vector<std::string> inputs;
  bool as_listed = false;
  std::vector<std::string> orbitals;
  std::string density;
  double iso = 0;  // 0 = the default of the field (0.05 orbitals, 0.002 densities)
  std::string output;
  bool atoms = true;
  double padding = 3.0, spacing = 0.1;
  std::string backend = "auto";
  std::string surface_backend = "auto";
  std::string view;
  int fps = 10;
};

// One frame of the page: a field of one input file.
struct PageFrame {
  std::size_t file = 0;
  bool is_orbital = true;
  OrbitalRef orbital;
  TrackedOrbital tracked;   // trajectories: how the orbital was followed
  std::string description;  // for messages
  std::string label;        // shown on the page
};

int run_view(RunContext& ctx, const ViewOptions& o) {
  if (!std::isfinite(o.iso) || o.iso < 0)
    throw InputError("--iso", 0, fmt::format("must be a positive number (got {})", o.iso));
  if (o.fps < 1 || o.fps > 240) throw InputError("--fps", 0, fmt::format("must be 1..240 (got {})", o.fps));
  std::string ext = std::filesystem::path(o.output).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext != ".html" && ext != ".htm") throw InputError(o.output, 0, "the viewer must be an .html file");
  display::ViewerOptions page;
  if (!o.view.empty()) page.view = display::parse_view(o.view);
  page.frames_per_second = o.fps;
  const bool trajectory = o.inputs.size() > 1;
  if (trajectory && (o.orbitals.size() > 1 || (!o.orbitals.empty() && !o.density.empty())))
    throw InputError("--orbital", 0,
                     "a trajectory shows one field: give one --orbital (default homo) or --density");

  std::vector<std::string> files = o.inputs;
  if (!o.as_listed) std::stable_sort(files.begin(), files.end(), natural_less);
  std::vector<Wavefunction> wavefunctions;
  for (const auto& file : files) wavefunctions.push_back(read_wavefunction(file));

  // Messages name a trajectory's frame by number and path, the page by number and file name.
  std::vector<PageFrame> frames;
  auto add = [&](std::size_t f, bool is_orbital, OrbitalRef ref, TrackedOrbital tracked,
                 const std::string& field) {
    if (!trajectory) return frames.push_back({f, is_orbital, ref, tracked, field, field});
    frames.push_back({f, is_orbital, ref, tracked, fmt::format("frame {} ({}), {}", f + 1, files[f], field),
                      fmt::format("frame {} of {}: {}, {}", f + 1, files.size(),
                                  std::filesystem::path(files[f]).filename().string(), field)});
  };
  if (!trajectory) {
    const Wavefunction& wfn = wavefunctions.front();
    std::vector<std::string> selections = o.orbitals;
    if (selections.empty() && o.density.empty()) selections.push_back("homo");
    for (const std::string& selection : selections)
      for (const OrbitalRef& r : parse_orbital_selection(selection, wfn))
        add(0, true, r, {}, "orbital " + describe_orbital(r, wfn));
    if (!o.density.empty()) {
      parse_density(o.density);
      add(0, false, {}, {}, o.density + " density");
    }
  } else if (!o.density.empty()) {
    parse_density(o.density);
    check_same_system(wavefunctions);
    for (std::size_t f = 0; f < files.size(); ++f) add(f, false, {}, {}, o.density + " density");
  } else {
    const std::string name = o.orbitals.empty() ? "homo" : o.orbitals.front();
    const auto track = track_orbital(wavefunctions, parse_orbital(name, wavefunctions.front()));
    for (std::size_t f = 0; f < files.size(); ++f)
      add(f, true, track[f].ref, track[f], "orbital " + describe_orbital(track[f].ref, wavefunctions[f]));
  }

  // One grid box around every frame's atoms, as in `orbital animate`.
  Wavefunction all_atoms;
  for (const auto& w : wavefunctions)
    all_atoms.atoms.insert(all_atoms.atoms.end(), w.atoms.begin(), w.atoms.end());
  const GridSpec grid = automatic_grid(trajectory ? all_atoms : wavefunctions.front(), o.padding, o.spacing);

  // Every frame's surfaces are made before the page is written: a frame without a surface at the
  // isovalue stops the run with nothing written. Batches of frames through the display pipeline
  // (on GPUs spread over them, grid and surfaces in device memory).
  DisplayOptions options;
  options.iso = o.iso;
  options.atoms = o.atoms;
  options.grid.backend = parse_backend(o.backend);
  options.surface_backend = display::parse_surface_backend(o.surface_backend);
  const Resources resources = ctx.resources();
  const bool on_device = display_on_device(resources, options);
  log_info("orbital view: {} frame(s) on a {} x {} x {} grid, {}", frames.size(), grid.counts[0],
           grid.counts[1], grid.counts[2], resources.describe());
  std::vector<DisplayItem> items;
  for (const PageFrame& frame : frames) {
    DisplayItem item{&wavefunctions[frame.file],
                     frame.is_orbital ? orbital_field(frame.orbital, frame.tracked.sign_flipped)
                                      : density_field(parse_density(o.density))};
    item.field.description = frame.description;
    items.push_back(std::move(item));
  }
  const std::size_t batch = batch_size(resources, on_device);
  double grid_seconds = 0, surface_seconds = 0;
  std::vector<display::Scene> scenes;
  nlohmann::json report_frames = nlohmann::json::array();
  ProgressBar bar("view: surfaces", frames.size(), "frames");
  for (std::size_t first = 0; first < items.size(); first += batch) {
    DisplayInfo info;
    std::vector<DisplayResult> results =
        display_fields(resources, items_from(items, first, batch), grid, options, &info);
    grid_seconds += info.grid_seconds;
    surface_seconds += info.surface_seconds;
    for (std::size_t i = 0; i < results.size(); ++i) {
      const PageFrame& frame = frames[first + i];
      DisplayResult& r = results[i];
      scenes.push_back(in_angstrom(std::move(r.scene)));
      bar.advance();
      std::string label = frame.label;
      nlohmann::json entry = {{"file", wavefunctions[frame.file].source},
                              {"field", frame.is_orbital ? "orbital" : o.density + " density"},
                              {"iso", std::stod(fmt::format("{}", r.iso))},  // 0.05, not 0.0500000007
                              {"positive_triangles", r.positive_triangles},
                              {"negative_triangles", r.negative_triangles}};
      if (frame.is_orbital) entry["orbital"] = frame.orbital.index + 1;
      if (trajectory && frame.is_orbital) {
        entry["overlap"] = frame.tracked.overlap;
        entry["sign_flipped"] = frame.tracked.sign_flipped;
        if (frame.file > 0)
          label += fmt::format("; |overlap| with frame {}: {:.3f}{}", frame.file, frame.tracked.overlap,
                               frame.tracked.sign_flipped ? ", sign flipped" : "");
      }
      page.frame_labels.push_back(label);
      report_frames.push_back(std::move(entry));
    }
  }
  bar.finish();
  const std::string first = std::filesystem::path(files.front()).filename().string();
  page.title = trajectory ? fmt::format("{} ... {} ({} frames)", first,
                                        std::filesystem::path(files.back()).filename().string(), files.size())
                          : first;
  display::write_html_viewer(o.output, scenes, page);
  const auto bytes = std::filesystem::file_size(o.output);
  if (std::FILE* out = ctx.summary())
    std::fprintf(out,
                 "%zu frame(s) on a %zu x %zu x %zu grid: grid %.3f s, surfaces %.3f s; wrote %s (%.1f MB)\n",
                 frames.size(), grid.counts[0], grid.counts[1], grid.counts[2], grid_seconds, surface_seconds,
                 o.output.c_str(), static_cast<double>(bytes) / 1e6);
  ctx.report["frames"] = report_frames;
  ctx.report["grid"] = {{"counts", grid.counts}, {"origin_bohr", grid.origin}, {"axes_bohr", grid.axes}};
  ctx.report["grid_seconds"] = grid_seconds;
  ctx.report["surface_seconds"] = surface_seconds;
  ctx.report["outputs"] = {o.output};
  ctx.report["output_bytes"] = bytes;
  ctx.report["length_unit"] = "angstrom";
  return 0;
}

const bool view_registered = register_command({
    .group = "orbital",
    .name = "view",
    .purpose =
        "Orbital lobes or a density in one offline HTML page (WebGL): rotate, zoom, step through frames",
    .example = "molaccel orbital view irc_*.molden --orbital homo -o irc.html",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto opts = std::make_shared<ViewOptions>();
      app.add_option("FILE", opts->inputs,
                     "A Molden or .fchk file (plain or gzip), or several: a trajectory, one file per frame "
                     "(same atoms and basis)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("--orbital", opts->orbitals,
                     "One file: orbitals (repeatable), each a frame of the page: homo, lumo+1, 12, all, a "
                     "range homo-5:lumo+5, beta:homo. A trajectory: the orbital of the first frame, followed "
                     "through the others. Default homo")
          ->allow_extra_args(false);
      app.add_option("--density", opts->density,
                     "A density surface: total, spin, alpha or beta (one file: also a frame of the page; a "
                     "trajectory: instead of an orbital, in every frame)");
      app.add_option(
          "--iso", opts->iso,
          "Isovalue (orbitals: surfaces at +iso and -iso, default 0.05; densities: default 0.002), "
          "atomic units");
      app.add_option("-o,--output", opts->output, "The page, an .html file")->required();
      app.add_flag("--as-listed", opts->as_listed,
                   "Keep a trajectory's frames in the order given (default: natural name order)");
      app.add_flag("--atoms,!--no-atoms", opts->atoms,
                   "Atoms and bonds as spheres and cylinders (default on)");
      app.add_option("--view", opts->view,
                     "Starting rotation (degrees, x then y then z) and zoom: rx=30,ry=-45,zoom=1.5");
      app.add_option("--fps", opts->fps, "Frames per second of the play button")->default_val(10);
      add_grid_options(app, opts->padding, opts->spacing, opts->backend, opts->surface_backend,
                       "all frames' atoms");
      common.add_device_options(app);
      app.footer(
          "The page loads nothing from elsewhere (meshes and WebGL code are inside it): drag to rotate, the "
          "wheel zooms, R resets the view; several frames get a slider and a play button (arrow keys, "
          "space). Camera and colours as in `orbital render` (+iso blue, -iso red; lengths in angstrom). A "
          "trajectory's orbital is followed by maximum overlap with the previous frame's, its sign kept "
          "continuous, as in `orbital animate`; frames that differ in atoms or basis are an error naming "
          "the frame. See docs/orbital.md, Surfaces, images and animations.\n");
      return [opts](RunContext& ctx) { return run_view(ctx, *opts); };
    },
    .order = 6,
});

}  // namespace
}  // namespace molaccel::cli

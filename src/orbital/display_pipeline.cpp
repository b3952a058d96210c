// The display pipeline (include/molaccel/orbital_display.hpp): orbital and density grids from this
// engine, surfaces, balls and sticks and images from the display module. Two paths: on GPUs each
// item is a scheduler tile that keeps grid and surfaces in its GPU's memory (the engine's
// cuda_backend::evaluate_on_device writes the grid into the display module's kept device buffer);
// elsewhere each item uses the whole resources through the public calls.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

#include "molaccel/orbital_display.hpp"
#include "orbital/evaluate_on_pool.hpp"
#include "orbital/packed_basis.hpp"
#if MOLACCEL_HAVE_CUDA
#include "display/render/render_backends.hpp"
#include "orbital/cuda/orbital_cuda.hpp"
#include "orbital/tuning.hpp"
#endif

namespace molaccel::orbital {

DisplayField orbital_field(OrbitalRef orbital, bool negate) {
  DisplayField f;
  f.orbital = orbital;
  f.negate = negate;
  return f;
}

DisplayField density_field(DensityKind kind) {
  DisplayField f;
  f.is_density = true;
  f.density = kind;
  return f;
}

namespace {

// Items processed as one grid request on the host path (memory: this many grids at once).
constexpr std::size_t kHostBatch = 8;

float iso_of(const DisplayOptions& options, const DisplayField& field) {
  return static_cast<float>(options.iso > 0 ? options.iso : (field.is_density ? 0.002 : 0.05));
}

std::string describe(const DisplayItem& item) {
  if (!item.field.description.empty()) return item.field.description;
  if (item.field.is_density) return fmt::format("{} density", to_string(item.field.density));
  return "orbital " + describe_orbital(item.field.orbital, *item.wavefunction);
}

InputError no_surface(const DisplayItem& item, float iso, float largest) {
  return InputError("--iso", 0,
                    fmt::format("{}: no surface at {}{} (the largest |value| on the grid is {:.4g}); give a "
                                "smaller --iso",
                                describe(item), item.field.is_density ? "" : "+/-", iso, largest));
}

void check_items(const std::vector<DisplayItem>& items, const GridSpec& grid, const DisplayOptions& options) {
  if (!std::isfinite(options.iso) || options.iso < 0)
    throw InputError("--iso", 0, fmt::format("must be a positive number (got {})", options.iso));
  if (grid.point_count() == 0) throw InputError("grid", 0, "the grid has no points");
  for (const DisplayItem& item : items) {
    if (!item.wavefunction) MOLACCEL_THROW(Error, "display_fields: an item without a wavefunction");
    if (item.field.is_density) continue;
    const OrbitalSet& set =
        item.field.orbital.spin == Spin::alpha ? item.wavefunction->alpha : item.wavefunction->beta;
    if (item.field.orbital.index >= set.count())
      throw InputError(
          item.wavefunction->source, 0,
          fmt::format("orbital {} does not exist ({} orbitals)", item.field.orbital.index + 1, set.count()));
  }
}

display::Colour density_colour() {
  return {0.6f, 0.6f, 0.85f, 1};
}

// The molecule of each distinct wavefunction as balls and sticks (bohr), when atoms are asked for.
std::map<const Wavefunction*, display::Scene> molecules_of(const std::vector<DisplayItem>& items,
                                                           bool atoms) {
  std::map<const Wavefunction*, display::Scene> out;
  for (const DisplayItem& item : items) {
    display::Scene& scene = out[item.wavefunction];
    if (!atoms || !scene.parts.empty()) continue;
    std::vector<std::array<double, 3>> positions;
    std::vector<int> numbers;
    for (const Atom& a : item.wavefunction->atoms) {
      positions.push_back(a.position);
      numbers.push_back(a.atomic_number);
    }
    scene.parts = display::ball_and_stick(positions, numbers, bohr_in_angstrom);
  }
  return out;
}

display::Scene scene_of(display::Mesh positive, display::Mesh negative, bool density,
                        const display::Scene& molecule) {
  display::Scene scene;
  if (!positive.empty())
    scene.parts.push_back({density ? "surface" : "positive lobe", std::move(positive),
                           density ? density_colour() : display::positive_phase_colour()});
  if (!negative.empty())
    scene.parts.push_back({"negative lobe", std::move(negative), display::negative_phase_colour()});
  scene.parts.insert(scene.parts.end(), molecule.parts.begin(), molecule.parts.end());
  return scene;
}

// The host path: a run of orbitals of one wavefunction is one grid request (up to kHostBatch);
// then each item's surfaces, scene, framing and image in item order.
void on_host(const Resources& resources, const std::vector<DisplayItem>& items, const GridSpec& grid,
             const DisplayOptions& options, std::vector<DisplayResult>& results, DisplayInfo& info) {
  const auto molecules = molecules_of(items, options.atoms);
  const std::size_t points = grid.point_count();
  results.assign(items.size(), DisplayResult{});
  for (std::size_t first = 0; first < items.size();) {
    const DisplayItem& head = items[first];
    std::size_t end = first + 1;
    if (!head.field.is_density)
      while (end < items.size() && end - first < kHostBatch && !items[end].field.is_density &&
             items[end].wavefunction == head.wavefunction)
        ++end;
    EvaluationInfo evaluation;
    std::vector<float> values;
    if (head.field.is_density) {
      values = evaluate_density(resources, *head.wavefunction, grid, head.field.density, options.grid,
                                &evaluation);
    } else {
      std::vector<OrbitalRef> refs;
      for (std::size_t i = first; i < end; ++i) refs.push_back(items[i].field.orbital);
      values = evaluate_orbitals(resources, *head.wavefunction, grid, refs, options.grid, &evaluation);
    }
    info.grid_seconds += evaluation.seconds;
    info.grid_backend = evaluation.backend;
    for (std::size_t i = first; i < end; ++i) {
      const DisplayItem& item = items[i];
      DisplayResult& r = results[i];
      float* v = values.data() + (i - first) * points;
      if (item.field.negate && !item.field.is_density)
        for (std::size_t p = 0; p < points; ++p) v[p] = -v[p];
      r.iso = iso_of(options, item.field);
      const display::ScalarGrid view{grid.origin, grid.axes, grid.counts, v};
      display::SurfaceInfo surface;
      display::Mesh positive = display::extract_isosurface(resources, view, r.iso, display::Inside::above,
                                                           options.surface_backend, &surface);
      info.surface_seconds += surface.seconds;
      display::Mesh negative;
      if (!item.field.is_density) {
        negative = display::extract_isosurface(resources, view, -r.iso, display::Inside::below,
                                               options.surface_backend, &surface);
        info.surface_seconds += surface.seconds;
      }
      info.surface_backend = surface.backend;
      if (positive.empty() && negative.empty()) {
        float largest = 0;
        for (std::size_t p = 0; p < points; ++p) largest = std::max(largest, std::abs(v[p]));
        throw no_surface(item, r.iso, largest);
      }
      r.positive_triangles = positive.triangle_count();
      r.negative_triangles = negative.triangle_count();
      r.scene = scene_of(std::move(positive), std::move(negative), item.field.is_density,
                         molecules.at(item.wavefunction));
      if (options.framing) r.framing = display::framing_of(r.scene);
      if (options.image) {
        display::RenderInfo render;
        r.image = display::render_scene(resources, r.scene, options.render, &render);
        info.render_seconds += render.seconds;
        info.render_backend = render.backend;
      }
      if (!options.meshes) r.scene = {};
    }
    first = end;
  }
}

#if MOLACCEL_HAVE_CUDA
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Coefficient ids of negated orbitals for the worker's device state: the request cache's id with
// the top bit set (the cache counts up from 1, so the two never meet).
constexpr std::uint64_t kNegated = 1ull << 63;

struct Made {
  float largest = -1;  // >= 0: no surface, the largest |value| on the grid
  double grid_seconds = 0, surface_seconds = 0, render_seconds = 0;
};

// One item on a GPU worker: the grid into the worker's kept device buffer, both surfaces (one for a
// density) in one pass, then what the options ask for, drawn or copied from the device.
void item_on_device(WorkerContext& ctx, const DisplayItem& item, const GridSpec& grid,
                    const DisplayOptions& options, const display::Scene& molecule, DisplayResult& r,
                    Made& m) {
  const Wavefunction& wfn = *item.wavefunction;
  const bool density = item.field.is_density;
  const std::size_t points = grid.point_count();
  r.iso = iso_of(options, item.field);
  const auto t0 = Clock::now();
  std::vector<OrbitalRef> refs{item.field.orbital};
  std::vector<float> weights;
  if (density) {
    detail::DensityTerms terms = detail::density_terms(wfn, item.field.density);
    refs = std::move(terms.orbitals);
    weights = std::move(terms.weights);
  }
  if (refs.empty()) {  // a density of no orbitals (beta of a closed shell): zero everywhere
    m.largest = 0;
    return;
  }
  const detail::PreparedRequest prepared =
      detail::prepare_request(wfn, options.grid.screening_tolerance, refs);
  cuda_backend::GpuJob job;
  job.basis = prepared.basis.get();
  job.coefficients = prepared.coefficients->data();
  job.basis_id = prepared.basis_id;
  job.coefficients_id = prepared.coefficients_id;
  std::vector<float> negated;  // negated coefficients give exactly the negated values
  if (item.field.negate && !density) {
    negated = *prepared.coefficients;
    for (float& c : negated) c = -c;
    job.coefficients = negated.data();
    job.coefficients_id = prepared.coefficients_id ? (prepared.coefficients_id | kNegated) : 0;
  }
  job.orbitals = refs.size();
  job.weights = density ? weights.data() : nullptr;
  job.grid = &grid;
  job.jit = options.grid.backend != Backend::cuda_generic;
  job.tuning = detail::tuning_for(ctx.worker().device, {refs.size(), density});
  float* values = display::cuda::device_grid(ctx, points);
  void* stream = cuda_backend::evaluate_on_device(ctx, job, values);
  display::cuda::synchronize(ctx, stream);
  const auto t1 = Clock::now();
  const float unused = 0;  // make_geometry checks a host pointer; the kernels read `values`
  const display::ScalarGrid shape{grid.origin, grid.axes, grid.counts, &unused};
  const display::detail::GridGeometry levels[2] = {
      display::detail::make_geometry(shape, r.iso, display::Inside::above),
      display::detail::make_geometry(shape, -r.iso, display::Inside::below)};
  const display::cuda::DeviceSurfaces surfaces =
      display::cuda::extract_surfaces_on_device(ctx, levels, density ? 1 : 2, values, stream);
  m.grid_seconds = std::chrono::duration<double>(t1 - t0).count();
  m.surface_seconds = since(t1);
  r.positive_triangles = surfaces.mesh[0].triangles;
  r.negative_triangles = density ? 0 : surfaces.mesh[1].triangles;
  if (r.positive_triangles == 0 && r.negative_triangles == 0) {
    m.largest = 0;
    for (float v : display::cuda::download_grid(ctx, values, points))
      m.largest = std::max(m.largest, std::abs(v));
    return;
  }
  std::vector<display::cuda::DevicePart> parts;
  if (r.positive_triangles)
    parts.push_back({surfaces.mesh[0], density ? density_colour() : display::positive_phase_colour()});
  if (r.negative_triangles) parts.push_back({surfaces.mesh[1], display::negative_phase_colour()});
  const auto t2 = Clock::now();
  if (options.framing) r.framing = display::cuda::framing_on_device(ctx, parts, molecule, stream);
  if (options.image) display::cuda::render_on_device(ctx, parts, molecule, options.render, r.image, stream);
  m.render_seconds = since(t2);
  if (options.meshes) {
    display::Mesh positive = display::cuda::download(surfaces.mesh[0], stream);
    display::Mesh negative = density ? display::Mesh{} : display::cuda::download(surfaces.mesh[1], stream);
    r.scene = scene_of(std::move(positive), std::move(negative), density, molecule);
  }
}

void on_device(const Resources& resources, const std::vector<DisplayItem>& items, const GridSpec& grid,
               const DisplayOptions& options, std::vector<DisplayResult>& results, DisplayInfo& info) {
  if (options.image) display::detail::check_render_size(options.render);
  const auto molecules = molecules_of(items, options.atoms);
  results.resize(items.size());
  std::vector<Made> made(items.size());
  JobOptions job;
  job.name = "orbital display";
  job.progress_bar = false;
  run_tiles(
      resources, items.size(),
      [&](WorkerContext& ctx, std::size_t t) {
        // Everything but the image's memory, which the new image is drawn into.
        display::Image kept = options.image ? std::move(results[t].image) : display::Image{};
        results[t] = {};
        results[t].image = std::move(kept);
        made[t] = {};
        item_on_device(ctx, items[t], grid, options, molecules.at(items[t].wavefunction), results[t],
                       made[t]);
      },
      job);
  for (std::size_t t = 0; t < items.size(); ++t) {
    if (made[t].largest >= 0) throw no_surface(items[t], results[t].iso, made[t].largest);
    info.grid_seconds += made[t].grid_seconds;
    info.surface_seconds += made[t].surface_seconds;
    info.render_seconds += made[t].render_seconds;
  }
  info.grid_backend =
      to_string(options.grid.backend == Backend::cuda_generic ? Backend::cuda_generic : Backend::cuda_jit);
  info.surface_backend = "cuda";
  if (options.image) info.render_backend = "cuda";
}
#endif

}  // namespace

bool display_on_device(const Resources& resources, const DisplayOptions& options) {
#if MOLACCEL_HAVE_CUDA
  const Backend grid = options.grid.backend;
  const display::SurfaceBackend surfaces = options.surface_backend;
  return resources.uses_gpu() && !resources.uses_cpu() && grid != Backend::cpu &&
         grid != Backend::reference &&
         (surfaces == display::SurfaceBackend::automatic || surfaces == display::SurfaceBackend::cuda) &&
         !(options.image && options.render.backend == display::RenderBackend::cpu);
#else
  (void)resources;
  (void)options;
  return false;
#endif
}

std::vector<DisplayResult> display_fields(const Resources& resources, const std::vector<DisplayItem>& items,
                                          const GridSpec& grid, const DisplayOptions& options,
                                          DisplayInfo* info) {
  std::vector<DisplayResult> results;
  display_fields(resources, items, grid, options, results, info);
  return results;
}

void display_fields(const Resources& resources, const std::vector<DisplayItem>& items, const GridSpec& grid,
                    const DisplayOptions& options, std::vector<DisplayResult>& results, DisplayInfo* info) {
  check_items(items, grid, options);
  DisplayInfo local;
  DisplayInfo& out = info ? *info : local;
  out = {};
  if (items.empty()) {
    results.clear();
    return;
  }
  out.on_device = display_on_device(resources, options);
#if MOLACCEL_HAVE_CUDA
  if (out.on_device) {
    on_device(resources, items, grid, options, results, out);
    return;
  }
#endif
  on_host(resources, items, grid, options, results, out);
}

}  // namespace molaccel::orbital

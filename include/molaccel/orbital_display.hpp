// molaccel orbital display pipeline: orbitals and densities of wavefunctions as isosurface meshes
// and images in one call, grid -> surfaces -> scene and/or picture (the loop behind `molaccel
// orbital surface | render | animate | view`, and the call Python binds).
//
// It joins the orbital engine (grids) and the display module (isosurfaces, balls and sticks, the
// renderers); neither of those knows the other, and the runtime knows neither. Lengths are in bohr,
// like every public value of the orbital engine (display::scale_scene converts a scene to angstrom
// before writing files).
//
// Where it runs. With GPU resources (every worker a GPU) and no CPU choice among the backends
// (grid cpu/reference, surfaces cpu/reference, an image drawn by the cpu renderer), each item is a
// tile of the scheduler on one GPU: the orbital engine's kernel writes the grid into that GPU's
// memory, both surfaces are extracted there in one pass, and the image is drawn there; only the
// results (meshes, image, framing) come back. Items spread over the GPUs. Otherwise (the CPU, or a
// CPU backend asked for) each item runs on all of the resources in turn: the grid into host
// memory, surfaces and image by the chosen backends. Both give the same triangles for the same
// grid; the grids of the two paths differ by float rounding, the images by the renderers' tolerance
// (display.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "molaccel/display.hpp"
#include "molaccel/orbital.hpp"

namespace molaccel::orbital {

// One field to show: an orbital (two surfaces: +iso blue, -iso red) or a density (one surface at
// +iso).
struct DisplayField {
  bool is_density = false;
  OrbitalRef orbital;                        // the orbital (is_density false)
  bool negate = false;                       // draw the orbital negated (sign continuity along a trajectory)
  DensityKind density = DensityKind::total;  // the density (is_density true)
  std::string description;  // names the field in messages; "" = "orbital 5 (HOMO)", "total density"
};
DisplayField orbital_field(OrbitalRef orbital, bool negate = false);
DisplayField density_field(DensityKind kind);

// A field of a wavefunction (the wavefunction must outlive the call).
struct DisplayItem {
  const Wavefunction* wavefunction = nullptr;
  DisplayField field;
};

struct DisplayOptions {
  double iso = 0;     // isovalue, atomic units; 0 = the field's default: 0.05 (orbitals), 0.002 (densities)
  bool atoms = true;  // the molecule as balls and sticks in the scene and the image
  EvaluateOptions grid;  // the grid's backend and screening (planes_per_tile, inject_fault: host path only)
  display::SurfaceBackend surface_backend = display::SurfaceBackend::automatic;
  // What each result holds.
  bool meshes = true;    // the scene (surfaces, then the molecule)
  bool image = false;    // the picture, drawn with `render` (framing in bohr; radius 0 = the scene's)
  bool framing = false;  // the scene's framing (display::framing_of, in bohr)
  display::RenderOptions render;
};

struct DisplayResult {
  // Parts: "positive lobe" and "negative lobe" (an orbital; a lobe without triangles is left out) or
  // "surface" (a density), then the molecule's parts. Empty unless DisplayOptions::meshes.
  display::Scene scene;
  display::Image image;      // DisplayOptions::image
  display::Framing framing;  // DisplayOptions::framing
  float iso = 0;             // the isovalue used
  std::size_t positive_triangles = 0, negative_triangles = 0;
};

struct DisplayInfo {
  bool on_device = false;  // the GPU path: grid, surfaces and image in one GPU's memory per item
  std::string grid_backend, surface_backend, render_backend;  // what ran
  // Summed over items (on several GPUs, more than the wall time).
  double grid_seconds = 0, surface_seconds = 0, render_seconds = 0;
};

// Whether display_fields takes the GPU path with these resources and options.
bool display_on_device(const Resources& resources, const DisplayOptions& options);

// The fields, results in item order. Throws InputError("--iso", ...) naming the first item (in item
// order) whose field crosses neither isovalue (its description and its largest |value| on the grid),
// and returns nothing then; InputError for a bad orbital, grid or render size; what the backends
// throw.
std::vector<DisplayResult> display_fields(const Resources& resources, const std::vector<DisplayItem>& items,
                                          const GridSpec& grid, const DisplayOptions& options,
                                          DisplayInfo* info = nullptr);

// The same into `results` (resized to the items; after a throw its contents are unspecified). On
// the GPU path each image is drawn into the memory of the image at its position from the caller's
// last call where that has the same size: a frame loop that keeps `results` from call to call
// touches no new host memory per frame (8 MB at 1920 x 1080; on some hosts the page faults of
// fresh memory cost more than drawing the frame).
void display_fields(const Resources& resources, const std::vector<DisplayItem>& items, const GridSpec& grid,
                    const DisplayOptions& options, std::vector<DisplayResult>& results,
                    DisplayInfo* info = nullptr);

}  // namespace molaccel::orbital

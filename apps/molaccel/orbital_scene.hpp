// Pieces shared by the orbital display commands (`orbital surface | render | animate` in
// cmd_orbital_display.cpp, `orbital view` in cmd_orbital_view.cpp): frame ordering, the molecule as
// balls and sticks, and the lobes of one field as a scene (in angstrom).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "molaccel/display.hpp"
#include "molaccel/orbital.hpp"

namespace molaccel::cli::orbital_scene {

// Natural order: runs of digits compare as numbers ("frame9" before "frame10").
inline bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      std::string da = a.substr(i, i2 - i), db = b.substr(j, j2 - j);
      da.erase(0, std::min(da.find_first_not_of('0'), da.size()));
      db.erase(0, std::min(db.find_first_not_of('0'), db.size()));
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

inline orbital::DensityKind parse_density(const std::string& text) {
  using orbital::DensityKind;
  for (DensityKind k : {DensityKind::total, DensityKind::spin, DensityKind::alpha, DensityKind::beta})
    if (text == orbital::to_string(k)) return k;
  throw InputError("--density", 0, fmt::format("unknown density '{}' (total, spin, alpha, beta)", text));
}

// The molecule as balls and sticks, in bohr like the grid.
inline std::vector<display::ScenePart> molecule_parts(const orbital::Wavefunction& wfn) {
  std::vector<std::array<double, 3>> positions;
  std::vector<int> numbers;
  for (const orbital::Atom& a : wfn.atoms) {
    positions.push_back(a.position);
    numbers.push_back(a.atomic_number);
  }
  return display::ball_and_stick(positions, numbers, orbital::bohr_in_angstrom);
}

inline float default_iso(double requested, bool is_orbital) {
  return static_cast<float>(requested > 0 ? requested : (is_orbital ? 0.05 : 0.002));
}

inline InputError no_surface(float largest, bool is_orbital, float iso, const std::string& description) {
  return InputError("--iso", 0,
                    fmt::format("{}: no surface at {}{} (the largest |value| on the grid is {:.4g}); give a "
                                "smaller --iso",
                                description, is_orbital ? "+/-" : "", iso, largest));
}
inline InputError no_surface(const std::vector<float>& values, bool is_orbital, float iso,
                             const std::string& description) {
  float largest = 0;
  for (float v : values) largest = std::max(largest, std::abs(v));
  return no_surface(largest, is_orbital, iso, description);
}

// Whether the field crosses +iso (or, for an orbital, -iso) somewhere: points on both sides.
inline bool has_surface(const std::vector<float>& values, bool is_orbital, float iso) {
  bool above = false, not_above = false, below = false, not_below = false;
  for (float v : values) {
    (v > iso ? above : not_above) = true;
    (v < -iso ? below : not_below) = true;
  }
  return (above && not_above) || (is_orbital && below && not_below);
}

// The lobes (or a density's surface) with the molecule, scaled from bohr to angstrom.
inline display::Scene scene_of(display::Mesh positive, display::Mesh negative, bool is_orbital,
                               const std::vector<display::ScenePart>& molecule) {
  display::Scene scene;
  if (!positive.empty())
    scene.parts.push_back(
        {is_orbital ? "positive lobe" : "surface", std::move(positive),
         is_orbital ? display::positive_phase_colour() : display::Colour{0.6f, 0.6f, 0.85f, 1}});
  if (!negative.empty())
    scene.parts.push_back({"negative lobe", std::move(negative), display::negative_phase_colour()});
  for (const auto& part : molecule) scene.parts.push_back(part);
  display::scale_scene(scene, orbital::bohr_in_angstrom);
  return scene;
}

// The surfaces of one field (both phases of an orbital, one surface of a density) with the molecule,
// scaled to angstrom. No surface at the isovalue is an error naming the field.
struct FieldScene {
  display::Scene scene;
  std::size_t positive_triangles = 0, negative_triangles = 0;
  float iso = 0;
  double seconds = 0;
};
inline FieldScene field_scene(const Resources& resources, const orbital::GridSpec& grid,
                              const std::vector<float>& values, bool is_orbital, double requested_iso,
                              display::SurfaceBackend backend,
                              const std::vector<display::ScenePart>& molecule,
                              const std::string& description) {
  FieldScene out;
  out.iso = default_iso(requested_iso, is_orbital);
  const display::ScalarGrid view{grid.origin, grid.axes, grid.counts, values.data()};
  display::SurfaceInfo info;
  display::Mesh positive =
      display::extract_isosurface(resources, view, out.iso, display::Inside::above, backend, &info);
  out.seconds += info.seconds;
  display::Mesh negative;
  if (is_orbital) {
    negative = display::extract_isosurface(resources, view, -out.iso, display::Inside::below, backend, &info);
    out.seconds += info.seconds;
  }
  if (positive.empty() && negative.empty()) throw no_surface(values, is_orbital, out.iso, description);
  out.positive_triangles = positive.triangle_count();
  out.negative_triangles = negative.triangle_count();
  out.scene = scene_of(std::move(positive), std::move(negative), is_orbital, molecule);
  return out;
}

// The grid box and backend options the display commands share; `whose_atoms` completes the padding's
// help ("the atoms", "all frames' atoms").
inline void add_grid_options(CLI::App& app, double& padding, double& spacing, std::string& backend,
                             std::string& surface_backend, const std::string& whose_atoms) {
  app.add_option("--padding", padding, "Grid box: padding around " + whose_atoms + ", angstrom")
      ->default_val(3.0)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--spacing", spacing, "Grid spacing, angstrom")
      ->default_val(0.1)
      ->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "Grid backend: auto, cpu, cuda-jit, cuda-generic or reference")
      ->default_val("auto");
  app.add_option("--surface-backend", surface_backend, "Isosurface backend: auto, cpu, cuda or reference")
      ->default_val("auto");
}

}  // namespace molaccel::cli::orbital_scene

// Pieces shared by the orbital display commands (`orbital surface | render | animate` in
// cmd_orbital_display.cpp, `orbital view` in cmd_orbital_view.cpp): frame ordering, option parsing
// and the grid options. The work itself is the library's display pipeline (orbital_display.hpp).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "molaccel/display.hpp"
#include "molaccel/orbital.hpp"
#include "molaccel/orbital_display.hpp"

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

// A scene of the display pipeline (bohr, like the grid) in angstrom, the unit of the files.
inline display::Scene in_angstrom(display::Scene scene) {
  display::scale_scene(scene, orbital::bohr_in_angstrom);
  return scene;
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

// Items [first, first + batch) of `items` (fewer at the end): display_fields takes the items of a
// command a batch at a time, so that their grids and surfaces need not all be held at once.
inline std::vector<orbital::DisplayItem> items_from(const std::vector<orbital::DisplayItem>& items,
                                                    std::size_t first, std::size_t batch) {
  return std::vector<orbital::DisplayItem>(
      items.begin() + static_cast<std::ptrdiff_t>(first),
      items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), first + batch)));
}

// Items per display_fields call of the surface, render and view commands: memory holds one batch
// of meshes or images (files already written wait, staged, for the run's commit). On GPUs at
// least two per GPU, so every GPU has work; 8 on the CPU.
inline std::size_t batch_size(const Resources& resources, bool on_device) {
  return on_device ? std::max<std::size_t>(8, 2 * resources.gpus().size()) : 8;
}

}  // namespace molaccel::cli::orbital_scene

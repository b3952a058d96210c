// Fields for the display tests: a Gaussian s function (a sphere at every level), a p-like lobe
// pair, random values; and mesh checks (closed, consistently wound, unit normals).
#pragma once

#include <cmath>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "molaccel/display.hpp"
#include "testing/testing.hpp"

namespace molaccel::display::test {

struct Field {
  ScalarGrid grid;
  std::vector<float> values;
  Field() = default;
  Field(const Field&) = delete;
};

// f(r) = exp(-alpha |r - centre|^2) * (1 or the x offset, for a p lobe pair) on an orthogonal grid.
inline void fill_gaussian(Field& f, std::array<std::size_t, 3> counts, double spacing,
                          std::array<double, 3> origin, std::array<double, 3> centre, double alpha,
                          bool p_lobe = false) {
  f.grid.origin = origin;
  f.grid.axes = {{{spacing, 0, 0}, {0, spacing, 0}, {0, 0, spacing}}};
  f.grid.counts = counts;
  f.values.resize(counts[0] * counts[1] * counts[2]);
  for (std::size_t i = 0; i < counts[0]; ++i)
    for (std::size_t j = 0; j < counts[1]; ++j)
      for (std::size_t k = 0; k < counts[2]; ++k) {
        const double d[3] = {origin[0] + i * spacing - centre[0], origin[1] + j * spacing - centre[1],
                             origin[2] + k * spacing - centre[2]};
        const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        f.values[(i * counts[1] + j) * counts[2] + k] =
            static_cast<float>((p_lobe ? d[0] : 1.0) * std::exp(-alpha * r2));
      }
  f.grid.values = f.values.data();
}

inline void fill_random(Field& f, std::array<std::size_t, 3> counts, std::uint32_t seed,
                        std::array<std::array<double, 3>, 3> axes) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  f.grid.origin = {0.25, -0.5, 1.0};
  f.grid.axes = axes;
  f.grid.counts = counts;
  f.values.resize(counts[0] * counts[1] * counts[2]);
  for (float& v : f.values) v = u(rng);
  f.grid.values = f.values.data();
}

// Every undirected edge in exactly two triangles, once in each direction (closed and consistently
// wound); returns a description of the first failure, "" when none.
inline std::string closed_surface_problem(const Mesh& mesh) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> directed;
  for (std::size_t t = 0; t < mesh.triangle_count(); ++t)
    for (int e = 0; e < 3; ++e) ++directed[{mesh.indices[3 * t + e], mesh.indices[3 * t + (e + 1) % 3]}];
  for (const auto& [edge, count] : directed) {
    if (count != 1) return "edge used twice in one direction (winding flips or a fin)";
    const auto back = directed.find({edge.second, edge.first});
    if (back == directed.end()) return "edge with one triangle (a hole)";
  }
  return "";
}

inline double max_normal_length_error(const Mesh& mesh) {
  double worst = 0;
  for (std::size_t v = 0; v < mesh.vertex_count(); ++v) {
    const float* n = &mesh.normals[3 * v];
    worst = std::max(
        worst, std::abs(std::sqrt(double(n[0]) * n[0] + double(n[1]) * n[1] + double(n[2]) * n[2]) - 1));
  }
  return worst;
}

// A p-like pair of lobes (a signed Gaussian field: blue +iso lobe, red -iso lobe) shifted by `dx`
// along x, extracted on the CPU at +/-0.05: the scene the render and viewer tests draw.
inline Scene lobe_pair_scene(double dx = 0) {
  Field f;
  fill_gaussian(f, {50, 41, 41}, 0.12, {-3.0 + dx, -2.4, -2.4}, {dx, 0, 0}, 1.0, true);
  Scene scene;
  const Resources cpu = Resources::cpu(2);
  scene.parts.push_back(
      {"positive lobe", extract_isosurface(cpu, f.grid, 0.05f, Inside::above), positive_phase_colour()});
  scene.parts.push_back(
      {"negative lobe", extract_isosurface(cpu, f.grid, -0.05f, Inside::below), negative_phase_colour()});
  return scene;
}

}  // namespace molaccel::display::test

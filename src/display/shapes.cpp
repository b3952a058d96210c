// Ball-and-stick shapes (UV spheres, open cylinders), element and phase colours.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "molaccel/display.hpp"

namespace molaccel::display {
namespace {

// Covalent radii in angstrom (Cordero et al., Dalton Trans. 2008), Z = 1..36.
constexpr double kCovalentRadius[] = {0.31, 0.28, 1.28, 0.96, 0.84, 0.76, 0.71, 0.66, 0.57, 0.58, 1.66, 1.41,
                                      1.21, 1.11, 1.07, 1.05, 1.02, 1.06, 2.03, 1.76, 1.70, 1.60, 1.53, 1.39,
                                      1.39, 1.32, 1.26, 1.24, 1.32, 1.22, 1.22, 1.20, 1.19, 1.20, 1.20, 1.16};

double covalent_radius(int z) {
  return z >= 1 && z <= 36 ? kCovalentRadius[z - 1] : 1.5;
}

void add_vertex(Mesh& m, const std::array<double, 3>& p, const std::array<double, 3>& n) {
  for (int x = 0; x < 3; ++x) {
    m.positions.push_back(static_cast<float>(p[x]));
    m.normals.push_back(static_cast<float>(n[x]));
  }
}

void add_sphere(Mesh& m, const std::array<double, 3>& centre, double radius) {
  constexpr int stacks = 12, slices = 24;
  const auto first = static_cast<std::uint32_t>(m.vertex_count());
  // Rings from the north pole (stack 0) to the south pole (stack `stacks`), one vertex per slice.
  for (int s = 0; s <= stacks; ++s) {
    const double theta = std::numbers::pi * s / stacks;
    for (int t = 0; t < slices; ++t) {
      const double phi = 2 * std::numbers::pi * t / slices;
      const std::array<double, 3> n{std::sin(theta) * std::cos(phi), std::sin(theta) * std::sin(phi),
                                    std::cos(theta)};
      add_vertex(m, {centre[0] + radius * n[0], centre[1] + radius * n[1], centre[2] + radius * n[2]}, n);
    }
  }
  auto at = [&](int s, int t) { return first + static_cast<std::uint32_t>(s * slices + (t % slices)); };
  for (int s = 0; s < stacks; ++s)
    for (int t = 0; t < slices; ++t) {
      // Counter-clockwise seen from outside (theta grows southwards, phi eastwards).
      const std::uint32_t a = at(s, t), b = at(s + 1, t), c = at(s + 1, t + 1), d = at(s, t + 1);
      if (s > 0) m.indices.insert(m.indices.end(), {a, b, d});
      if (s + 1 < stacks) m.indices.insert(m.indices.end(), {b, c, d});
    }
}

void add_cylinder(Mesh& m, const std::array<double, 3>& from, const std::array<double, 3>& to,
                  double radius) {
  constexpr int slices = 16;
  std::array<double, 3> axis{to[0] - from[0], to[1] - from[1], to[2] - from[2]};
  const double length = std::sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
  if (!(length > 0)) return;
  for (double& a : axis) a /= length;
  // Two unit vectors across the axis.
  std::array<double, 3> helper =
      std::abs(axis[0]) < 0.9 ? std::array<double, 3>{1, 0, 0} : std::array<double, 3>{0, 1, 0};
  std::array<double, 3> u{axis[1] * helper[2] - axis[2] * helper[1],
                          axis[2] * helper[0] - axis[0] * helper[2],
                          axis[0] * helper[1] - axis[1] * helper[0]};
  const double ul = std::sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
  for (double& x : u) x /= ul;
  const std::array<double, 3> w{axis[1] * u[2] - axis[2] * u[1], axis[2] * u[0] - axis[0] * u[2],
                                axis[0] * u[1] - axis[1] * u[0]};
  const auto first = static_cast<std::uint32_t>(m.vertex_count());
  for (int t = 0; t < slices; ++t) {
    const double phi = 2 * std::numbers::pi * t / slices;
    const std::array<double, 3> n{std::cos(phi) * u[0] + std::sin(phi) * w[0],
                                  std::cos(phi) * u[1] + std::sin(phi) * w[1],
                                  std::cos(phi) * u[2] + std::sin(phi) * w[2]};
    for (const auto& end : {from, to})
      add_vertex(m, {end[0] + radius * n[0], end[1] + radius * n[1], end[2] + radius * n[2]}, n);
  }
  for (int t = 0; t < slices; ++t) {
    const std::uint32_t a = first + 2 * t, b = first + 2 * t + 1;
    const std::uint32_t c = first + 2 * ((t + 1) % slices), d = c + 1;
    // u, w, axis is right-handed: going round from u to w and along the axis, outward is CCW.
    m.indices.insert(m.indices.end(), {a, c, d, a, d, b});
  }
}

}  // namespace

Colour positive_phase_colour() {
  return {0.12f, 0.35f, 0.85f, 1.0f};
}
Colour negative_phase_colour() {
  return {0.85f, 0.15f, 0.12f, 1.0f};
}

Colour element_colour(int z) {
  switch (z) {
    case 1:
      return {0.95f, 0.95f, 0.95f, 1};
    case 6:
      return {0.45f, 0.45f, 0.45f, 1};
    case 7:
      return {0.19f, 0.31f, 0.97f, 1};
    case 8:
      return {1.0f, 0.05f, 0.05f, 1};
    case 9:
    case 17:
      return {0.12f, 0.94f, 0.12f, 1};
    case 15:
      return {1.0f, 0.5f, 0.0f, 1};
    case 16:
      return {1.0f, 1.0f, 0.19f, 1};
    default:
      return {0.8f, 0.5f, 0.8f, 1};
  }
}

std::vector<ScenePart> ball_and_stick(const std::vector<std::array<double, 3>>& positions,
                                      const std::vector<int>& atomic_numbers, double unit_in_angstrom) {
  std::vector<ScenePart> parts;
  const double to_unit = 1.0 / unit_in_angstrom;
  for (std::size_t a = 0; a < positions.size(); ++a) {
    const int z = a < atomic_numbers.size() ? atomic_numbers[a] : 0;
    const std::string name = fmt::format("atoms_Z{}", z);
    auto it = std::find_if(parts.begin(), parts.end(), [&](const ScenePart& p) { return p.name == name; });
    if (it == parts.end()) {
      parts.push_back({name, {}, element_colour(z)});
      it = parts.end() - 1;
    }
    add_sphere(it->mesh, positions[a], (z == 1 ? 0.25 : 0.35) * to_unit);
  }
  ScenePart bonds{"bonds", {}, {0.6f, 0.6f, 0.6f, 1}};
  for (std::size_t a = 0; a < positions.size(); ++a)
    for (std::size_t b = a + 1; b < positions.size(); ++b) {
      double d2 = 0;
      for (int x = 0; x < 3; ++x)
        d2 += (positions[a][x] - positions[b][x]) * (positions[a][x] - positions[b][x]);
      const double limit =
          1.2 * (covalent_radius(atomic_numbers.at(a)) + covalent_radius(atomic_numbers.at(b))) * to_unit;
      if (d2 < limit * limit) add_cylinder(bonds.mesh, positions[a], positions[b], 0.12 * to_unit);
    }
  if (!bonds.mesh.empty()) parts.push_back(std::move(bonds));
  return parts;
}

void scale_scene(Scene& scene, double factor) {
  for (ScenePart& part : scene.parts)
    for (float& x : part.mesh.positions) x = static_cast<float>(x * factor);
}

}  // namespace molaccel::display

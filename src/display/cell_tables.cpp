// The cell tables, generated from the unit cube: which tetrahedron edges a case crosses, and the
// winding that makes each triangle face away from the inside corners.
#include "display/cell_tables.hpp"

#include <array>
#include <utility>
#include <vector>

namespace molaccel::display::detail {
namespace {

using Vec = std::array<int, 3>;

Vec corner_coordinates(int corner) {
  return {corner & 1, (corner >> 1) & 1, (corner >> 2) & 1};
}

// Twice the midpoint of the edge between two corners: integers, so the orientation test is exact.
Vec doubled_midpoint(int a, int b) {
  const Vec p = corner_coordinates(a), q = corner_coordinates(b);
  return {p[0] + q[0], p[1] + q[1], p[2] + q[2]};
}

std::uint8_t edge_code(int a, int b) {
  const int low = (a & b) == a ? a : b;  // one corner contains the other
  const int high = low == a ? b : a;
  return static_cast<std::uint8_t>(low << 3 | (high ^ low));
}

// One triangle over the tetrahedron edges (in, out) x 3, turned to face away from the inside.
void add_triangle(std::array<std::pair<int, int>, 3> edges, const std::vector<int>& inside,
                  const std::vector<int>& outside, std::vector<std::uint8_t>& out) {
  Vec p[3];
  for (int v = 0; v < 3; ++v) p[v] = doubled_midpoint(edges[v].first, edges[v].second);
  const Vec u{p[1][0] - p[0][0], p[1][1] - p[0][1], p[1][2] - p[0][2]};
  const Vec w{p[2][0] - p[0][0], p[2][1] - p[0][1], p[2][2] - p[0][2]};
  const Vec normal{u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
  // Direction from the inside corners' centroid to the outside corners' centroid, scaled to integers.
  Vec direction{0, 0, 0};
  for (int c : outside)
    for (int x = 0; x < 3; ++x) direction[x] += corner_coordinates(c)[x] * static_cast<int>(inside.size());
  for (int c : inside)
    for (int x = 0; x < 3; ++x) direction[x] -= corner_coordinates(c)[x] * static_cast<int>(outside.size());
  const int dot = normal[0] * direction[0] + normal[1] * direction[1] + normal[2] * direction[2];
  if (dot < 0) std::swap(edges[1], edges[2]);
  for (const auto& [a, b] : edges) out.push_back(edge_code(a, b));
}

CellTables generate() {
  CellTables tables{};
  const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int cell_case = 0; cell_case < 256; ++cell_case) {
    std::vector<std::uint8_t> edges;
    for (const auto& order : orders) {
      const int corners[4] = {0, 1 << order[0], (1 << order[0]) | (1 << order[1]), 7};
      std::vector<int> inside, outside;
      for (int c : corners) (cell_case >> c & 1 ? inside : outside).push_back(c);
      if (inside.empty() || outside.empty()) continue;
      if (inside.size() == 1 || outside.size() == 1) {
        const int lone = inside.size() == 1 ? inside[0] : outside[0];
        const std::vector<int>& others = inside.size() == 1 ? outside : inside;
        std::array<std::pair<int, int>, 3> tri;
        for (int v = 0; v < 3; ++v) tri[v] = {lone, others[v]};
        add_triangle(tri, inside, outside, edges);
      } else {
        // Inside {a, b}, outside {c, d}: the crossed edges ac, ad, bd, bc go round a quadrilateral.
        const int a = inside[0], b = inside[1], c = outside[0], d = outside[1];
        add_triangle({{{a, c}, {a, d}, {b, d}}}, inside, outside, edges);
        add_triangle({{{a, c}, {b, d}, {b, c}}}, inside, outside, edges);
      }
    }
    tables.count[cell_case] = static_cast<std::uint8_t>(edges.size() / 3);
    for (std::size_t e = 0; e < edges.size(); ++e) tables.edges[cell_case][e] = edges[e];
  }
  return tables;
}

}  // namespace

const CellTables& cell_tables() {
  static const CellTables tables = generate();
  return tables;
}

}  // namespace molaccel::display::detail

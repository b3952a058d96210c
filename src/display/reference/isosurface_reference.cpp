// The oracle: marching tetrahedra written out plainly, in double precision, on one thread. Each
// cell is cut into the six tetrahedra of its main diagonal; each tetrahedron's crossed edges give
// one or two triangles, turned by a geometric test to face away from the inside. Vertices are kept
// in a std::map by edge id. Shares no code with cpu/ and cuda/ (no tables, no shared arithmetic).
#include <algorithm>
#include <cmath>
#include <map>

#include "display/backends.hpp"

namespace molaccel::display::reference {
namespace {

struct Point3 {
  double x = 0, y = 0, z = 0;
};
Point3 operator-(Point3 a, Point3 b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}
Point3 cross(Point3 a, Point3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
double dot(Point3 a, Point3 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}

}  // namespace

Mesh extract_isosurface(const ScalarGrid& grid, float level_f, Inside inside_side) {
  const long n0 = static_cast<long>(grid.counts[0]), n1 = static_cast<long>(grid.counts[1]),
             n2 = static_cast<long>(grid.counts[2]);
  const double sign = inside_side == Inside::above ? 1.0 : -1.0;
  const double level = sign * static_cast<double>(level_f);
  auto value = [&](long i, long j, long k) {
    return sign * static_cast<double>(grid.values[(i * n1 + j) * n2 + k]);
  };
  auto is_inside = [&](long i, long j, long k) { return value(i, j, k) > level; };
  const auto& A = grid.axes;
  const double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
                     A[1][0] * (A[0][1] * A[2][2] - A[0][2] * A[2][1]) +
                     A[2][0] * (A[0][1] * A[1][2] - A[0][2] * A[1][1]);

  struct Corner {
    long i, j, k;
  };
  // A vertex: on the edge between two grid points, the lower one first.
  std::map<std::uint64_t, std::pair<Corner, Corner>> vertices;
  std::vector<std::array<std::uint64_t, 3>> triangles;
  auto edge_id = [&](Corner a, Corner b) {
    if (a.i > b.i || a.j > b.j || a.k > b.k) std::swap(a, b);
    const std::uint64_t step = static_cast<std::uint64_t>((b.i - a.i) + 2 * (b.j - a.j) + 4 * (b.k - a.k));
    const std::uint64_t id = static_cast<std::uint64_t>((a.i * n1 + a.j) * n2 + a.k) * 7 + step - 1;
    vertices.emplace(id, std::make_pair(a, b));
    return id;
  };

  for (long i = 0; i + 1 < n0; ++i)
    for (long j = 0; j + 1 < n1; ++j)
      for (long k = 0; k + 1 < n2; ++k) {
        int axes_order[3] = {0, 1, 2};
        do {
          // The tetrahedron 000 -> e_a -> e_a + e_b -> 111 of this cell.
          Corner tet[4] = {{i, j, k}, {i, j, k}, {i, j, k}, {i + 1, j + 1, k + 1}};
          long* first[3] = {&tet[1].i, &tet[1].j, &tet[1].k};
          *first[axes_order[0]] += 1;
          tet[2] = tet[1];
          long* second[3] = {&tet[2].i, &tet[2].j, &tet[2].k};
          *second[axes_order[1]] += 1;
          std::vector<Corner> in, out;
          for (const Corner& c : tet) (is_inside(c.i, c.j, c.k) ? in : out).push_back(c);
          if (in.empty() || out.empty()) continue;
          std::vector<std::array<std::pair<Corner, Corner>, 3>> pieces;
          if (in.size() == 1)
            pieces.push_back({{{in[0], out[0]}, {in[0], out[1]}, {in[0], out[2]}}});
          else if (out.size() == 1)
            pieces.push_back({{{in[0], out[0]}, {in[1], out[0]}, {in[2], out[0]}}});
          else {
            pieces.push_back({{{in[0], out[0]}, {in[0], out[1]}, {in[1], out[1]}}});
            pieces.push_back({{{in[0], out[0]}, {in[1], out[1]}, {in[1], out[0]}}});
          }
          for (auto& piece : pieces) {
            // Orientation from the midpoints in index space: normal against inside -> outside.
            Point3 m[3];
            for (int v = 0; v < 3; ++v)
              m[v] = {0.5 * static_cast<double>(piece[v].first.i + piece[v].second.i),
                      0.5 * static_cast<double>(piece[v].first.j + piece[v].second.j),
                      0.5 * static_cast<double>(piece[v].first.k + piece[v].second.k)};
            Point3 in_centre, out_centre;
            for (const Corner& c : in) {
              in_centre.x += static_cast<double>(c.i) / static_cast<double>(in.size());
              in_centre.y += static_cast<double>(c.j) / static_cast<double>(in.size());
              in_centre.z += static_cast<double>(c.k) / static_cast<double>(in.size());
            }
            for (const Corner& c : out) {
              out_centre.x += static_cast<double>(c.i) / static_cast<double>(out.size());
              out_centre.y += static_cast<double>(c.j) / static_cast<double>(out.size());
              out_centre.z += static_cast<double>(c.k) / static_cast<double>(out.size());
            }
            bool reverse = dot(cross(m[1] - m[0], m[2] - m[0]), out_centre - in_centre) < 0;
            if (det < 0) reverse = !reverse;  // a left-handed grid mirrors index space
            if (reverse) std::swap(piece[1], piece[2]);
            triangles.push_back({edge_id(piece[0].first, piece[0].second),
                                 edge_id(piece[1].first, piece[1].second),
                                 edge_id(piece[2].first, piece[2].second)});
          }
        } while (std::next_permutation(axes_order, axes_order + 3));
      }

  Mesh mesh;
  std::map<std::uint64_t, std::uint32_t> number;
  detail::check_index_range(vertices.size(), "reference");
  // Inverse of the axes matrix (columns = axes) for the gradient.
  double inv[3][3];
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      const int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
      // cofactor of matrix M[x][a] = A[a][x] at (c, r), transposed -> inverse[r][c]
      inv[r][c] = (A[c1][r1] * A[c2][r2] - A[c2][r1] * A[c1][r2]) / det;
    }
  auto derivative = [&](long i, long j, long k, int axis) {
    long lo[3] = {i, j, k}, hi[3] = {i, j, k};
    const long n[3] = {n0, n1, n2};
    if (lo[axis] > 0) --lo[axis];
    if (hi[axis] + 1 < n[axis]) ++hi[axis];
    if (hi[axis] == lo[axis]) return 0.0;
    return (value(hi[0], hi[1], hi[2]) - value(lo[0], lo[1], lo[2])) /
           static_cast<double>(hi[axis] - lo[axis]);
  };
  for (const auto& [id, ends] : vertices) {
    number[id] = static_cast<std::uint32_t>(mesh.edge_ids.size());
    mesh.edge_ids.push_back(id);
    const auto [a, b] = ends;
    const double va = value(a.i, a.j, a.k), vb = value(b.i, b.j, b.k);
    const double t = (level - va) / (vb - va);
    const double f[3] = {static_cast<double>(a.i) + t * static_cast<double>(b.i - a.i),
                         static_cast<double>(a.j) + t * static_cast<double>(b.j - a.j),
                         static_cast<double>(a.k) + t * static_cast<double>(b.k - a.k)};
    double g[3];
    for (int axis = 0; axis < 3; ++axis)
      g[axis] = (1 - t) * derivative(a.i, a.j, a.k, axis) + t * derivative(b.i, b.j, b.k, axis);
    double normal[3], length = 0;
    for (int x = 0; x < 3; ++x) {
      mesh.positions.push_back(
          static_cast<float>(grid.origin[x] + f[0] * A[0][x] + f[1] * A[1][x] + f[2] * A[2][x]));
      normal[x] = -(inv[0][x] * g[0] + inv[1][x] * g[1] + inv[2][x] * g[2]);
      length += normal[x] * normal[x];
    }
    length = std::sqrt(length);
    if (!(length > 0)) {
      const double out = va > level ? 1.0 : -1.0;
      length = 0;
      for (int x = 0; x < 3; ++x) {
        normal[x] =
            out * (static_cast<double>(b.i - a.i) * A[0][x] + static_cast<double>(b.j - a.j) * A[1][x] +
                   static_cast<double>(b.k - a.k) * A[2][x]);
        length += normal[x] * normal[x];
      }
      length = std::sqrt(length);
    }
    for (int x = 0; x < 3; ++x) mesh.normals.push_back(static_cast<float>(normal[x] / length));
  }
  for (const auto& tri : triangles)
    for (std::uint64_t id : tri) mesh.indices.push_back(number[id]);
  return mesh;
}

}  // namespace molaccel::display::reference

// Fast CPU isosurface: passes over planes of the grid on threads, with the generated cell tables.
// Pass 0 flags the inside points; pass 1 gathers each cell's corner flags (its table case), marks
// the crossed edges of every point (7 bits) and counts them per plane; the running sum numbers the
// vertices in edge-id order. Pass 2 writes each plane's triangles (cells in point order), pass 3
// the vertices.
#include <algorithm>
#include <numeric>

#include "display/backends.hpp"
#include "display/cell_tables.hpp"

namespace molaccel::display::cpu {

using detail::GridGeometry;

Mesh extract_isosurface(const GridGeometry& g, const float* values, int threads) {
  const std::int64_t n0 = g.counts[0], n1 = g.counts[1], n2 = g.counts[2];
  const std::size_t points = static_cast<std::size_t>(n0 * n1 * n2);
  const std::size_t plane = static_cast<std::size_t>(n1 * n2);
  // Pass 0: which points are inside. Pass 1: per point, the inside flags of the eight corners of the
  // cell it is the lowest corner of (missing corners past the grid's faces count as outside, and
  // their edges are never crossed), the crossed forward edges, and their count per plane.
  std::vector<std::uint8_t> inside(points);
  parallel_for(static_cast<std::size_t>(n0), threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t p = b * plane; p < e * plane; ++p) inside[p] = g.sign * values[p] > g.level ? 1 : 0;
  });
  std::vector<std::uint8_t> corners(points), mask(points);
  std::vector<std::uint64_t> plane_vertices(static_cast<std::size_t>(n0) + 1, 0);
  parallel_for(static_cast<std::size_t>(n0), threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      std::uint64_t count = 0;
      const bool last_i = static_cast<std::int64_t>(i) + 1 >= n0;
      for (std::int64_t j = 0; j < n1; ++j) {
        const bool last_j = j + 1 >= n1;
        for (std::int64_t k = 0; k < n2; ++k) {
          const std::size_t p = i * plane + static_cast<std::size_t>(j * n2 + k);
          const bool last_k = k + 1 >= n2;
          unsigned code = 0, present = 0;
          for (int c = 0; c < 8; ++c) {
            if (((c & 1) && last_i) || ((c & 2) && last_j) || ((c & 4) && last_k)) continue;
            present |= 1u << c;
            code |=
                static_cast<unsigned>(
                    inside[p + static_cast<std::size_t>((c & 1) * n1 * n2 + ((c >> 1) & 1) * n2 + (c >> 2))])
                << c;
          }
          // Edge `step` (1..7) joins corner 0 to corner `step`: crossed when their flags differ.
          const unsigned differs = (code ^ ((code & 1u) ? 0xffu : 0u)) & present;
          const unsigned m = differs >> 1;
          corners[p] = static_cast<std::uint8_t>(code);
          mask[p] = static_cast<std::uint8_t>(m);
          count += static_cast<std::uint64_t>(detail::popcount8(m));
        }
      }
      plane_vertices[i + 1] = count;
    }
  });
  std::partial_sum(plane_vertices.begin(), plane_vertices.end(), plane_vertices.begin());
  const std::uint64_t vertex_total = plane_vertices.back();
  detail::check_index_range(vertex_total, "cpu");
  std::vector<std::uint32_t> base(points);
  parallel_for(static_cast<std::size_t>(n0), threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      std::uint64_t running = plane_vertices[i];
      for (std::size_t p = i * plane; p < (i + 1) * plane; ++p) {
        base[p] = static_cast<std::uint32_t>(running);
        running += static_cast<std::uint64_t>(detail::popcount8(mask[p]));
      }
    }
  });

  // Pass 2: triangles, plane by plane into per-plane lists, joined in order.
  const detail::CellTables& tables = detail::cell_tables();
  const std::size_t cell_planes = static_cast<std::size_t>(std::max<std::int64_t>(n0 - 1, 0));
  std::vector<std::vector<std::uint32_t>> plane_indices(cell_planes);
  parallel_for(cell_planes, threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      std::vector<std::uint32_t>& out = plane_indices[i];
      for (std::int64_t j = 0; j + 1 < n1; ++j)
        for (std::int64_t k = 0; k + 1 < n2; ++k) {
          const std::size_t p = i * plane + static_cast<std::size_t>(j * n2 + k);
          const unsigned cell_case = corners[p];
          const int triangles = tables.count[cell_case];
          for (int t = 0; t < triangles; ++t) {
            std::uint32_t v[3];
            for (int x = 0; x < 3; ++x) {
              const int code = tables.edges[cell_case][3 * t + x];
              const int c = code >> 3, step = code & 7;
              const std::size_t q =
                  p + static_cast<std::size_t>((c & 1) * n1 * n2 + ((c >> 1) & 1) * n2 + (c >> 2));
              v[x] =
                  base[q] + static_cast<std::uint32_t>(detail::popcount8(mask[q] & ((1u << (step - 1)) - 1)));
            }
            if (g.flip_winding) std::swap(v[1], v[2]);
            out.insert(out.end(), v, v + 3);
          }
        }
    }
  });

  Mesh mesh;
  std::size_t index_total = 0;
  for (const auto& list : plane_indices) index_total += list.size();
  mesh.indices.reserve(index_total);
  for (auto& list : plane_indices) {
    mesh.indices.insert(mesh.indices.end(), list.begin(), list.end());
    std::vector<std::uint32_t>().swap(list);
  }

  // Pass 3: vertices.
  mesh.positions.resize(3 * vertex_total);
  mesh.normals.resize(3 * vertex_total);
  mesh.edge_ids.resize(vertex_total);
  parallel_for(static_cast<std::size_t>(n0), threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i)
      for (std::int64_t j = 0; j < n1; ++j)
        for (std::int64_t k = 0; k < n2; ++k) {
          const std::size_t p = i * plane + static_cast<std::size_t>(j * n2 + k);
          std::uint32_t v = base[p];
          for (int step = 1; step < 8; ++step) {
            if (!(mask[p] >> (step - 1) & 1)) continue;
            detail::edge_vertex(g, values, static_cast<std::int64_t>(i), j, k, step, &mesh.positions[3 * v],
                                &mesh.normals[3 * v]);
            mesh.edge_ids[v] = static_cast<std::uint64_t>(p) * 7 + static_cast<std::uint64_t>(step - 1);
            ++v;
          }
        }
  });
  return mesh;
}

}  // namespace molaccel::display::cpu

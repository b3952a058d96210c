// Vertex arithmetic of the fast paths, one source for the CPU (cpu/) and the device (cuda/): the
// same float operations in the same order, so both give bit-identical vertices (host code is built
// without floating-point contraction, the device file with --fmad=false).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define MOLACCEL_DISPLAY_HD __host__ __device__
#else
#define MOLACCEL_DISPLAY_HD
#endif

namespace molaccel::display::detail {

// The grid as the kernels see it. Values are read as sign * value, so `below` surfaces are `above`
// surfaces of the negated field (negation is exact).
struct GridGeometry {
  float origin[3];
  float axes[3][3];          // axes[a] = step vector of index a
  float inverse_axes[3][3];  // inverse of the matrix with the axes as columns
  std::int64_t counts[3];
  float sign;         // +1 (inside = value > level) or -1 (inside = value < -level)
  float level;        // in the signed field
  bool flip_winding;  // axes form a left-handed frame
};

MOLACCEL_DISPLAY_HD inline std::int64_t point_index(const GridGeometry& g, std::int64_t i, std::int64_t j,
                                                    std::int64_t k) {
  return (i * g.counts[1] + j) * g.counts[2] + k;
}

MOLACCEL_DISPLAY_HD inline int popcount8(unsigned v) {
  int n = 0;
  for (; v; v &= v - 1) ++n;
  return n;
}

// d(sign * value)/d(index) along axis `a` at point (i, j, k): central, one-sided at the faces.
MOLACCEL_DISPLAY_HD inline float index_derivative(const GridGeometry& g, const float* values, std::int64_t i,
                                                  std::int64_t j, std::int64_t k, int a) {
  const std::int64_t idx[3] = {i, j, k};
  std::int64_t lo[3] = {i, j, k}, hi[3] = {i, j, k};
  if (idx[a] > 0) lo[a] -= 1;
  if (idx[a] + 1 < g.counts[a]) hi[a] += 1;
  const float vl = g.sign * values[point_index(g, lo[0], lo[1], lo[2])];
  const float vh = g.sign * values[point_index(g, hi[0], hi[1], hi[2])];
  const float span = static_cast<float>(hi[a] - lo[a]);
  return span > 0 ? (vh - vl) / span : 0.0f;
}

// Position and outward unit normal of the vertex on the edge from point (i, j, k) along `step`.
MOLACCEL_DISPLAY_HD inline void edge_vertex(const GridGeometry& g, const float* values, std::int64_t i,
                                            std::int64_t j, std::int64_t k, int step, float* position,
                                            float* normal) {
  const std::int64_t di = step & 1, dj = (step >> 1) & 1, dk = (step >> 2) & 1;
  const float a = g.sign * values[point_index(g, i, j, k)];
  const float b = g.sign * values[point_index(g, i + di, j + dj, k + dk)];
  const float t = (g.level - a) / (b - a);
  const float f[3] = {static_cast<float>(i) + t * static_cast<float>(di),
                      static_cast<float>(j) + t * static_cast<float>(dj),
                      static_cast<float>(k) + t * static_cast<float>(dk)};
  for (int x = 0; x < 3; ++x)
    position[x] = g.origin[x] + f[0] * g.axes[0][x] + f[1] * g.axes[1][x] + f[2] * g.axes[2][x];
  float gradient_index[3];
  for (int c = 0; c < 3; ++c) {
    const float ga = index_derivative(g, values, i, j, k, c);
    const float gb = index_derivative(g, values, i + di, j + dj, k + dk, c);
    gradient_index[c] = ga + t * (gb - ga);
  }
  // grad f = A^-T grad_index f, A the matrix with the axes as columns.
  float n[3];
  for (int x = 0; x < 3; ++x)
    n[x] = -(g.inverse_axes[0][x] * gradient_index[0] + g.inverse_axes[1][x] * gradient_index[1] +
             g.inverse_axes[2][x] * gradient_index[2]);
  float length = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  if (!(length > 0)) {
    // A flat field: the edge direction, from the inside end to the outside end.
    const float out = a > g.level ? 1.0f : -1.0f;
    for (int x = 0; x < 3; ++x)
      n[x] = out * (static_cast<float>(di) * g.axes[0][x] + static_cast<float>(dj) * g.axes[1][x] +
                    static_cast<float>(dk) * g.axes[2][x]);
    length = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  }
  for (int x = 0; x < 3; ++x) normal[x] = n[x] / length;
}

}  // namespace molaccel::display::detail

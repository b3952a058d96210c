// The renderers' shared arithmetic, one source for the CPU rasteriser (rasterizer.cpp) and the CUDA
// one (rasterizer_cuda.cu): the camera transform into sample coordinates, the edge functions that
// decide coverage, and the per-sample shading, in double precision with the same operations in the
// same order (host code is built without contraction, the device file with --fmad=false), so both
// renderers cover the same samples and shade them alike.
#pragma once

#include <cmath>
#include <cstdint>

#include "display/surface_math.hpp"

namespace molaccel::display::detail {

// The orthographic camera in sample coordinates (x right, y down, z towards the viewer).
struct Camera {
  double rotation[3][3];  // rows of R = Rz * Ry * Rx
  double centre[3];       // of the framing sphere
  double scale;           // samples per length unit
  double width, height;   // the supersampled image, in samples
};

// Samples per length unit: `numerator` = 0.45 * the shorter side in samples, so that the framing
// sphere's diameter spans 90% of it at zoom 1.
MOLACCEL_DISPLAY_HD inline double camera_scale(double numerator, double radius, double zoom) {
  return numerator / fmax(radius, 1e-6) * zoom;
}

// A vertex in sample coordinates with its view-space normal.
struct SampleVertex {
  double x, y, z;
  double normal[3];
};

MOLACCEL_DISPLAY_HD inline double dot3(const double* a, const double* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

MOLACCEL_DISPLAY_HD inline SampleVertex to_samples(const Camera& c, const float* position,
                                                   const float* normal) {
  const double p[3] = {position[0] - c.centre[0], position[1] - c.centre[1], position[2] - c.centre[2]};
  const double n[3] = {normal[0], normal[1], normal[2]};
  SampleVertex v;
  v.x = c.width / 2.0 + dot3(c.rotation[0], p) * c.scale;
  v.y = c.height / 2.0 - dot3(c.rotation[1], p) * c.scale;
  v.z = dot3(c.rotation[2], p);
  for (int k = 0; k < 3; ++k) v.normal[k] = dot3(c.rotation[k], n);
  return v;
}

// Twice the signed area of the projected triangle (0: degenerate, not drawn).
MOLACCEL_DISPLAY_HD inline double edge_area(const SampleVertex& a, const SampleVertex& b,
                                            const SampleVertex& c) {
  return (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x);
}

// Barycentric weights of the point (px, py); covered when all three are >= 0 (either winding).
MOLACCEL_DISPLAY_HD inline bool covers(const SampleVertex& a, const SampleVertex& b, const SampleVertex& c,
                                       double area, double px, double py, double w[3]) {
  w[0] = ((b.x - px) * (c.y - py) - (b.y - py) * (c.x - px)) / area;
  w[1] = ((c.x - px) * (a.y - py) - (c.y - py) * (a.x - px)) / area;
  w[2] = 1 - w[0] - w[1];
  return !(w[0] < 0 || w[1] < 0 || w[2] < 0);
}

// The normal kept for a covered sample (stored as float, as the z-buffer keeps it).
MOLACCEL_DISPLAY_HD inline void interpolate_normal(const SampleVertex& a, const SampleVertex& b,
                                                   const SampleVertex& c, const double w[3], float out[3]) {
  for (int k = 0; k < 3; ++k)
    out[k] = static_cast<float>(w[0] * a.normal[k] + w[1] * b.normal[k] + w[2] * c.normal[k]);
}

// Lighting in view space: a key light from the upper left front, Blinn-Phong with a white specular
// highlight; the viewer looks down -z.
struct Lighting {
  double light[3], half[3];
  static constexpr double ambient = 0.28, diffuse = 0.62, specular = 0.35, shininess = 48;
};
inline Lighting default_lighting() {
  auto normalised = [](double x, double y, double z, double* out) {
    const double l = std::sqrt(x * x + y * y + z * z);
    out[0] = x / l;
    out[1] = y / l;
    out[2] = z / l;
  };
  Lighting l{};
  normalised(-0.4, 0.5, 0.75, l.light);  // y up in view space
  normalised(l.light[0], l.light[1], l.light[2] + 1, l.half);
  return l;
}

// Adds one covered sample's colour (two-sided: a face seen from behind is lit as its front).
MOLACCEL_DISPLAY_HD inline void shade(const Lighting& lighting, const float stored_normal[3],
                                      const float rgb[3], double sum[3]) {
  double n[3] = {stored_normal[0], stored_normal[1], stored_normal[2]};
  const double l = sqrt(dot3(n, n));
  if (l > 0) {
    for (double& x : n) x /= l;
  } else {
    n[0] = 0;
    n[1] = 0;
    n[2] = 1;
  }
  if (n[2] < 0)
    for (double& x : n) x = -x;
  const double d = fmax(0.0, dot3(n, lighting.light));
  const double s = d > 0 ? pow(fmax(0.0, dot3(n, lighting.half)), Lighting::shininess) : 0.0;
  for (int k = 0; k < 3; ++k)
    sum[k] += fmin(1.0, rgb[k] * (Lighting::ambient + Lighting::diffuse * d) + Lighting::specular * s);
}

// An image channel from the sum of `samples` samples' values (0..1).
MOLACCEL_DISPLAY_HD inline std::uint8_t to_byte(double sum, int samples) {
  return static_cast<std::uint8_t>(lround(255.0 * sum / samples));
}

}  // namespace molaccel::display::detail

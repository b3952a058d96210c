// The renderers behind display::render_scene (internal; the benchmark and tests call them directly).
#pragma once

#include <vector>

#include "display/backends.hpp"
#include "display/render/camera.hpp"
#include "molaccel/display.hpp"

namespace molaccel::display::detail {
void check_render_size(const RenderOptions& options);  // InputError("--size", ...)
int samples_per_axis(const RenderOptions& options);    // supersampling clamped to 1..4
Camera make_camera(const Framing& framing, const RenderOptions& options);
}  // namespace molaccel::display::detail

namespace molaccel::display::cuda {

// A mesh in the worker's device memory with its colour (a lobe straight from the isosurface).
struct DevicePart {
  DeviceMesh mesh;
  Colour colour;
};

// The CUDA rasteriser on the worker's GPU: draws `device_parts`, then the parts of `host_parts`
// (copied to the device), in that order, as render_scene's CPU rasteriser does (same camera,
// coverage, lighting; the automatic framing computed on the device), into an image copied to the
// host. Enqueued on `stream` (a cudaStream_t; nullptr = the default stream); device buffers kept
// in ctx.kept<>(). Throws NotCompiled in a build without CUDA. The caller checks the options and
// that there is a triangle.
Image render_on_device(WorkerContext& ctx, const std::vector<DevicePart>& device_parts,
                       const Scene& host_parts, const RenderOptions& options, void* stream = nullptr);
// The same into `image`, whose pixel memory is used again where it has the size already: a frame
// loop that keeps its images touches no new host memory (8 MB a frame at 1920 x 1080).
void render_on_device(WorkerContext& ctx, const std::vector<DevicePart>& device_parts,
                      const Scene& host_parts, const RenderOptions& options, Image& image,
                      void* stream = nullptr);

// framing_of the device parts and the host parts together, computed on the worker's GPU (the same
// sphere, exactly: float box corners, double distances).
Framing framing_on_device(WorkerContext& ctx, const std::vector<DevicePart>& device_parts,
                          const Scene& host_parts, void* stream = nullptr);

}  // namespace molaccel::display::cuda

// The display loop on one GPU, frame by frame: the orbital kernel writes the grid into device
// memory (cuda_backend::evaluate_on_device), both phase surfaces are extracted from it in one pass
// and kept there, and the CUDA rasteriser draws them (with the molecule) into an image copied to
// the host. CUDA-free interface; the implementation (display_frames.cu) is built with CUDA only.
#pragma once

#include <memory>

#include "display/render/render_backends.hpp"
#include "orbital/cuda/orbital_cuda.hpp"

namespace molaccel::bench_display {

struct StageSeconds {
  double grid = 0, surfaces = 0, image = 0;
};

class GpuFrames {
 public:
  GpuFrames(int device, std::size_t points);
  ~GpuFrames();
  GpuFrames(const GpuFrames&) = delete;
  GpuFrames& operator=(const GpuFrames&) = delete;
  // One frame. With `stages` the host waits for each stage and times it; without, the stages run
  // back to back on one stream (the host waits once for the surfaces' totals and once for the
  // image). `triangles`: both surfaces' triangles.
  display::Image frame(const orbital::cuda_backend::GpuJob& job, const display::detail::GridGeometry* levels,
                       const display::Scene& molecule, const display::RenderOptions& options,
                       StageSeconds* stages = nullptr, std::size_t* triangles = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace molaccel::bench_display

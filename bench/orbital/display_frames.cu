// The display loop on one GPU with no host round trip of the grid or the meshes (see
// display_frames.hpp).
#include <chrono>

#include "display_frames.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::bench_display {

struct GpuFrames::State {
  WorkerInfo worker;
  WorkerContext ctx;
  cuda::DeviceBuffer<float> grid;
  explicit State(const WorkerInfo& w) : worker(w), ctx(w) {}
};

namespace {
WorkerInfo gpu_worker(int device) {
  WorkerInfo w;
  w.kind = WorkerInfo::Kind::gpu;
  w.device = device;
  return w;
}
}  // namespace

GpuFrames::GpuFrames(int device, std::size_t points) : state_(std::make_unique<State>(gpu_worker(device))) {
  cuda::DeviceGuard guard(device);
  state_->grid.resize(points);
}

GpuFrames::~GpuFrames() {
  cuda::DeviceGuard guard(state_->worker.device);
  state_.reset();
}

display::Image GpuFrames::frame(const orbital::cuda_backend::GpuJob& job,
                                const display::detail::GridGeometry* levels, const display::Scene& molecule,
                                const display::RenderOptions& options, StageSeconds* stages,
                                std::size_t* triangles) {
  using Clock = std::chrono::steady_clock;
  cuda::DeviceGuard guard(state_->worker.device);
  WorkerContext& ctx = state_->ctx;
  const auto t0 = Clock::now();
  void* stream = orbital::cuda_backend::evaluate_on_device(ctx, job, state_->grid.data());
  if (stages) MOLACCEL_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  const auto t1 = Clock::now();
  const display::cuda::DeviceSurfaces surfaces =
      display::cuda::extract_surfaces_on_device(ctx, levels, 2, state_->grid.data(), stream);
  const auto t2 = Clock::now();
  std::vector<display::cuda::DevicePart> parts;
  if (surfaces.mesh[0].triangles) parts.push_back({surfaces.mesh[0], display::positive_phase_colour()});
  if (surfaces.mesh[1].triangles) parts.push_back({surfaces.mesh[1], display::negative_phase_colour()});
  display::Image image = display::cuda::render_on_device(ctx, parts, molecule, options, stream);
  const auto t3 = Clock::now();
  if (stages) {
    stages->grid = std::chrono::duration<double>(t1 - t0).count();
    stages->surfaces = std::chrono::duration<double>(t2 - t1).count();
    stages->image = std::chrono::duration<double>(t3 - t2).count();
  }
  if (triangles) *triangles = surfaces.mesh[0].triangles + surfaces.mesh[1].triangles;
  return image;
}

}  // namespace molaccel::bench_display

// Dispatch of the orbital CUDA backend: which kernel computes a chunk of planes (JIT or generic
// per orbital, or the sparse basis matrix), its launch shape, the JIT precompilation and the
// benchmarks' kernel timings.
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "orbital/cuda/device_state.cuh"

namespace molaccel::orbital::cuda_backend {

namespace {

// Launches the single-orbital kernel for orbital `o` over planes, into dst: the JIT kernel, or the
// generic one for the cuda-generic backend (no NVRTC compilation; the JIT kernel's yardstick) and
// while the JIT kernel compiles in the background (GpuJob::jit_when_ready). A grid may then mix
// chunks of both kernels: each is within the tests' fp32 tolerance of the reference (2e-5 of the
// largest value; test_cuda.cpp), so a mixed grid is too, and the JIT grid of a later run differs
// from it by at most twice that.
void launch_orbital(DeviceState& st, const GpuJob& job, std::size_t o, std::size_t p0, std::size_t planes,
                    float* dst) {
  const GridSpec& grid = *job.grid;
  OrbitalGridArgs g = grid_args(grid, p0, job.basis->components);
  g.planes = static_cast<int>(planes);
  const dim3 block(kPointsPerBlock);
  const dim3 blocks(static_cast<unsigned>((grid.counts[2] + kPointsPerBlock - 1) / kPointsPerBlock),
                    static_cast<unsigned>(grid.counts[1]), static_cast<unsigned>(planes));
  const float* coef = st.coefficients.data() + o * job.basis->components;
  if (st.jit_pending) st.take_jit_program(!job.jit_when_ready);
  if (st.jit_kernel) {
    const std::size_t shared = sizeof(float) * job.basis->components;
    const detail::CullLayout& l = st.jit_cull;
    const std::size_t first_brick = p0 / static_cast<std::size_t>(l.bx);
    const std::size_t last_brick = (p0 + planes - 1) / static_cast<std::size_t>(l.bx);
    const dim3 jit_blocks(static_cast<unsigned>((grid.counts[2] + l.bz - 1) / l.bz),
                          static_cast<unsigned>((grid.counts[1] + l.by - 1) / l.by),
                          static_cast<unsigned>(last_brick - first_brick + 1));
    cuda::launch(st.jit_kernel, jit_blocks, block, shared, *st.stream, st.atom_xyz_sorted.data(),
                 st.atom_base.data(), st.atom_cut2.data(), st.type_first.data(), st.view.atoms, coef, g, dst);
  } else {
    st.generic_ran = true;
    launch_generic_kernel(st.view, coef, g, blocks, *st.stream, st.device, dst);
  }
}

// Sparse path over planes [p0, p0 + planes) of the grid into dst (density: dst[p]; orbitals:
// dst[o * dst_pitch + p], p relative to the first plane).
void launch_sparse(DeviceState& st, const GpuJob& job, std::size_t p0, std::size_t planes, float* dst,
                   std::size_t dst_pitch) {
  const GridSpec& grid = *job.grid;
  const OrbitalGridArgs g = grid_args(grid, p0, job.basis->components);
  const BrickShape shape = brick_shape(planes, grid.counts[1], grid.counts[2]);
  launch_sparse_kernel(contraction_width(job.orbitals), st.view, st.shell_atom.data(), g,
                       static_cast<int>(planes), shape, st.coefficients_t.data(), st.orbitals_padded,
                       static_cast<int>(job.orbitals), job.weights ? st.weights.data() : nullptr, dst,
                       dst_pitch, *st.stream, st.device);
}

}  // namespace

// Compute of planes [p, p + planes) into dst (outputs x points of those planes).
void launch_planes(DeviceState& st, const GpuJob& job, std::size_t p, std::size_t planes, float* dst) {
  const std::size_t points = planes * job.grid->counts[1] * job.grid->counts[2];
  if (use_matrix_path(job)) {
    launch_sparse(st, job, p, planes, dst, points);
  } else {
    for (std::size_t o = 0; o < job.orbitals; ++o) launch_orbital(st, job, o, p, planes, dst + o * points);
  }
}

std::string kernel_name(const DeviceState& st, const GpuJob& job) {
  if (use_matrix_path(job)) {
    const std::string kind = "cuda/sparse-basis-matrix";
    return job.weights ? kind + "+density" : kind;
  }
  // Both when the JIT kernel took over from the generic one within the job.
  if (st.jit_kernel)
    return (st.generic_ran ? "cuda/generic+jit-cull-" : "cuda/jit-cull-") + st.jit_cull.name();
  return "cuda/generic";
}

void precompile(const GpuJob& job, int device) {
  if (!job.jit || use_matrix_path(job)) return;
  const detail::CullLayout& brick = job.tuning.jit_brick;
  // Once per basis (request cache id), variant and device: generating the source and looking it
  // up in the JIT cache is request-invariant host work. A compile started in the background is
  // asked about again by the next request.
  static std::mutex mutex;
  static std::vector<std::string> done;
  const std::string key = job.basis_id == 0
                              ? std::string()
                              : fmt::format(fmt::runtime("{}/{}/{}"), job.basis_id, device, brick.name());
  if (!key.empty()) {
    std::lock_guard lock(mutex);
    if (std::find(done.begin(), done.end(), key) != done.end()) return;
  }
  const bool ready =
      jit_program(jit_request(detail::generate_jit_source(*job.basis, brick), device), job.jit_when_ready)
          .has_value();
  if (ready && !key.empty()) {
    std::lock_guard lock(mutex);
    if (done.size() >= 64) done.erase(done.begin());
    done.push_back(key);
  }
}

}  // namespace molaccel::orbital::cuda_backend

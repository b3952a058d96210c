// The GPU pipeline of the orbital engine: the chunk pool (plan_chunks, evaluate_chunks: one share
// per worker claiming chunks of planes), fixed tiles (evaluate_planes), the two-buffer
// compute/copy pipeline on each worker and the host drain of its results, and the recovery from
// out-of-memory errors. Kernels are chosen in dispatch.cu.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "orbital/cuda/device_state.cuh"

namespace molaccel::orbital::cuda_backend {

namespace {

// Host copy of one finished chunk (pinned staging, outputs x points) into the job's output rows,
// on a few threads (a single thread copies ~5-10 GB/s, slower than the device-to-host DMA).
void drain_chunk(const float* staging, const GpuJob& job, std::size_t p, std::size_t points,
                 std::size_t outputs) {
  const std::size_t plane_points = job.grid->counts[1] * job.grid->counts[2];
  const std::size_t n_points = job.grid->point_count();
  const std::size_t kPiece = std::clamp<std::size_t>(job.tuning.drain_piece_mib, 1, 64) << 18;  // floats
  const std::size_t pieces_per_output = (points + kPiece - 1) / kPiece;
  const int threads = std::max(1, std::min(job.tuning.drain_threads, cpu_info().logical_cores));
  parallel_for(outputs * pieces_per_output, threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const std::size_t o = i / pieces_per_output, first = (i % pieces_per_output) * kPiece;
      const std::size_t n = std::min(kPiece, points - first);
      std::memcpy(job.out + o * n_points + p * plane_points + first, staging + o * points + first,
                  n * sizeof(float));
    }
  });
}

// One tile, pipelined over chunks of planes: the kernels of chunk c+1 run while chunk c is copied
// to a pinned buffer and chunk c-1 is copied from pinned memory into the output. The only host
// waits are on copy events (one per chunk, not per orbital). Chunks depend on the tile only, so
// the values do not depend on how many GPUs share the grid.
// Into page-locked output (molaccel::allocate_host_buffer, cudaHostAlloc) the copy engine writes
// each chunk straight into its rows: no staging buffer, no host copy, so several GPUs are not
// limited by the host threads' memcpy bandwidth.
void run_tile(DeviceState& st, const GpuJob& job, std::size_t plane_begin, std::size_t plane_end,
              std::size_t step) {
  const std::size_t plane_points = job.grid->counts[1] * job.grid->counts[2];
  const std::size_t n_points = job.grid->point_count();
  const std::size_t outputs = job.weights ? 1 : job.orbitals;
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // first plane, planes
  for (std::size_t p = plane_begin; p < plane_end; p += step)
    chunks.emplace_back(p, std::min(step, plane_end - p));
  const std::size_t capacity = std::min(step, plane_end - plane_begin) * plane_points * outputs;
  const bool direct = cuda::is_page_locked(job.out);
  for (std::size_t b = 0; b < 2 && b < chunks.size(); ++b) {
    st.results[b].resize(capacity);
    if (!direct) st.ensure_staging(static_cast<int>(b), capacity);
  }
  auto drain = [&](std::size_t c) {
    st.copied[c % 2]->synchronize();
    drain_chunk(st.staging[c % 2].data(), job, chunks[c].first, chunks[c].second * plane_points, outputs);
  };
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const std::size_t slot = c % 2;
    const std::size_t points = chunks[c].second * plane_points;
    // The result buffer of this slot is free once the copy of chunk c-2 has finished.
    if (c >= 2) MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.stream, st.copied[slot]->get(), 0));
    launch_planes(st, job, chunks[c].first, chunks[c].second, st.results[slot].data());
    st.computed[slot]->record(*st.stream);
    MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.copy_stream, st.computed[slot]->get(), 0));
    if (direct)  // each output's rows of the chunk straight into place
      MOLACCEL_CUDA_TRY(cudaMemcpy2DAsync(
          job.out + chunks[c].first * plane_points, n_points * sizeof(float), st.results[slot].data(),
          points * sizeof(float), points * sizeof(float), outputs, cudaMemcpyDeviceToHost, *st.copy_stream));
    else
      MOLACCEL_CUDA_TRY(cudaMemcpyAsync(st.staging[slot].data(), st.results[slot].data(),
                                        points * outputs * sizeof(float), cudaMemcpyDeviceToHost,
                                        *st.copy_stream));
    st.copied[slot]->record(*st.copy_stream);
    if (!direct && c >= 1) drain(c - 1);  // staging[slot ^ 1] is free again for chunk c+1 after this
  }
  if (direct)
    MOLACCEL_CUDA_TRY(cudaStreamSynchronize(*st.copy_stream));
  else if (!chunks.empty())
    drain(chunks.size() - 1);
}

// MOLACCEL_TRACE=orbital: per tile or share, the device, its planes or chunks, when it started
// and ended (ms on the process clock) and the set-up it paid, to see what does not shrink with
// more GPUs.
bool trace_on() {
  return trace_enabled("orbital");
}

// The worker's device state (kept from job to job), initialised on the job's first tile unless it
// already holds this request's basis, coefficients and path.
DeviceState& job_state(WorkerContext& ctx, const GpuJob& job) {
  struct JobStarted {
    bool started = false;
  };
  bool& started = ctx.local<JobStarted>().started;
  const bool fresh = !started;  // first tile of this job on this worker
  started = true;
  DeviceState& st = ctx.kept<DeviceState>();
  st.pinned = &ctx.pinned_pool();
  if (fresh) {
    st.chunk_planes = 0;
    st.generic_ran = false;
  }
  // Cached inputs other than the state's set it up again even within a job (a caller of
  // evaluate_on_device may hand one worker several orbitals).
  const std::string key = state_key(job, job.jit);
  if (!st.ready || (fresh && (st.key.empty() || st.key != key)) || (!key.empty() && st.key != key))
    st.init(job, ctx.worker().device, job.jit);
  return st;
}

// Planes [plane_begin, plane_end) as one pipelined tile; out of GPU memory halves the planes per
// launch and redoes the tile.
void run_tile_adaptive(WorkerContext& ctx, DeviceState& st, const GpuJob& job, std::size_t plane_begin,
                       std::size_t plane_end) {
  const GridSpec& grid = *job.grid;
  const std::size_t plane_points = grid.counts[1] * grid.counts[2];
  const std::size_t outputs = job.weights ? 1 : job.orbitals;
  const std::size_t tile_planes = plane_end - plane_begin;
  // Chunks: about a third of the tile (so copies overlap kernels), at most ~8M values (32 MiB).
  std::size_t step = std::max<std::size_t>(
      1, std::min((tile_planes + 2) / 3, (8u << 20) / std::max<std::size_t>(1, plane_points * outputs)));
  if (st.chunk_planes > 0) step = std::min(step, st.chunk_planes);
  for (;;) {
    try {
      run_tile(st, job, plane_begin, plane_end, step);
      return;
    } catch (const CudaError& e) {
      if (!e.is_out_of_memory() || step == 1) throw;
      cudaGetLastError();  // clear the sticky allocation error
      cudaStreamSynchronize(*st.stream);
      cudaStreamSynchronize(*st.copy_stream);
      for (int b = 0; b < 2; ++b) st.results[b].reset();
      step = std::max<std::size_t>(1, step / 2);
      st.chunk_planes = step;
      log_warn("orbital: out of GPU memory on {}, retrying with {} plane(s) per launch", ctx.worker().name(),
               step);
    } catch (...) {
      // The tile goes to another worker; this worker's next tile must not race a copy still in flight.
      cudaStreamSynchronize(*st.stream);
      cudaStreamSynchronize(*st.copy_stream);
      throw;
    }
  }
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> plan_chunks(const GpuJob& job) {
  const GridSpec& grid = *job.grid;
  const std::size_t nx = grid.counts[0];
  const std::size_t plane_points = std::max<std::size_t>(1, grid.counts[1] * grid.counts[2]);
  const std::size_t outputs = job.weights ? 1 : std::max<std::size_t>(1, job.orbitals);
  std::size_t granule = 1;  // planes of the kernel's bricks
  if (use_matrix_path(job)) {
    granule = 4;
  } else if (job.jit) {
    granule = static_cast<std::size_t>(job.tuning.jit_brick.bx);
  }
  const std::size_t by_memory = std::max<std::size_t>(1, (8u << 20) / (plane_points * outputs));
  const std::size_t target = std::max<std::size_t>(1, job.tuning.chunks_per_grid);
  std::size_t planes = std::min(by_memory, (nx + target - 1) / target);
  planes = std::max(planes, std::min(granule, by_memory));
  if (planes >= granule) planes = planes / granule * granule;
  std::vector<std::pair<std::size_t, std::size_t>> chunks;
  for (std::size_t p = 0; p < nx; p += planes) chunks.emplace_back(p, std::min(planes, nx - p));
  // Claim order: the most expensive chunks first, so that the last chunks the GPUs take are cheap
  // and the shares end together. Estimated cost of a plane: per atom whose largest screening
  // sphere reaches it, the area of the sphere's cut (r^2 - d^2, d = distance of the atom to the
  // plane). Only the order changes: a chunk's values do not depend on who computes it or when.
  const detail::PackedBasis& basis = *job.basis;
  const auto& a1 = grid.axes[1];
  const auto& a2 = grid.axes[2];
  double normal[3] = {a1[1] * a2[2] - a1[2] * a2[1], a1[2] * a2[0] - a1[0] * a2[2],
                      a1[0] * a2[1] - a1[1] * a2[0]};
  const double norm = std::sqrt(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2]);
  if (norm > 0 && chunks.size() > 1) {
    for (double& v : normal) v /= norm;
    double step = 0, origin = 0;
    for (int d = 0; d < 3; ++d) {
      step += grid.axes[0][static_cast<std::size_t>(d)] * normal[d];
      origin += grid.origin[static_cast<std::size_t>(d)] * normal[d];
    }
    std::vector<double> plane_cost(nx, 0.0);
    for (std::size_t a = 0; a < basis.atom_count(); ++a) {
      float cut = 0;
      for (int sh = basis.atom_first_shell[a]; sh < basis.atom_first_shell[a + 1]; ++sh)
        cut = std::max(cut, basis.shells[static_cast<std::size_t>(sh)].cutoff_r2);
      double h = 0;
      for (int d = 0; d < 3; ++d) h += basis.atom_xyz[3 * a + static_cast<std::size_t>(d)] * normal[d];
      for (std::size_t i = 0; i < nx; ++i) {
        const double dist = origin + static_cast<double>(i) * step - h;
        plane_cost[i] += std::max(0.0, static_cast<double>(cut) - dist * dist);
      }
    }
    std::vector<double> cost(chunks.size(), 0.0);
    for (std::size_t c = 0; c < chunks.size(); ++c)
      for (std::size_t i = chunks[c].first; i < chunks[c].first + chunks[c].second; ++i)
        cost[c] += plane_cost[i];
    std::vector<std::size_t> order(chunks.size());
    for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return cost[x] > cost[y]; });
    std::vector<std::pair<std::size_t, std::size_t>> sorted;
    for (const std::size_t c : order) sorted.push_back(chunks[c]);
    chunks = std::move(sorted);
  }
  return chunks;
}

std::string evaluate_chunks(WorkerContext& ctx, const GpuJob& job, detail::ChunkQueue& queue) {
  cuda::DeviceGuard guard(ctx.worker().device);
  const bool trace = trace_on();
  const double entered = trace ? now_seconds() : 0.0;
  DeviceState& st = job_state(ctx, job);
  const double initialised = trace ? now_seconds() : 0.0;
  const GridSpec& grid = *job.grid;
  const std::size_t plane_points = grid.counts[1] * grid.counts[2];
  const std::size_t n_points = grid.point_count();
  const std::size_t outputs = job.weights ? 1 : job.orbitals;
  const bool direct = cuda::is_page_locked(job.out);
  struct Pending {
    std::size_t chunk, slot;
  };
  std::vector<Pending> pending;  // claimed chunks whose copies are not known to be finished (<= 2)
  std::size_t claimed = 0;
  std::string first_chunks;
  auto finish_front = [&] {
    const Pending p = pending.front();
    st.copied[p.slot]->synchronize();
    if (!direct) {
      const auto& [p0, planes] = queue.chunk(p.chunk);
      drain_chunk(st.staging[p.slot].data(), job, p0, planes * plane_points, outputs);
    }
    pending.erase(pending.begin());
    queue.done(ctx.worker());
  };
  bool fallback = false;  // out of GPU memory: the rest of the share chunk by chunk, adaptively
  try {
    std::size_t largest = 0;
    for (std::size_t c = 0; c < queue.size(); ++c) largest = std::max(largest, queue.chunk(c).second);
    const std::size_t capacity = largest * plane_points * outputs;
    for (int b = 0; b < 2; ++b) {
      st.results[b].resize(capacity);
      if (!direct) st.ensure_staging(b, capacity);
    }
    for (std::size_t k = 0;; ++k) {
      // A result buffer (and staging buffer) is free again once the chunk that used it is out.
      if (pending.size() == 2) finish_front();
      std::size_t c = 0;
      if (!queue.take(ctx.worker(), c)) break;
      const std::size_t slot = k % 2;
      pending.push_back({c, slot});
      ++claimed;
      const auto [p0, planes] = queue.chunk(c);
      if (trace && first_chunks.size() < 200) first_chunks += fmt::format(fmt::runtime(" {}"), c);
      const std::size_t points = planes * plane_points;
      launch_planes(st, job, p0, planes, st.results[slot].data());
      st.computed[slot]->record(*st.stream);
      MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(*st.copy_stream, st.computed[slot]->get(), 0));
      if (direct)
        MOLACCEL_CUDA_TRY(cudaMemcpy2DAsync(job.out + p0 * plane_points, n_points * sizeof(float),
                                            st.results[slot].data(), points * sizeof(float),
                                            points * sizeof(float), outputs, cudaMemcpyDeviceToHost,
                                            *st.copy_stream));
      else
        MOLACCEL_CUDA_TRY(cudaMemcpyAsync(st.staging[slot].data(), st.results[slot].data(),
                                          points * outputs * sizeof(float), cudaMemcpyDeviceToHost,
                                          *st.copy_stream));
      st.copied[slot]->record(*st.copy_stream);
      // Ordinary output: the host copies the previous chunk out of its staging buffer while this
      // one computes and copies.
      if (!direct && pending.size() == 2) finish_front();
    }
    while (!pending.empty()) finish_front();
  } catch (const CudaError& e) {
    cudaStreamSynchronize(*st.stream);
    cudaStreamSynchronize(*st.copy_stream);
    for (const auto& p : pending) queue.give_back(p.chunk);
    pending.clear();
    if (!e.is_out_of_memory()) throw;
    cudaGetLastError();  // clear the sticky allocation error
    for (int b = 0; b < 2; ++b) st.results[b].reset();
    log_warn("orbital: out of GPU memory on {}, the rest of its share chunk by chunk", ctx.worker().name());
    fallback = true;
  } catch (...) {
    // The chunks go to another worker; its copies must not race ours. Which of them failed is not
    // known (kernels and copies are asynchronous), so none is marked: marking the innocent one as
    // well could leave a chunk that no worker may take.
    cudaStreamSynchronize(*st.stream);
    cudaStreamSynchronize(*st.copy_stream);
    for (const auto& p : pending) queue.give_back(p.chunk);
    throw;
  }
  if (fallback) {
    std::size_t c = 0;
    while (queue.take(ctx.worker(), c)) {
      const auto [p0, planes] = queue.chunk(c);
      try {
        run_tile_adaptive(ctx, st, job, p0, p0 + planes);
      } catch (...) {
        queue.give_back(c, &ctx.worker());
        throw;
      }
      queue.done(ctx.worker());
      ++claimed;
    }
  }
  if (trace)
    trace_message("orbital",
                  fmt::format(fmt::runtime("gpu{}: share of {} chunks ({}) from {:.3f} ms, set-up {:.3f} ms, "
                                           "done at {:.3f} ms"),
                              ctx.worker().device, claimed, first_chunks, std::fmod(entered * 1e3, 1e5),
                              (initialised - entered) * 1e3, std::fmod(now_seconds() * 1e3, 1e5)));
  return kernel_name(st, job);
}

std::string evaluate_planes(WorkerContext& ctx, const GpuJob& job, std::size_t plane_begin,
                            std::size_t plane_end) {
  cuda::DeviceGuard guard(ctx.worker().device);
  const bool trace = trace_on();
  const double entered = trace ? now_seconds() : 0.0;
  DeviceState& st = job_state(ctx, job);
  const double initialised = trace ? now_seconds() : 0.0;
  struct TraceLine {
    bool on;
    int device;
    std::size_t p0, p1;
    double entered, initialised;
    ~TraceLine() {
      if (on)
        trace_message("orbital",
                      fmt::format(fmt::runtime("gpu{}: planes [{}, {}) from {:.3f} ms, set-up {:.3f} ms, "
                                               "done at {:.3f} ms"),
                                  device, p0, p1, std::fmod(entered * 1e3, 1e5),
                                  (initialised - entered) * 1e3, std::fmod(now_seconds() * 1e3, 1e5)));
    }
  } trace_line{trace, ctx.worker().device, plane_begin, plane_end, entered, initialised};
  run_tile_adaptive(ctx, st, job, plane_begin, plane_end);
  return kernel_name(st, job);
}

void* evaluate_on_device(WorkerContext& ctx, const GpuJob& job, float* out) {
  cuda::DeviceGuard guard(ctx.worker().device);
  DeviceState& st = job_state(ctx, job);
  launch_planes(st, job, 0, job.grid->counts[0], out);
  return static_cast<void*>(st.stream->get());
}

}  // namespace molaccel::orbital::cuda_backend

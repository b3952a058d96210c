// The CUDA backend's dense pipeline: a rect's similarities to the host in passes, the computation
// of pass i+1, the device-to-host copy of pass i and the hand-off of pass i-1 overlapped (pinned
// staging buffers and helper threads, or the copy engine writing a page-locked destination
// directly); plain passes when it runs out of memory.
#include <cstring>
#include <future>

#include "lingo/cuda/job.hpp"

namespace molaccel::lingo::cuda_backend {
namespace {

// The pass pipeline's two page-locked staging buffers, from the Resources' pool (page-locking is
// slow: a fresh pair per call would cost more than the copy of a small matrix).
class StagingPair {
 public:
  StagingPair(PinnedPool& pool, std::size_t bytes) {
    for (auto& b : buffers_) b.resize(std::max<std::size_t>(bytes, 1), &pool);
  }
  std::uint8_t* buffer(int i) { return buffers_[i].data(); }

 private:
  cuda::PinnedBuffer<std::uint8_t> buffers_[2];
};

// One line per pass (rows, compute and copy intervals in ms from the first event, copy GB/s),
// then the totals: where the wall time of a pipelined dense copy goes.
void trace_timeline(const cuda::Event& t0, std::vector<cuda::Event>& marks, const std::vector<double>& host,
                    double host_t0, const std::vector<std::size_t>& bounds, std::size_t row_bytes,
                    double wall_s, double setup_s) {
  const std::size_t n = bounds.size() - 1;
  marks[4 * n - 1].synchronize();
  double copy_busy = 0, compute_busy = 0, gaps = 0, prev_copy_end = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double c0 = marks[4 * i].elapsed_ms_since(t0), c1 = marks[4 * i + 1].elapsed_ms_since(t0);
    const double k0 = marks[4 * i + 2].elapsed_ms_since(t0), k1 = marks[4 * i + 3].elapsed_ms_since(t0);
    const double bytes = static_cast<double>(bounds[i + 1] - bounds[i]) * row_bytes;
    compute_busy += c1 - c0;
    copy_busy += k1 - k0;
    if (i > 0) gaps += std::max(0.0, k0 - prev_copy_end);
    prev_copy_end = k1;
    auto h = [&](int k) { return (host[4 * i + k] - host_t0) * 1e3; };
    trace_message(
        "lingo",
        fmt::format(
            fmt::runtime("pipeline pass {:3} rows {:6} compute {:8.3f}-{:8.3f} copy {:8.3f}-{:8.3f} "
                         "({:5.1f} GB/s); host enqueues compute {:8.3f}-{:8.3f} copy {:8.3f}-{:8.3f}"),
            i, bounds[i + 1] - bounds[i], c0, c1, k0, k1, bytes / ((k1 - k0) * 1e-3) / 1e9, h(0), h(1), h(2),
            h(3)));
  }
  const double first_copy = marks[2].elapsed_ms_since(t0), last = marks[4 * n - 1].elapsed_ms_since(t0);
  trace_message(
      "lingo",
      fmt::format(fmt::runtime("pipeline: {} passes, wall {:.3f} ms = host setup {:.3f} ms + events span "
                               "{:.3f} ms + after; copy busy {:.3f} ms, before the first copy {:.3f} ms, "
                               "gaps between copies {:.3f} ms, compute busy {:.3f} ms"),
                  n, wall_s * 1e3, setup_s * 1e3, last, copy_busy, first_copy, gaps, compute_busy));
}

// Out of GPU memory in the pipeline: clears the sticky error and frees the pipeline's buffers
// before the next try.
void drop_pipeline_buffers(WorkerState& s) {
  cudaGetLastError();
  for (auto& b : s.pipe_sims) b.reset();
  for (auto& b : s.pipe_packed) b.reset();
}

}  // namespace

// Copies `rows` rows of `row_bytes` from contiguous `src` to `dst` (stride `ld_bytes`) with a few
// threads (`threads`, 0: up to 16): one thread cannot keep up with PCIe.
void parallel_rows_copy(std::uint8_t* dst, std::size_t ld_bytes, const std::uint8_t* src, std::size_t rows,
                        std::size_t row_bytes, int threads) {
  if (threads <= 0) threads = std::max(1, std::min(16, cpu_info().logical_cores));
  if (ld_bytes == row_bytes) {
    const std::size_t total = rows * row_bytes;
    const std::size_t piece = std::max<std::size_t>(std::size_t{1} << 20, (total + threads - 1) / threads);
    const std::size_t pieces = (total + piece - 1) / piece;
    parallel_for(pieces, threads, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p) {
        const std::size_t off = p * piece;
        std::memcpy(dst + off, src + off, std::min(piece, total - off));
      }
    });
    return;
  }
  parallel_for(rows, threads,
               std::max<std::size_t>(1, (std::size_t{1} << 20) / std::max<std::size_t>(row_bytes, 1)),
               [&](std::size_t b, std::size_t e) {
                 for (std::size_t r = b; r < e; ++r)
                   std::memcpy(dst + r * ld_bytes, src + r * row_bytes, row_bytes);
               });
}

// The pipeline of dense_stream (see the header): pass i computes into result buffer i % 2 on
// the compute stream, is converted there (fp16/u8), copied by the copy stream into pinned
// staging buffer i % 2, and handed to the sink by a helper thread, while pass i + 1 computes.
// With `direct` (page-locked destination: row r of the rect at direct + r * direct_ld bytes) the
// copy stream writes each pass straight into it: no staging buffer and no host-side copy.
void GpuJob::Impl::stream_passes(WorkerContext& ctx, const Rect& rect, OutputType type,
                                 const GpuJob::RowSink& sink, std::uint8_t* direct,
                                 std::size_t direct_ld) const {
  const double wall_entry = now_seconds();
  WorkerState& s = state(ctx);
  const int device = ctx.worker().device;
  ensure_db(s, rect.col_begin, rect.col_end);
  const std::size_t cols = rect.cols();
  const std::size_t elem = element_bytes(type);
  // Same staging bytes per pass for every type: fp16/u8 passes have 2x/4x the rows (without
  // staging, in direct mode, the fp32 result buffers set the size).
  const std::size_t per_pass =
      direct ? s.tuning.direct_pass_elements : s.tuning.staged_pass_elements * (4 / elem);
  std::size_t pass = std::max<std::size_t>(1, per_pass / cols);
  if (pass >= 64)
    pass = pass / 64 * 64;  // whole query groups; the pass sizes it was measured with
  else if (pass >= 32)
    pass = pass / 32 * 32;
  pass = std::min({pass, rect.rows(), std::max<std::size_t>(1, budget(device) / cols)});
  std::optional<StagingPair> staging_pair;  // not needed when copying straight into `direct`
  if (!direct) staging_pair.emplace(ctx.pinned_pool(), pass * cols * elem);
  // Every per-pass buffer at its largest size up front (the queries and plans by prepare_passes):
  // no reallocation (and no cudaFree, which would wait for the copy in flight) inside the loop.
  // The passes: the first ones small and doubling up to `pass` (Tuning::grow_passes), so that the
  // first pass's computation, which no copy overlaps, is short.
  std::vector<std::size_t> bounds{rect.row_begin};
  {
    std::size_t step = pass;
    if (s.tuning.grow_passes) {
      step = std::max<std::size_t>(1, pass / 8);
      if (step >= 64) step = step / 64 * 64;  // whole query groups
    }
    for (std::size_t r = rect.row_begin; r < rect.row_end;) {
      r = std::min(rect.row_end, r + step);
      bounds.push_back(r);
      step = std::min(pass, step * 2);
    }
  }
  const PreparedScope prepared = prepare_passes(s, bounds);
  for (int b = 0; b < 2; ++b) {
    s.pipe_sims[b].resize(std::max<std::size_t>(pass * cols, 1));
    if (type != OutputType::fp32) s.pipe_packed[b].resize(std::max<std::size_t>(pass * cols * elem, 1));
  }
  std::future<void> drains[2];
  // MOLACCEL_TRACE=lingo: CUDA events around every pass's compute and copy, traced at the end.
  const bool timeline = trace_enabled("lingo");
  const std::size_t n_passes = bounds.size() - 1;
  std::vector<cuda::Event> marks;  // per pass: compute begin, compute end, copy begin, copy end
  // Host clock (s) per pass: before and after enqueueing the compute, before and after
  // enqueueing the copy; host_t0 when t_begin was enqueued (the GPU is idle then).
  std::vector<double> host;
  double host_t0 = 0;
  cuda::Event t_begin;
  const double setup_s = now_seconds() - wall_entry;
  if (timeline) {
    marks.reserve(4 * n_passes);
    for (std::size_t k = 0; k < 4 * n_passes; ++k) marks.emplace_back(true);
    host.assign(4 * n_passes, 0.0);
    host_t0 = now_seconds();
    t_begin.record(s.copy_stream);
    MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(s.stream, t_begin.get(), 0));
  }
  try {
    for (std::size_t i = 0; i < n_passes; ++i) {
      const std::size_t r = bounds[i], r1 = bounds[i + 1];
      const int slot = static_cast<int>(i & 1);
      const std::size_t n = (r1 - r) * cols;
      // Result buffer `slot` was last read by the copy of pass i - 2.
      if (i >= 2) MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(s.stream, s.copied[slot].get(), 0));
      if (timeline) {
        host[4 * i] = now_seconds();
        marks[4 * i].record(s.stream);
      }
      // Straight into result buffer `slot` (sized above): swapping it with s.sims would lose its
      // capacity (a moved DeviceBuffer does not carry it), and the reallocation's cudaFree would
      // wait for the copy in flight.
      compute(s, r, r1, s.pipe_sims[slot].data());
      if (timeline) host[4 * i + 1] = now_seconds();
      const std::uint8_t* source = reinterpret_cast<const std::uint8_t*>(s.pipe_sims[slot].data());
      if (type != OutputType::fp32) {
        s.pipe_packed[slot].resize(n * elem);
        launch_convert(s.pipe_sims[slot].data(), n, s.pipe_packed[slot].data(), type, s.stream);
        source = s.pipe_packed[slot].data();
      }
      s.computed[slot].record(s.stream);
      if (timeline) marks[4 * i + 1].record(s.stream);
      MOLACCEL_CUDA_TRY(cudaStreamWaitEvent(s.copy_stream, s.computed[slot].get(), 0));
      if (timeline) {
        marks[4 * i + 2].record(s.copy_stream);
        host[4 * i + 2] = now_seconds();
      }
      if (direct) {
        const std::size_t row_bytes = cols * elem;
        std::uint8_t* dst = direct + (r - rect.row_begin) * direct_ld;
        if (direct_ld == row_bytes)
          MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, source, n * elem, cudaMemcpyDeviceToHost, s.copy_stream));
        else
          MOLACCEL_CUDA_TRY(cudaMemcpy2DAsync(dst, direct_ld, source, row_bytes, row_bytes, r1 - r,
                                              cudaMemcpyDeviceToHost, s.copy_stream));
        s.copied[slot].record(s.copy_stream);
        if (timeline) {
          host[4 * i + 3] = now_seconds();
          marks[4 * i + 3].record(s.copy_stream);
        }
        continue;
      }
      StagingPair* staging = &*staging_pair;
      if (drains[slot].valid()) drains[slot].get();  // staging buffer `slot` handed off
      MOLACCEL_CUDA_TRY(
          cudaMemcpyAsync(staging->buffer(slot), source, n * elem, cudaMemcpyDeviceToHost, s.copy_stream));
      s.copied[slot].record(s.copy_stream);
      if (timeline) {
        host[4 * i + 3] = now_seconds();
        marks[4 * i + 3].record(s.copy_stream);
      }
      drains[slot] = std::async(std::launch::async,
                                [&s, staging, &sink, slot, device, row = r - rect.row_begin, rows = r1 - r] {
                                  cuda::DeviceGuard guard(device);
                                  s.copied[slot].synchronize();
                                  sink(row, rows, staging->buffer(slot));
                                });
    }
    for (auto& d : drains)
      if (d.valid()) d.get();
    if (direct) MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s.copy_stream));
    if (timeline)
      trace_timeline(t_begin, marks, host, host_t0, bounds, cols * elem, now_seconds() - wall_entry, setup_s);
  } catch (...) {
    for (auto& d : drains)
      if (d.valid()) try {
          d.get();
        } catch (...) {
        }
    cudaStreamSynchronize(s.copy_stream);
    cudaStreamSynchronize(s.stream);
    throw;
  }
}

void GpuJob::dense(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const {
  dense_to(ctx, rect, OutputType::fp32, reinterpret_cast<std::uint8_t*>(out), ld * sizeof(float));
}

void GpuJob::dense_to(WorkerContext& ctx, const Rect& rect, OutputType type, std::uint8_t* out,
                      std::size_t ld_bytes) const {
  if (rect.rows() == 0 || rect.cols() == 0) return;
  const std::size_t row_bytes = rect.cols() * element_bytes(type);
  if (cuda::is_page_locked(out)) {
    try {
      impl_->stream_passes(ctx, rect, type, nullptr, out, ld_bytes);
      return;
    } catch (const CudaError& e) {
      if (!e.is_out_of_memory()) throw;
      drop_pipeline_buffers(impl_->state(ctx));
      // dense_stream below starts over with the pipeline and then plain passes.
    }
  }
  const int threads = impl_->tuning(ctx.worker().device).drain_threads;
  dense_stream(ctx, rect, type, [&](std::size_t row, std::size_t rows, const std::uint8_t* data) {
    parallel_rows_copy(out + row * ld_bytes, ld_bytes, data, rows, row_bytes, threads);
  });
}

void GpuJob::dense_stream(WorkerContext& ctx, const Rect& rect, OutputType type, const RowSink& sink) const {
  if (rect.rows() == 0 || rect.cols() == 0) return;
  try {
    impl_->stream_passes(ctx, rect, type, sink);
    return;
  } catch (const CudaError& e) {
    if (!e.is_out_of_memory()) throw;
    drop_pipeline_buffers(impl_->state(ctx));
    log_warn("lingo: GPU {} out of memory in the pipelined copy, falling back to plain passes",
             ctx.worker().device);
  }
  // Plain passes (shrinking on out-of-memory): compute, convert, copy, hand off; no overlap.
  const std::size_t elem = element_bytes(type);
  impl_->in_passes(ctx, rect, [&](WorkerState& s, std::size_t r0, std::size_t r1) {
    impl_->compute(s, r0, r1);
    const std::size_t n = (r1 - r0) * rect.cols();
    std::vector<std::uint8_t> host(n * elem);
    const std::uint8_t* source = reinterpret_cast<const std::uint8_t*>(s.sims.data());
    if (type != OutputType::fp32) {
      s.pipe_packed[0].resize(n * elem);
      launch_convert(s.sims.data(), n, s.pipe_packed[0].data(), type, s.stream);
      source = s.pipe_packed[0].data();
    }
    if (n)
      MOLACCEL_CUDA_TRY(cudaMemcpyAsync(host.data(), source, n * elem, cudaMemcpyDeviceToHost, s.stream));
    s.stream.synchronize();
    sink(r0 - rect.row_begin, r1 - r0, host.data());
  });
}

}  // namespace molaccel::lingo::cuda_backend

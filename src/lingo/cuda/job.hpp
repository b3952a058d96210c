// The CUDA backend's job layer: a GpuJob's host-side state (GpuJob::Impl), what each GPU worker
// keeps on its device (WorkerState: database and query slices, pass plans, result buffers), and the
// pass planning shared by job.cu (passes, top-k, threshold, the timed kernel loop) and pipeline.cu
// (the dense copy to the host).
#pragma once

#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "lingo/cuda/cuda_backend.hpp"
#include "lingo/cuda/kernels.hpp"
#include "lingo/cuda/tuning.hpp"
#include "lingo/interleaved_layout.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::lingo::cuda_backend {

// One pass of rows [r0, r1): its groups (small-table ones, then large-table ones) and merge-kernel
// rows, as ranges of the uploaded group and fallback arrays.
struct PassPlan {
  std::size_t r0 = 0, r1 = 0;
  std::size_t groups_begin = 0, n_small = 0, n_large = 0;
  std::size_t fallback_begin = 0, n_fallback = 0;
};

template <class T>
void upload_range(cuda::DeviceBuffer<T>& buffer, const T* data, std::size_t n, cudaStream_t stream) {
  buffer.resize(std::max<std::size_t>(n, 1));
  if (n) buffer.copy_from_host(data, n, stream);
}

// A contiguous range of molecules (a CSR slice, offsets rebased to 0) on the device.
struct DeviceSlice {
  std::size_t begin = 0, end = 0;
  bool valid = false;
  cuda::DeviceBuffer<std::uint64_t> feature_offsets, offsets;
  cuda::DeviceBuffer<std::uint32_t> features, feature_sizes, ids, counts, magnitudes, distinct;
  std::uint32_t max_features = 0;
  // Database slices only: the hashed kernel's interleaved layout (see InterleavedSlice).
  cuda::DeviceBuffer<std::uint64_t> warp_base;
  cuda::DeviceBuffer<std::uint32_t> lengths, sizes_sorted, interleaved;
  cuda::DeviceBuffer<std::uint16_t> columns;

  InterleavedSlice interleaved_view() const {
    return {warp_base.data(), lengths.data(), sizes_sorted.data(), columns.data(), interleaved.data()};
  }
  FeatureSlice feature_view() const {
    return {feature_offsets.data(), features.data(), feature_sizes.data()};
  }
  CountSlice count_view() const {
    return {offsets.data(), ids.data(), counts.data(), magnitudes.data(), distinct.data()};
  }

  // Windows of kBlock molecules, rows padded to 4 (the hashed kernel reads four or eight at a time).
  void load_interleaved(const detail::FeatureSet& fs, std::size_t b, std::size_t e, cudaStream_t stream) {
    const auto layout = detail::build_interleaved_layout(fs, b, e, kBlock, kEmptySlot, 4);
    upload_range(warp_base, layout.warp_base.data(), layout.warp_base.size(), stream);
    upload_range(lengths, layout.length.data(), layout.length.size(), stream);
    upload_range(sizes_sorted, layout.size.data(), layout.size.size(), stream);
    upload_range(columns, layout.column.data(), layout.column.size(), stream);
    upload_range(interleaved, layout.features.data(), layout.features.size(), stream);
    MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  void load(const detail::FeatureSet* fs, const detail::EncodedSet& es, std::size_t b, std::size_t e,
            cudaStream_t stream) {
    valid = false;
    begin = b;
    end = e;
    const std::size_t n = e - b;
    std::vector<std::uint64_t> rebased(n + 1);
    max_features = 0;
    if (fs) {
      for (std::size_t i = 0; i <= n; ++i) rebased[i] = fs->offsets[b + i] - fs->offsets[b];
      for (std::size_t i = 0; i < n; ++i)
        max_features =
            std::max<std::uint32_t>(max_features, static_cast<std::uint32_t>(rebased[i + 1] - rebased[i]));
      upload_range(feature_offsets, rebased.data(), n + 1, stream);
      upload_range(features, fs->features.data() + fs->offsets[b], fs->offsets[e] - fs->offsets[b], stream);
      upload_range(feature_sizes, fs->sizes.data() + b, n, stream);
      MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));  // `rebased` is reused below
    }
    for (std::size_t i = 0; i <= n; ++i) rebased[i] = es.offsets[b + i] - es.offsets[b];
    upload_range(offsets, rebased.data(), n + 1, stream);
    upload_range(ids, es.ids.data() + es.offsets[b], es.offsets[e] - es.offsets[b], stream);
    upload_range(counts, es.counts.data() + es.offsets[b], es.offsets[e] - es.offsets[b], stream);
    upload_range(magnitudes, es.magnitudes.data() + b, n, stream);
    upload_range(distinct, es.distinct.data() + b, n, stream);
    MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));
    valid = true;
  }
};

// Per worker (one per GPU), kept for the whole job by the scheduler's ctx.local<>().
struct WorkerState {
  Tuning tuning;  // the job's, for this device (set by GpuJob::Impl::state)
  cuda::Stream stream;
  DeviceSlice db, queries;
  cuda::DeviceBuffer<float> sims;
  cuda::DeviceBuffer<QueryGroup> groups;
  cuda::DeviceBuffer<std::uint32_t> fallback_rows;
  cuda::DeviceBuffer<DeviceHit> hits;
  cuda::DeviceBuffer<unsigned long long> hit_count;
  bool attributes_set = false;  // allow_large_tables() done for this worker
  // Set by prepare_passes for the loop that follows: the query slice (s.db or s.queries), its first
  // row, and every pass's plan, already on the device.
  struct {
    bool active = false;
    const DeviceSlice* slice = nullptr;
    std::size_t base = 0;
    std::vector<PassPlan> plans;
  } prepared;
  // Host clock (s) in the last prepare_passes: entered, groups planned, plan uploaded (for the
  // benchmark's timeline).
  double prepare_marks[3] = {0, 0, 0};
  // dense_stream's pipeline: a copy stream, two result buffers (and their fp16/u8 copies) used in
  // turn, events ordering compute -> copy -> reuse.
  cuda::Stream copy_stream;
  cuda::DeviceBuffer<float> pipe_sims[2];
  cuda::DeviceBuffer<std::uint8_t> pipe_packed[2];
  cuda::Event computed[2]{cuda::Event(false), cuda::Event(false)};
  cuda::Event copied[2]{cuda::Event(false), cuda::Event(false)};
};

// Copies `rows` rows of `row_bytes` from contiguous `src` to `dst` (stride `ld_bytes`) with a few
// threads (`threads`, 0: up to 16): one thread cannot keep up with PCIe.
void parallel_rows_copy(std::uint8_t* dst, std::size_t ld_bytes, const std::uint8_t* src, std::size_t rows,
                        std::size_t row_bytes, int threads);

struct GpuJob::Impl {
  const detail::Encoding& encoding;
  Metric metric;
  bool use_features;
  detail::FeatureSet db_features, query_features;  // query_features empty when self
  std::optional<Tuning> fixed_tuning;              // tests and benchmarks; else tuning_for
  Impl(const detail::Encoding& e, Metric m, std::optional<Tuning> t);
  const detail::FeatureSet& qfs() const { return encoding.self ? db_features : query_features; }
  Tuning tuning(int device) const;
  // The worker's state on its device, with this job's tuning for that device.
  WorkerState& state(WorkerContext& ctx) const;
  // Largest number of dense elements one pass should produce on `device` (memory-bounded).
  std::size_t budget(int device) const;
  void ensure_db(WorkerState& s, std::size_t b, std::size_t e) const;
  PassPlan plan_pass(std::size_t r0, std::size_t r1, std::size_t base, std::vector<QueryGroup>& groups,
                     std::vector<std::uint32_t>& fallback) const;
  void launch_pass(WorkerState& s, const PassPlan& p, const DeviceSlice& q, std::size_t base,
                   float* dst) const;
  void compute(WorkerState& s, std::size_t r0, std::size_t r1, float* dst = nullptr) const;

  // Ends the prepared state of prepare_passes.
  struct PreparedScope {
    WorkerState* s;
    ~PreparedScope() { s->prepared.active = false; }
  };
  PreparedScope prepare_passes(WorkerState& s, const std::vector<std::size_t>& bounds) const;

  // Runs `body(r0, r1)` over the rect's rows in passes that fit the dense budget; out of memory
  // halves the pass and retries (shrink, never drop).
  // `pass_rows` (on_device) overrides the budget's rows per pass.
  template <class Body>
  void in_passes(WorkerContext& ctx, const Rect& rect, Body&& body, std::size_t pass_rows = 0) const {
    WorkerState& s = state(ctx);
    std::size_t pass = std::max<std::size_t>(
        1, std::min(rect.rows(), pass_rows
                                     ? pass_rows
                                     : budget(ctx.worker().device) / std::max<std::size_t>(rect.cols(), 1)));
    std::size_t r = rect.row_begin;
    while (r < rect.row_end) {
      try {
        ensure_db(s, rect.col_begin, rect.col_end);
        std::vector<std::size_t> bounds{r};
        for (std::size_t b = r; b < rect.row_end;) bounds.push_back(b = std::min(rect.row_end, b + pass));
        const PreparedScope prepared = prepare_passes(s, bounds);
        for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
          body(s, bounds[i], bounds[i + 1]);
          r = bounds[i + 1];
        }
      } catch (const CudaError& e) {
        if (!e.is_out_of_memory() || pass == 1) throw;
        cudaGetLastError();  // clear the sticky-free OOM status
        s.sims.reset();
        s.hits.reset();
        pass /= 2;
        log_warn("lingo: GPU {} out of memory, retrying with {} rows per pass", ctx.worker().device, pass);
      }
    }
  }

  // The pipelined dense copy of dense_stream / dense_to (pipeline.cu).
  void stream_passes(WorkerContext& ctx, const Rect& rect, OutputType type, const GpuJob::RowSink& sink,
                     std::uint8_t* direct = nullptr, std::size_t direct_ld = 0) const;
};

}  // namespace molaccel::lingo::cuda_backend

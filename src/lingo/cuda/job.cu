// The CUDA backend's job layer: a GpuJob's passes over a rect (planning the query groups, uploading
// queries and plans once per loop, launching the kernels), top-k and threshold selection on the
// device, and the benchmarks' timed kernel loop. The dense copy to the host is in pipeline.cu.
#include <algorithm>

#include "lingo/cuda/job.hpp"

namespace molaccel::lingo::cuda_backend {

GpuJob::Impl::Impl(const detail::Encoding& e, Metric m, std::optional<Tuning> t)
    : encoding(e), metric(m), use_features(m != Metric::vidal), fixed_tuning(t) {
  if (use_features) {
    const auto bases = detail::feature_bases(e);
    const bool distinct_only = m == Metric::set;
    db_features = detail::expand_features(e.database, e.max_count, bases, distinct_only);
    if (!e.self) query_features = detail::expand_features(e.queries, e.max_count, bases, distinct_only);
  }
}

Tuning GpuJob::Impl::tuning(int device) const {
  return fixed_tuning ? *fixed_tuning
                      : tuning_for(device, {metric, encoding.query_set().size(), encoding.database.size()});
}

WorkerState& GpuJob::Impl::state(WorkerContext& ctx) const {
  auto& s = ctx.local<WorkerState>();
  s.tuning = tuning(ctx.worker().device);
  if (!s.attributes_set) {
    allow_large_tables();
    s.attributes_set = true;
  }
  return s;
}

std::size_t GpuJob::Impl::budget(int device) const {
  std::size_t free_bytes = 0, total = 0;
  {
    cuda::DeviceGuard guard(device);
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) free_bytes = std::size_t{1} << 30;
  }
  // A quarter of free memory for the dense pass, at most 1 GiB of floats.
  return std::max<std::size_t>(1 << 20,
                               std::min<std::size_t>(free_bytes / 4, std::size_t{1} << 30) / sizeof(float));
}

void GpuJob::Impl::ensure_db(WorkerState& s, std::size_t b, std::size_t e) const {
  if (s.db.valid && s.db.begin == b && s.db.end == e) return;
  s.db.load(use_features ? &db_features : nullptr, encoding.database, b, e, s.stream);
  if (use_features) {
    s.db.valid = false;
    s.db.load_interleaved(db_features, b, e, s.stream);
    s.db.valid = true;
  }
}

// The groups of query rows [r0, r1): up to 32 consecutive queries, total features within half
// the table (shared features take one slot, so the real load is lower). A group whose features
// do not fit closes early: diverse inputs make smaller groups, no cliff. Queries too large for any table (and
// every row for vidal) go to the merge kernel. Rows are numbered from `base` (the first row of the query
// slice on the device); the groups and fallback rows are appended to `groups` / `fallback`.
PassPlan GpuJob::Impl::plan_pass(std::size_t r0, std::size_t r1, std::size_t base,
                                 std::vector<QueryGroup>& groups,
                                 std::vector<std::uint32_t>& fallback) const {
  PassPlan p;
  p.r0 = r0;
  p.r1 = r1;
  p.groups_begin = groups.size();
  p.fallback_begin = fallback.size();
  auto rel = [&](std::size_t r) { return static_cast<std::uint32_t>(r - base); };
  if (!use_features) {
    for (std::size_t r = r0; r < r1; ++r) fallback.push_back(rel(r));
    p.n_fallback = r1 - r0;
    return p;
  }
  const auto& fs = qfs();
  const std::uint64_t small_cap = kSmallTableSlots / 2;
  const std::uint32_t group_max = kQueriesPerGroup;
  std::vector<QueryGroup> large;
  for (std::size_t r = r0; r < r1;) {
    const std::uint64_t first = fs.offsets[r + 1] - fs.offsets[r];
    if (first > kLargeTableSlots / 2) {
      fallback.push_back(rel(r));
      ++r;
      continue;
    }
    if (first > small_cap) {
      large.push_back({rel(r), 1});
      ++r;
      continue;
    }
    QueryGroup g{rel(r), 0};
    std::uint64_t total = 0;
    while (r < r1 && g.count < group_max) {
      const std::uint64_t f = fs.offsets[r + 1] - fs.offsets[r];
      if (total + f > small_cap) break;
      total += f;
      ++g.count;
      ++r;
    }
    groups.push_back(g);
  }
  p.n_small = groups.size() - p.groups_begin;
  p.n_large = large.size();
  groups.insert(groups.end(), large.begin(), large.end());
  p.n_fallback = fallback.size() - p.fallback_begin;
  return p;
}

// Launches the kernels of one planned pass (its groups and fallback rows already in s.groups and
// s.fallback_rows): queries from slice `q` (query row r at slice row r - base), results into
// s.sims, row p.r0 first (ld = database slice width). Kernels only: no copy, no host wait.
void GpuJob::Impl::launch_pass(WorkerState& s, const PassPlan& p, const DeviceSlice& q, std::size_t base,
                               float* dst) const {
  const std::size_t cols = s.db.end - s.db.begin;
  if (p.r1 == p.r0 || cols == 0) return;
  // The kernels address results by slice row: shift the output so that row p.r0 lands on row 0
  // of `dst` (only rows >= p.r0 are written). Integer arithmetic: the address is never formed
  // as a host pointer into an array.
  float* out =
      reinterpret_cast<float*>(reinterpret_cast<std::uintptr_t>(dst) - (p.r0 - base) * cols * sizeof(float));
  if (use_features) {
    // Each block reuses its table over up to block_steps window pairs of the database (amortises
    // the build); fewer when the pass has few query groups, so the launch still fills the GPU (at
    // least 4,096 blocks: the pipelined passes of dense_stream are ~1,024 rows).
    const auto splits_for = [&](std::size_t n_groups) {
      const std::size_t windows = (cols + kPairWindow - 1) / kPairWindow;
      std::size_t per_block = std::max<std::size_t>(1, s.tuning.block_steps);
      while (per_block > 1 && n_groups * ((windows + per_block - 1) / per_block) < 4096) per_block /= 2;
      return static_cast<unsigned>(std::min<std::size_t>((windows + per_block - 1) / per_block, 65535));
    };
    const bool wide = s.db.max_features >= 2048;
    const auto launch = [&](std::size_t first_group, std::size_t n_groups, std::uint32_t slots) {
      launch_hashed(s.groups.data() + p.groups_begin + first_group, n_groups, splits_for(n_groups), slots,
                    wide, q.feature_view(), s.db.interleaved_view(), s.db.feature_offsets.data(),
                    s.db.feature_sizes.data(), static_cast<std::uint32_t>(cols), out, cols, s.stream);
    };
    launch(0, p.n_small, kSmallTableSlots);
    launch(p.n_small, p.n_large, kLargeTableSlots);
  }
  if (p.n_fallback)
    launch_merge(s.fallback_rows.data() + p.fallback_begin, static_cast<std::uint32_t>(p.n_fallback), metric,
                 q.count_view(), s.db.count_view(), static_cast<std::uint32_t>(cols), out, cols, s.stream);
}

// Similarities of rows [r0, r1) x the loaded database slice into `dst` (ld = slice width; by
// default s.sims, grown as needed; the pipeline passes its own result buffer, so nothing is
// reallocated inside its loop: a cudaFree there would wait for the copy in flight). Inside
// prepare_passes' loop the pass only launches kernels; otherwise its queries and plan are
// uploaded first.
void GpuJob::Impl::compute(WorkerState& s, std::size_t r0, std::size_t r1, float* dst) const {
  const std::size_t rows = r1 - r0, cols = s.db.end - s.db.begin;
  auto out = [&] {
    if (dst) return dst;
    s.sims.resize(std::max<std::size_t>(rows * cols, 1));
    return s.sims.data();
  };
  if (s.prepared.active)
    for (const PassPlan& p : s.prepared.plans)
      if (p.r0 == r0 && p.r1 == r1) {
        launch_pass(s, p, *s.prepared.slice, s.prepared.base, out());
        return;
      }
  s.queries.load(use_features ? &qfs() : nullptr, encoding.query_set(), r0, r1, s.stream);
  float* target = out();
  if (rows == 0 || cols == 0) return;
  std::vector<QueryGroup> groups;
  std::vector<std::uint32_t> fallback;
  const PassPlan p = plan_pass(r0, r1, r0, groups, fallback);
  upload_range(s.groups, groups.data(), groups.size(), s.stream);
  if (!fallback.empty()) upload_range(s.fallback_rows, fallback.data(), fallback.size(), s.stream);
  launch_pass(s, p, s.queries, r0, target);
}

// Before a loop of passes (`bounds`: first rows, then the end): the queries of every pass go to
// the device once -- none at all when the set is compared with itself and the rows lie inside the
// loaded database slice, which then serves as the query slice -- and every pass's plan is uploaded,
// so that the passes launch kernels only: no upload and no host synchronisation between them
// (per-pass uploads left the GPU idle between passes and, in the pipeline, waited behind the
// device-to-host copy in flight). The returned guard ends the prepared state.
GpuJob::Impl::PreparedScope GpuJob::Impl::prepare_passes(WorkerState& s,
                                                         const std::vector<std::size_t>& bounds) const {
  s.prepare_marks[0] = now_seconds();
  s.prepared.active = false;
  s.prepared.plans.clear();
  const std::size_t first = bounds.front(), last = bounds.back();
  if (encoding.self && s.db.valid && first >= s.db.begin && last <= s.db.end) {
    s.prepared.slice = &s.db;
    s.prepared.base = s.db.begin;
  } else {
    s.queries.load(use_features ? &qfs() : nullptr, encoding.query_set(), first, last, s.stream);
    s.prepared.slice = &s.queries;
    s.prepared.base = first;
  }
  std::vector<QueryGroup> groups;
  std::vector<std::uint32_t> fallback;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i)
    s.prepared.plans.push_back(plan_pass(bounds[i], bounds[i + 1], s.prepared.base, groups, fallback));
  s.prepare_marks[1] = now_seconds();
  // Uploaded from ordinary memory, then one synchronisation (an upload from a page-locked copy
  // without it measured no faster and cost a cudaMallocHost per fresh worker state).
  upload_range(s.groups, groups.data(), groups.size(), s.stream);
  upload_range(s.fallback_rows, fallback.data(), fallback.size(), s.stream);
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s.stream));
  s.prepare_marks[2] = now_seconds();
  s.prepared.active = true;
  return PreparedScope{&s};
}

GpuJob::GpuJob(const detail::Encoding& encoding, Metric metric, std::optional<Tuning> tuning)
    : impl_(std::make_unique<Impl>(encoding, metric, tuning)) {}
GpuJob::~GpuJob() = default;

std::size_t GpuJob::dense_budget(int device) const {
  return impl_->budget(device);
}

std::string GpuJob::kernel_name() const {
  return impl_->use_features ? "hashed" : "merge";
}

void GpuJob::on_device(WorkerContext& ctx, const Rect& rect, const DeviceSink& sink) const {
  const int device = ctx.worker().device;
  cuda::DeviceGuard guard(device);
  WorkerState& s = impl_->state(ctx);
  impl_->ensure_db(s, rect.col_begin, rect.col_end);
  // Rows per pass, decided with the database upload: the results stay in device memory, so the
  // whole rect is one pass (one launch: one prologue and one tail, where
  // passes of the 1 GiB budget take four at 32,768^2) when it fits in a quarter of the free memory
  // (the allocation is made by the first, warm-up call); otherwise the budget's passes.
  // Tuning::device_pass_elements sets the elements per pass (268435456: the budget's 1 GiB).
  std::size_t pass_rows = 0;
  {
    const std::size_t cols = std::max<std::size_t>(rect.cols(), 1);
    if (s.tuning.device_pass_elements) {
      pass_rows = std::max<std::size_t>(1, s.tuning.device_pass_elements / cols);
    } else {
      std::size_t free_bytes = 0, total = 0;
      if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) free_bytes = 0;
      const std::size_t have = s.sims.size() * sizeof(float) + free_bytes / 4;
      pass_rows = rect.rows() * cols * sizeof(float) <= have ? rect.rows() : 0;  // 0: the budget's
    }
  }
  // MOLACCEL_TRACE=lingo: the loop and each pass's kernels timed by events, to set them against the whole
  // (host planning, uploads and gaps between passes included).
  const bool timeline = trace_enabled("lingo");
  std::vector<std::pair<cuda::Event, cuda::Event>> marks;
  std::vector<std::size_t> rows;
  cuda::Event start, stop;
  double host_start = 0, host_first_launched = 0;
  host_start = now_seconds();
  start.record(s.stream);
  impl_->in_passes(
      ctx, rect,
      [&](WorkerState& st, std::size_t r0, std::size_t r1) {
        if (timeline) {
          marks.emplace_back();
          marks.back().first.record(st.stream);
        }
        impl_->compute(st, r0, r1);
        if (!host_first_launched) host_first_launched = now_seconds();
        if (timeline) {
          marks.back().second.record(st.stream);
          rows.push_back(r1 - r0);
        }
        if (sink) sink(r0 - rect.row_begin, r1 - r0, st.sims.data(), static_cast<void*>(st.stream.get()));
      },
      pass_rows);
  stop.record(s.stream);
  stop.synchronize();
  if (timeline) {
    const auto ms = [&](double t) { return (t - host_start) * 1e3; };
    trace_message(
        "lingo",
        fmt::format(fmt::runtime("kernel loop, host from the start event: planning {:.3f}-{:.3f} ms, plan "
                                 "upload {:.3f}-{:.3f} ms, first pass enqueued {:.3f} ms"),
                    ms(s.prepare_marks[0]), ms(s.prepare_marks[1]), ms(s.prepare_marks[1]),
                    ms(s.prepare_marks[2]), ms(host_first_launched)));
    double kernels = 0;
    for (std::size_t i = 0; i < marks.size(); ++i) {
      const double ms = marks[i].second.elapsed_ms_since(marks[i].first);
      kernels += ms;
      trace_message(
          "lingo",
          fmt::format(
              fmt::runtime("kernel loop pass {} rows {} {:.3f} ms ({:.1f} G/s), from start {:.3f} ms"), i,
              rows[i], ms, static_cast<double>(rows[i]) * rect.cols() / (ms * 1e-3) / 1e9,
              marks[i].first.elapsed_ms_since(start)));
    }
    trace_message("lingo", fmt::format(fmt::runtime("kernel loop: {} passes, kernels {:.3f} ms of {:.3f} ms"),
                                       marks.size(), kernels, stop.elapsed_ms_since(start)));
  }
}

std::vector<Hit> GpuJob::top_k(WorkerContext& ctx, const Rect& rect, std::size_t k) const {
  std::vector<Hit> result;
  const std::size_t take = std::min(k, rect.cols());
  if (take == 0) return result;
  result.resize(rect.rows() * take);
  impl_->in_passes(ctx, rect, [&](WorkerState& s, std::size_t r0, std::size_t r1) {
    impl_->compute(s, r0, r1);
    const std::size_t rows = r1 - r0;
    s.hits.resize(rows * take);
    launch_top_k(s.sims.data(), rect.cols(), rows, static_cast<std::uint32_t>(rect.cols()),
                 static_cast<std::uint32_t>(take), static_cast<std::uint32_t>(r0),
                 static_cast<std::uint32_t>(rect.col_begin), s.hits.data(), s.stream);
    Hit* dst = result.data() + (r0 - rect.row_begin) * take;
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, s.hits.data(), rows * take * sizeof(DeviceHit),
                                      cudaMemcpyDeviceToHost, s.stream));
    s.stream.synchronize();
  });
  if (take > kSelectCapacity)  // the kernel sorts up to kSelectCapacity hits per row
    for (std::size_t r = 0; r < rect.rows(); ++r)
      std::sort(result.begin() + r * take, result.begin() + (r + 1) * take, [](const Hit& a, const Hit& b) {
        return a.similarity != b.similarity ? a.similarity > b.similarity : a.target < b.target;
      });
  return result;
}

std::vector<Hit> GpuJob::threshold(WorkerContext& ctx, const Rect& rect, float threshold, bool self) const {
  std::vector<Hit> result;
  impl_->in_passes(ctx, rect, [&](WorkerState& s, std::size_t r0, std::size_t r1) {
    impl_->compute(s, r0, r1);
    const std::size_t rows = r1 - r0, cols = rect.cols();
    if (rows == 0 || cols == 0) return;
    s.hit_count.resize(1);
    std::size_t capacity = std::max<std::size_t>(s.hits.size(), 1 << 16);
    for (;;) {
      s.hits.resize(capacity);
      s.hit_count.fill_zero(s.stream);
      launch_threshold(s.sims.data(), cols, static_cast<std::uint32_t>(rows),
                       static_cast<std::uint32_t>(cols), threshold, self, static_cast<std::uint32_t>(r0),
                       static_cast<std::uint32_t>(rect.col_begin), s.hits.data(), capacity,
                       s.hit_count.data(), s.stream);
      unsigned long long count = 0;
      MOLACCEL_CUDA_TRY(
          cudaMemcpyAsync(&count, s.hit_count.data(), sizeof(count), cudaMemcpyDeviceToHost, s.stream));
      s.stream.synchronize();
      if (count > capacity) {  // too many pairs for the buffer: grow and select again
        capacity = static_cast<std::size_t>(count);
        continue;
      }
      const std::size_t before = result.size();
      result.resize(before + count);
      if (count)
        MOLACCEL_CUDA_TRY(cudaMemcpyAsync(result.data() + before, s.hits.data(), count * sizeof(DeviceHit),
                                          cudaMemcpyDeviceToHost, s.stream));
      s.stream.synchronize();
      break;
    }
  });
  return result;
}

}  // namespace molaccel::lingo::cuda_backend

// CUDA backend, top two layers: the public entry (score_batch: one database tile, all queries)
// and the dispatch that picks a tuning for the device. The tile is split by length: subjects up to
// `long_threshold` go to the inter-task kernel (packed 16-bit, DPX; by default one subject and two
// queries per thread, score_tile_once_qp; MOLACCEL_ALIGN_INTER=pf|base: two subjects and one query,
// score_tile_once), longer ones to the intra-task kernel (one warp per subject, 32-bit), on a second
// stream so both overlap.
// Pairs whose 16-bit maximum reaches the saturation threshold are rescored by the intra kernel.
// Out of device memory: the tile is halved and retried.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "align/cuda/gpu_entry.hpp"
#include "align/cuda/sw_kernels.cuh"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::align::gpu_entry {
namespace {

constexpr unsigned char kPaddingCode = 31;  // as in align.hpp
constexpr int kAlphabetSize = 26;

// A tile range: subject i = residues[offsets[i], offsets[i+1]).
struct SubjectBatch {
  const std::uint8_t* residues = nullptr;
  const std::uint64_t* offsets = nullptr;
  std::size_t count = 0;
  std::size_t length(std::size_t i) const { return static_cast<std::size_t>(offsets[i + 1] - offsets[i]); }
  const std::uint8_t* subject(std::size_t i) const { return residues + offsets[i]; }
  std::uint64_t residue_count() const { return count ? offsets[count] - offsets[0] : 0; }
};

struct Scoring {
  const int* matrix;  // 32x32 padded
  int gap_open, gap_extend, saturation_threshold;
};

using molaccel::cuda::DeviceBuffer;
using molaccel::cuda::DeviceGuard;
using molaccel::cuda::Stream;

struct Tuning {
  // R of the inter-task kernel. Default: the query-pair kernel (qp) with R = 48 and 2 blocks per
  // SM, measured fastest on an H100: 3.98 TCUPS compute, vs 3.96 for qp R = 32 / 3 blocks, 3.88 for
  // qp R = 64, 3.15 for the two-subject prefetching kernel (pf, R = 48) and 2.19 for the older
  // kernel (base, R = 64); docs/align.md.
  int strip_rows = 48;
  int threads = 128;  // per block, both kernels
  unsigned long_threshold = 2048;
  // Inter-task variant (MOLACCEL_ALIGN_INTER): qp = inter_task_kernel_qp (default: one subject and
  // two queries per thread), pf = inter_task_kernel_pf (two subjects and one query per thread),
  // base = inter_task_kernel (the first kernel); qp and pf prefetch one quad ahead and run at least
  // `min_blocks` blocks of 128 threads per SM.
  bool prefetch = true;
  bool query_pairs = true;
  int min_blocks = 2;
  const char* name = "cuda/inter16x2q-dpx-qp+intra32";
};

Tuning tuning_for(int device) {
  cudaDeviceProp prop{};
  MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  Tuning t;
  const bool dpx = prop.major >= 9;  // DPX intrinsics are emulated before sm_90
  // Benchmarks may override (documented in docs/align.md).
  if (const char* s = std::getenv("MOLACCEL_ALIGN_LONG_THRESHOLD"))
    t.long_threshold = std::max(1, std::atoi(s));
  if (const char* s = std::getenv("MOLACCEL_ALIGN_STRIP_ROWS")) {
    const int r = std::atoi(s);
    if (r == 16 || r == 32 || r == 48 || r == 64) t.strip_rows = r;
  }
  if (const char* s = std::getenv("MOLACCEL_ALIGN_INTER")) {
    t.prefetch = std::string(s) != "base";
    t.query_pairs = std::string(s) == "qp";
  }
  if (const char* s = std::getenv("MOLACCEL_ALIGN_MIN_BLOCKS")) t.min_blocks = std::atoi(s);
  if (t.prefetch) {
    // Instantiated pairs (R, min blocks); others fall back to the nearest one below.
    if (t.strip_rows == 64 || t.strip_rows == 48)
      t.min_blocks = t.min_blocks >= 3 ? 3 : 2;
    else if (t.strip_rows == 32)
      t.min_blocks = t.min_blocks >= 4 ? 4 : 3;
    else
      t.min_blocks = 4;
    t.name = dpx ? "cuda/inter16x2-dpx-pf+intra32" : "cuda/inter16x2-pf+intra32";
    if (t.query_pairs) t.name = dpx ? "cuda/inter16x2q-dpx-qp+intra32" : "cuda/inter16x2q-qp+intra32";
  } else {
    if (t.strip_rows == 48) t.strip_rows = 64;  // the older kernel has no R = 48 instance
    t.name = dpx ? "cuda/inter16x2-dpx+intra32" : "cuda/inter16x2+intra32";
  }
  return t;
}

// Device buffers of one GPU worker, reused across tiles and queries.
struct DeviceScratch {
  DeviceBuffer<uint2> subjects;
  DeviceBuffer<unsigned long long> warp_base;
  DeviceBuffer<unsigned> warp_quads;
  DeviceBuffer<uint2> boundary;
  DeviceBuffer<unsigned> pair_best;
  DeviceBuffer<short> profile;
  DeviceBuffer<unsigned> subjects_qp, profile_qp;  // query-pair variant
  DeviceBuffer<unsigned char> residues;  // the tile, linear (intra-task jobs)
  DeviceBuffer<unsigned char> query;
  DeviceBuffer<int> matrix;
  DeviceBuffer<unsigned long long> job_offset, job_scratch;
  DeviceBuffer<unsigned> job_length;
  DeviceBuffer<int2> job_rows;
  DeviceBuffer<int> job_best;
  void release() { *this = DeviceScratch{}; }
};

struct IntraJobs {
  std::vector<unsigned long long> offset, scratch;
  std::vector<unsigned> length;
  std::vector<std::size_t> subject;  // index in the batch
  unsigned long long scratch_total = 0;
  void add(const SubjectBatch& batch, std::size_t i) {
    offset.push_back(batch.offsets[i] - batch.offsets[0]);
    length.push_back(static_cast<unsigned>(batch.offsets[i + 1] - batch.offsets[i]));
    scratch.push_back(scratch_total);
    scratch_total += length.back();
    subject.push_back(i);
  }
  std::size_t size() const { return subject.size(); }
};

template <int R>
void launch_inter(const Tuning& t, DeviceScratch& s, int warps, int m_pad, const Scoring& scoring,
                  cudaStream_t stream) {
  const int warps_per_block = t.threads / gpu::kWarp;
  const int blocks = (warps + warps_per_block - 1) / warps_per_block;
  gpu::inter_task_kernel<R><<<blocks, t.threads, 0, stream>>>(
      s.subjects.data(), s.warp_base.data(), s.warp_quads.data(), s.boundary.data(), warps, s.profile.data(),
      m_pad, scoring.gap_open, scoring.gap_extend, s.pair_best.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("align inter_task_kernel");
}

template <int R, int MinBlocks>
void launch_inter_pf(const Tuning&, DeviceScratch& s, int warps, int m_pad, const Scoring& scoring,
                     cudaStream_t stream) {
  const int warps_per_block = 128 / gpu::kWarp;  // __launch_bounds__(128, MinBlocks)
  const int blocks = (warps + warps_per_block - 1) / warps_per_block;
  gpu::inter_task_kernel_pf<R, MinBlocks><<<blocks, 128, 0, stream>>>(
      s.subjects.data(), s.warp_base.data(), s.warp_quads.data(), s.boundary.data(), warps, s.profile.data(),
      m_pad, scoring.gap_open, scoring.gap_extend, s.pair_best.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("align inter_task_kernel_pf");
}

void launch_inter_any(const Tuning& t, DeviceScratch& s, int warps, int m_pad, const Scoring& scoring,
                      cudaStream_t stream) {
  if (t.prefetch) {
    if (t.strip_rows == 64 && t.min_blocks == 3)
      return launch_inter_pf<64, 3>(t, s, warps, m_pad, scoring, stream);
    if (t.strip_rows == 64) return launch_inter_pf<64, 2>(t, s, warps, m_pad, scoring, stream);
    if (t.strip_rows == 48 && t.min_blocks == 3)
      return launch_inter_pf<48, 3>(t, s, warps, m_pad, scoring, stream);
    if (t.strip_rows == 48) return launch_inter_pf<48, 2>(t, s, warps, m_pad, scoring, stream);
    if (t.strip_rows == 32 && t.min_blocks == 4)
      return launch_inter_pf<32, 4>(t, s, warps, m_pad, scoring, stream);
    if (t.strip_rows == 32) return launch_inter_pf<32, 3>(t, s, warps, m_pad, scoring, stream);
    return launch_inter_pf<16, 4>(t, s, warps, m_pad, scoring, stream);
  }
  switch (t.strip_rows) {
    case 16:
      return launch_inter<16>(t, s, warps, m_pad, scoring, stream);
    case 64:
      return launch_inter<64>(t, s, warps, m_pad, scoring, stream);
    default:
      return launch_inter<32>(t, s, warps, m_pad, scoring, stream);
  }
}

void upload_jobs(DeviceScratch& s, const IntraJobs& jobs, cudaStream_t stream) {
  s.job_offset.resize(jobs.size());
  s.job_offset.copy_from_host(jobs.offset.data(), jobs.size(), stream);
  s.job_scratch.resize(jobs.size());
  s.job_scratch.copy_from_host(jobs.scratch.data(), jobs.size(), stream);
  s.job_length.resize(jobs.size());
  s.job_length.copy_from_host(jobs.length.data(), jobs.size(), stream);
  s.job_rows.resize(std::max<unsigned long long>(1, jobs.scratch_total));
  s.job_best.resize(jobs.size());
}

void launch_intra(const Tuning& t, DeviceScratch& s, int jobs, int m, const Scoring& scoring,
                  cudaStream_t stream) {
  constexpr int kRowsPerLane = 8;
  const int warps_per_block = t.threads / gpu::kWarp;
  const int blocks = (jobs + warps_per_block - 1) / warps_per_block;
  gpu::intra_task_kernel<kRowsPerLane><<<blocks, t.threads, 0, stream>>>(
      s.residues.data(), s.job_offset.data(), s.job_length.data(), s.job_scratch.data(), s.job_rows.data(),
      jobs, s.query.data(), m, s.matrix.data(), scoring.gap_open, scoring.gap_extend, s.job_best.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("align intra_task_kernel");
}

void score_tile_once(const Tuning& t, DeviceScratch& s, const QueryView* queries, std::size_t query_count,
                     const SubjectBatch& batch, const Scoring& scoring, int* const* scores,
                     TileResult& counters) {
  // Short subjects are a prefix of the length-sorted batch.
  std::size_t n_short = 0;
  while (n_short < batch.count && batch.offsets[n_short + 1] - batch.offsets[n_short] <= t.long_threshold)
    ++n_short;
  const std::size_t pairs = (n_short + 1) / 2;
  const int warps = static_cast<int>((pairs + gpu::kWarp - 1) / gpu::kWarp);

  // Inter-task layout: uint2 per (warp, quad, lane), residues of subjects 2p (x) and 2p+1 (y).
  std::vector<unsigned long long> warp_base(warps);
  std::vector<unsigned> warp_quads(warps);
  unsigned long long total = 0;
  for (int w = 0; w < warps; ++w) {
    const std::size_t last = std::min(n_short, static_cast<std::size_t>(w + 1) * 2 * gpu::kWarp) - 1;
    const auto longest = batch.offsets[last + 1] - batch.offsets[last];
    warp_base[w] = total;
    warp_quads[w] = static_cast<unsigned>((longest + 3) / 4);
    total += static_cast<unsigned long long>(warp_quads[w]) * gpu::kWarp;
  }
  std::vector<uint2> layout(total);
  for (int w = 0; w < warps; ++w) {
    for (int lane = 0; lane < gpu::kWarp; ++lane) {
      const std::size_t a = (static_cast<std::size_t>(w) * gpu::kWarp + lane) * 2, b = a + 1;
      const std::uint8_t* sa = a < n_short ? batch.subject(a) : nullptr;
      const std::uint8_t* sb = b < n_short ? batch.subject(b) : nullptr;
      const std::size_t la = a < n_short ? batch.length(a) : 0, lb = b < n_short ? batch.length(b) : 0;
      for (unsigned c = 0; c < warp_quads[w]; ++c) {
        unsigned x = 0, y = 0;
        for (int k = 0; k < 4; ++k) {
          const std::size_t j = c * 4 + k;
          x |= static_cast<unsigned>(j < la ? sa[j] : kPaddingCode) << (8 * k);
          y |= static_cast<unsigned>(j < lb ? sb[j] : kPaddingCode) << (8 * k);
        }
        layout[warp_base[w] + static_cast<std::size_t>(c) * gpu::kWarp + lane] = make_uint2(x, y);
      }
    }
  }
  Stream inter_stream, intra_stream;
  s.subjects.upload(layout, inter_stream);
  s.warp_base.upload(warp_base, inter_stream);
  s.warp_quads.upload(warp_quads, inter_stream);
  s.boundary.resize(std::max<unsigned long long>(1, total * 4));
  s.pair_best.resize(std::max<std::size_t>(1, static_cast<std::size_t>(warps) * gpu::kWarp));
  s.residues.resize(std::max<std::uint64_t>(1, batch.residue_count()));
  s.residues.copy_from_host(batch.residues + batch.offsets[0], batch.residue_count(), intra_stream);

  std::vector<int> matrix(scoring.matrix, scoring.matrix + gpu::kMatrixDim * gpu::kMatrixDim);
  s.matrix.upload(matrix, intra_stream);

  IntraJobs long_jobs;
  for (std::size_t i = n_short; i < batch.count; ++i) long_jobs.add(batch, i);
  const int threshold = scoring.saturation_threshold;
  std::vector<unsigned> pair_best(static_cast<std::size_t>(warps) * gpu::kWarp);
  std::vector<int> job_best;

  for (std::size_t q = 0; q < query_count; ++q) {
    const std::uint8_t* query = queries[q].codes;
    const int m = static_cast<int>(queries[q].length);
    const int m_pad = (m + t.strip_rows - 1) / t.strip_rows * t.strip_rows;
    // profile[letter][i] = score(query[i], letter); padding rows and the padding letter score low.
    const int padding_score = scoring.matrix[gpu::kMatrixDim * gpu::kMatrixDim - 1];
    std::vector<short> profile(static_cast<std::size_t>(gpu::kMatrixDim) * m_pad,
                               static_cast<short>(padding_score));
    for (int letter = 0; letter < kAlphabetSize; ++letter)
      for (int i = 0; i < m; ++i)
        profile[static_cast<std::size_t>(letter) * m_pad + i] =
            static_cast<short>(scoring.matrix[query[i] * gpu::kMatrixDim + letter]);
    std::vector<unsigned char> query_codes(query, query + m);
    inter_stream.synchronize();  // the previous query's inter kernel is done with the profile
    intra_stream.synchronize();
    s.profile.upload(profile, inter_stream);
    s.query.upload(query_codes, intra_stream);
    inter_stream.synchronize();
    intra_stream.synchronize();
    const double compute_started = now_seconds();
    if (warps > 0) {
      launch_inter_any(t, s, warps, m_pad, scoring, inter_stream);
      s.pair_best.copy_to_host(pair_best.data(), pair_best.size(), inter_stream);
    }
    if (long_jobs.size() > 0) {
      upload_jobs(s, long_jobs, intra_stream);
      launch_intra(t, s, static_cast<int>(long_jobs.size()), m, scoring, intra_stream);
      job_best.resize(long_jobs.size());
      s.job_best.copy_to_host(job_best.data(), job_best.size(), intra_stream);
    }
    inter_stream.synchronize();
    IntraJobs rescue;
    for (std::size_t i = 0; i < n_short; ++i) {
      const unsigned packed = pair_best[i / 2];
      const int value = static_cast<short>(i % 2 == 0 ? (packed & 0xffffu) : (packed >> 16));
      scores[q][i] = value;
      if (value >= threshold) rescue.add(batch, i);
    }
    intra_stream.synchronize();
    for (std::size_t k = 0; k < long_jobs.size(); ++k) scores[q][long_jobs.subject[k]] = job_best[k];
    if (rescue.size() > 0) {  // 16-bit saturation: exact 32-bit rescoring of those pairs
      upload_jobs(s, rescue, intra_stream);
      launch_intra(t, s, static_cast<int>(rescue.size()), m, scoring, intra_stream);
      job_best.resize(rescue.size());
      s.job_best.copy_to_host(job_best.data(), job_best.size(), intra_stream);
      intra_stream.synchronize();
      for (std::size_t k = 0; k < rescue.size(); ++k) scores[q][rescue.subject[k]] = job_best[k];
      counters.rescored += rescue.size();
    }
    counters.device_seconds += now_seconds() - compute_started;
  }
}

template <int R, int MinBlocks>
void launch_inter_qp(DeviceScratch& s, int warps, int m_pad, const Scoring& scoring, cudaStream_t stream) {
  const int blocks = (warps + 3) / 4;  // 128 threads
  gpu::inter_task_kernel_qp<R, MinBlocks><<<blocks, 128, 0, stream>>>(
      s.subjects_qp.data(), s.warp_base.data(), s.warp_quads.data(), s.boundary.data(), warps,
      s.profile_qp.data(), m_pad, scoring.gap_open, scoring.gap_extend, s.pair_best.data());
  MOLACCEL_CUDA_CHECK_LAUNCH("align inter_task_kernel_qp");
}

void launch_inter_qp_any(const Tuning& t, DeviceScratch& s, int warps, int m_pad, const Scoring& scoring,
                         cudaStream_t stream) {
  if (t.strip_rows == 64) return launch_inter_qp<64, 2>(s, warps, m_pad, scoring, stream);
  if (t.strip_rows == 48 && t.min_blocks == 3) return launch_inter_qp<48, 3>(s, warps, m_pad, scoring, stream);
  if (t.strip_rows == 48) return launch_inter_qp<48, 2>(s, warps, m_pad, scoring, stream);
  if (t.strip_rows == 32 && t.min_blocks == 4) return launch_inter_qp<32, 4>(s, warps, m_pad, scoring, stream);
  if (t.strip_rows == 32) return launch_inter_qp<32, 3>(s, warps, m_pad, scoring, stream);
  return launch_inter_qp<16, 4>(s, warps, m_pad, scoring, stream);
}

// Query-pair variant: one subject per thread, queries paired by length in the two 16-bit halves.
void score_tile_once_qp(const Tuning& t, DeviceScratch& s, const QueryView* queries, std::size_t query_count,
                        const SubjectBatch& batch, const Scoring& scoring, int* const* scores,
                        TileResult& counters) {
  std::size_t n_short = 0;
  while (n_short < batch.count && batch.offsets[n_short + 1] - batch.offsets[n_short] <= t.long_threshold)
    ++n_short;
  const int warps = static_cast<int>((n_short + gpu::kWarp - 1) / gpu::kWarp);
  std::vector<unsigned long long> warp_base(warps);
  std::vector<unsigned> warp_quads(warps);
  unsigned long long total = 0;
  for (int w = 0; w < warps; ++w) {
    const std::size_t last = std::min(n_short, static_cast<std::size_t>(w + 1) * gpu::kWarp) - 1;
    warp_base[w] = total;
    warp_quads[w] = static_cast<unsigned>((batch.length(last) + 3) / 4);
    total += static_cast<unsigned long long>(warp_quads[w]) * gpu::kWarp;
  }
  std::vector<unsigned> layout(total);
  for (int w = 0; w < warps; ++w)
    for (int lane = 0; lane < gpu::kWarp; ++lane) {
      const std::size_t a = static_cast<std::size_t>(w) * gpu::kWarp + lane;
      const std::uint8_t* sa = a < n_short ? batch.subject(a) : nullptr;
      const std::size_t la = a < n_short ? batch.length(a) : 0;
      for (unsigned c = 0; c < warp_quads[w]; ++c) {
        unsigned x = 0;
        for (int k = 0; k < 4; ++k) {
          const std::size_t j = c * 4 + k;
          x |= static_cast<unsigned>(j < la ? sa[j] : kPaddingCode) << (8 * k);
        }
        layout[warp_base[w] + static_cast<std::size_t>(c) * gpu::kWarp + lane] = x;
      }
    }
  Stream inter_stream, intra_stream;
  s.subjects_qp.upload(layout, inter_stream);
  s.warp_base.upload(warp_base, inter_stream);
  s.warp_quads.upload(warp_quads, inter_stream);
  s.boundary.resize(std::max<unsigned long long>(1, total * 4));
  s.pair_best.resize(std::max<std::size_t>(1, static_cast<std::size_t>(warps) * gpu::kWarp));
  s.residues.resize(std::max<std::uint64_t>(1, batch.residue_count()));
  s.residues.copy_from_host(batch.residues + batch.offsets[0], batch.residue_count(), intra_stream);
  std::vector<int> matrix(scoring.matrix, scoring.matrix + gpu::kMatrixDim * gpu::kMatrixDim);
  s.matrix.upload(matrix, intra_stream);
  inter_stream.synchronize();
  intra_stream.synchronize();

  IntraJobs long_jobs;
  for (std::size_t i = n_short; i < batch.count; ++i) long_jobs.add(batch, i);
  const int threshold = scoring.saturation_threshold;
  std::vector<unsigned> pair_best(static_cast<std::size_t>(warps) * gpu::kWarp);
  // Exact 32-bit scores of `jobs` against query q on the intra stream (blocking).
  const auto run_intra = [&](std::size_t q, const IntraJobs& jobs) {
    std::vector<int> best(jobs.size());
    if (jobs.size() == 0) return best;
    const int m = static_cast<int>(queries[q].length);
    std::vector<unsigned char> query_codes(queries[q].codes, queries[q].codes + m);
    s.query.upload(query_codes, intra_stream);
    upload_jobs(s, jobs, intra_stream);
    launch_intra(t, s, static_cast<int>(jobs.size()), m, scoring, intra_stream);
    s.job_best.copy_to_host(best.data(), best.size(), intra_stream);
    intra_stream.synchronize();
    return best;
  };
  // Queries paired by length (a lone last query pairs with nothing: its high half is padding).
  std::vector<std::size_t> order(query_count);
  for (std::size_t q = 0; q < query_count; ++q) order[q] = q;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return queries[a].length < queries[b].length; });
  const int padding_score = scoring.matrix[gpu::kMatrixDim * gpu::kMatrixDim - 1];
  const unsigned padding_half = static_cast<unsigned>(padding_score) & 0xffffu;
  for (std::size_t p = 0; p < query_count; p += 2) {
    const std::size_t qa = order[p];
    const bool has_b = p + 1 < query_count;
    const std::size_t qb = has_b ? order[p + 1] : qa;
    const std::size_t m_max = std::max(queries[qa].length, has_b ? queries[qb].length : 0);
    const int m_pad = static_cast<int>((m_max + t.strip_rows - 1) / t.strip_rows * t.strip_rows);
    std::vector<unsigned> profile(static_cast<std::size_t>(gpu::kMatrixDim) * m_pad,
                                  padding_half | (padding_half << 16));
    for (int half = 0; half < (has_b ? 2 : 1); ++half) {
      const QueryView& query = queries[half == 0 ? qa : qb];
      for (int letter = 0; letter < kAlphabetSize; ++letter)
        for (std::size_t i = 0; i < query.length; ++i) {
          unsigned& word = profile[static_cast<std::size_t>(letter) * m_pad + i];
          const unsigned value =
              static_cast<unsigned>(scoring.matrix[query.codes[i] * gpu::kMatrixDim + letter]) & 0xffffu;
          word = half == 0 ? ((word & 0xffff0000u) | value) : ((word & 0xffffu) | (value << 16));
        }
    }
    s.profile_qp.upload(profile, inter_stream);
    inter_stream.synchronize();
    const double compute_started = now_seconds();
    if (warps > 0) {
      launch_inter_qp_any(t, s, warps, m_pad, scoring, inter_stream);
      s.pair_best.copy_to_host(pair_best.data(), pair_best.size(), inter_stream);
    }
    for (int half = 0; half < (has_b ? 2 : 1); ++half) {  // long subjects, overlapping the inter kernel
      const std::size_t q = half == 0 ? qa : qb;
      const auto best = run_intra(q, long_jobs);
      for (std::size_t k = 0; k < long_jobs.size(); ++k) scores[q][long_jobs.subject[k]] = best[k];
    }
    inter_stream.synchronize();
    for (int half = 0; half < (has_b ? 2 : 1); ++half) {
      const std::size_t q = half == 0 ? qa : qb;
      IntraJobs rescue;
      for (std::size_t i = 0; i < n_short; ++i) {
        const unsigned packed = pair_best[i];
        const int value = static_cast<short>(half == 0 ? (packed & 0xffffu) : (packed >> 16));
        scores[q][i] = value;
        if (value >= threshold) rescue.add(batch, i);
      }
      if (rescue.size() > 0) {  // 16-bit saturation: exact 32-bit rescoring of those pairs
        const auto best = run_intra(q, rescue);
        for (std::size_t k = 0; k < rescue.size(); ++k) scores[q][rescue.subject[k]] = best[k];
        counters.rescored += rescue.size();
      }
    }
    counters.device_seconds += now_seconds() - compute_started;
  }
}

void score_tile_shrinking(const Tuning& t, DeviceScratch& s, const QueryView* queries,
                          std::size_t query_count, const SubjectBatch& batch, const Scoring& scoring,
                          int* const* scores, TileResult& counters) {
  try {
    if (t.query_pairs)
      score_tile_once_qp(t, s, queries, query_count, batch, scoring, scores, counters);
    else
      score_tile_once(t, s, queries, query_count, batch, scoring, scores, counters);
  } catch (const CudaError& e) {
    if (!e.is_out_of_memory() || batch.count < 2) throw;
    // Out of memory: free what we hold, clear the sticky-free error, and do the tile in halves.
    cudaGetLastError();
    s.release();
    const std::size_t half = batch.count / 2;
    log_warn("align: GPU out of memory on a tile of {} subjects; retrying in halves", batch.count);
    SubjectBatch first{batch.residues, batch.offsets, half};
    SubjectBatch second{batch.residues, batch.offsets + half, batch.count - half};
    std::vector<int*> second_scores(query_count);
    for (std::size_t q = 0; q < query_count; ++q) second_scores[q] = scores[q] + half;
    score_tile_shrinking(t, s, queries, query_count, first, scoring, scores, counters);
    score_tile_shrinking(t, s, queries, query_count, second, scoring, second_scores.data(), counters);
  }
}

}  // namespace

void score_tile(WorkerContext& ctx, const TileRequest& request, TileResult& result) {
  const int device = ctx.worker().device;
  DeviceGuard guard(device);
  const Tuning tuning = tuning_for(device);
  result.kernel = tuning.name;
  if (request.count == 0 || request.query_count == 0) return;
  auto& scratch = ctx.local<DeviceScratch>();
  const SubjectBatch batch{request.residues, request.offsets, request.count};
  const Scoring scoring{request.matrix, request.gap_open, request.gap_extend, request.saturation_threshold};
  score_tile_shrinking(tuning, scratch, request.queries, request.query_count, batch, scoring, request.scores,
                       result);
}

}  // namespace molaccel::align::gpu_entry

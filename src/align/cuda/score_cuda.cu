// CUDA backend, top two layers: the public entry (score_batch: one database tile, all queries)
// and the dispatch that picks a tuning for the device. The tile is split by length: subjects up to
// `long_threshold` go to the inter-task kernel (packed 16-bit, DPX), longer ones to the intra-task
// kernel (one warp per subject, 32-bit), on a second stream so both overlap.
// Default (score_tile_pipelined): one subject and two queries per thread; the short subjects are cut
// into chunks, longest first; each chunk is laid out on host threads into pinned staging while
// earlier chunks compute, uploaded on its own stream and scored for every query pair in ONE launch
// (work items ordered by cost); up to kChunkSets chunks are in flight, so a chunk's tail overlaps the
// next chunk's start, and the host waits only when it needs a buffer set back or the scores.
// Older paths (MOLACCEL_ALIGN_INTER=qp1: one launch per query pair, score_tile_once_qp; pf|base: two
// subjects and one query per thread, score_tile_once) are kept for comparison.
// Pairs whose 16-bit maximum reaches the saturation threshold are rescored by the intra kernel.
// Out of device memory: the tile is halved and retried.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
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
using molaccel::cuda::Event;
using molaccel::cuda::PinnedBuffer;
using molaccel::cuda::Stream;

struct Tuning {
  // R of the inter-task kernel. Default: the query-pair kernel in the chunk pipeline (qp) with
  // R = 32 and 3 blocks per SM, measured fastest on an H100 (docs/align.md): 4.69 TCUPS compute vs
  // 4.56 for R = 40 / 3 blocks, 4.49 for R = 48 / 2 and 4.45 for R = 64 / 2 (one repeat each).
  int strip_rows = 32;
  int threads = 128;  // per block, both kernels
  // Subjects longer than this go to the intra-task kernel (MOLACCEL_ALIGN_LONG_THRESHOLD). With the
  // windowed, one-launch intra-task path, 4 x H200 side by side (docs/align.md): 3000 -> 1.363 /
  // 0.411 s on 1 / 4 GPUs, 2048 -> 1.478 / 0.431 s, 1024 -> 1.858 / 0.479 s. Higher thresholds
  // lengthen the inter-task kernel's longest item (one thread: query length x subject length).
  unsigned long_threshold = 3000;
  // Inter-task variant (MOLACCEL_ALIGN_INTER): qp = inter_task_kernel_qp (default: one subject and
  // two queries per thread), pf = inter_task_kernel_pf (two subjects and one query per thread),
  // base = inter_task_kernel (the first kernel); qp and pf prefetch one quad ahead and run at least
  // `min_blocks` blocks of 128 threads per SM.
  bool prefetch = true;
  bool query_pairs = true;
  bool merged = true;  // qp: every query pair of a chunk in one launch (score_tile_pipelined)
  std::uint64_t chunk_residues = 0;  // residues per pipeline chunk; 0 = automatic
  int min_blocks = 0;  // 0 = the measured best for R: 4 at R = 16, 3 at 32 and 40, 2 at 48 and 64
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
    if (r == 16 || r == 32 || r == 40 || r == 48 || r == 64) t.strip_rows = r;
  }
  if (const char* s = std::getenv("MOLACCEL_ALIGN_INTER")) {
    const std::string v = s;
    t.prefetch = v != "base";
    t.query_pairs = v == "qp" || v == "qp1";
    t.merged = v == "qp";
  }
  if (const char* s = std::getenv("MOLACCEL_ALIGN_CHUNK_RESIDUES"))
    t.chunk_residues = std::strtoull(s, nullptr, 10);
  if (const char* s = std::getenv("MOLACCEL_ALIGN_MIN_BLOCKS")) t.min_blocks = std::atoi(s);
  if (t.min_blocks <= 0) t.min_blocks = t.strip_rows <= 16 ? 4 : t.strip_rows <= 40 ? 3 : 2;
  if (t.strip_rows == 40 && !t.query_pairs) t.strip_rows = 48;  // R = 40 exists for qp only
  if (t.prefetch) {
    // Instantiated pairs (R, min blocks); others fall back to the nearest one below.
    if (t.strip_rows == 64 || t.strip_rows == 48 || t.strip_rows == 40)
      t.min_blocks = t.min_blocks >= 3 ? 3 : 2;
    else if (t.strip_rows == 32)
      t.min_blocks = t.min_blocks >= 4 ? 4 : 3;
    else
      t.min_blocks = 4;
    t.name = dpx ? "cuda/inter16x2-dpx-pf+intra32" : "cuda/inter16x2-pf+intra32";
    if (t.query_pairs && t.merged)
      t.name = dpx ? "cuda/inter16x2q-dpx-qp+intra32" : "cuda/inter16x2q-qp+intra32";
    else if (t.query_pairs)
      t.name = dpx ? "cuda/inter16x2q-dpx-qp1+intra32" : "cuda/inter16x2q-qp1+intra32";
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

// Rows per lane of the intra-task kernel (32 x 8 = 256 query rows per pass).
constexpr int kIntraRowsPerLane = 8;

void launch_intra(const Tuning& t, DeviceScratch& s, int jobs, int m, const Scoring& scoring,
                  cudaStream_t stream) {
  const int warps_per_block = t.threads / gpu::kWarp;
  const int blocks = (jobs + warps_per_block - 1) / warps_per_block;
  gpu::intra_task_kernel<kIntraRowsPerLane><<<blocks, t.threads, 0, stream>>>(
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
  if (t.strip_rows == 40 && t.min_blocks == 3) return launch_inter_qp<40, 3>(s, warps, m_pad, scoring, stream);
  if (t.strip_rows == 40) return launch_inter_qp<40, 2>(s, warps, m_pad, scoring, stream);
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

// ---------------------------------------------------------------------------------------------
// The default pipeline (qp, merged launches).
// ---------------------------------------------------------------------------------------------
// Tile subjects, ascending in length: sorted positions through `index`, or [0, count) without it.
struct TileSubjects {
  const std::uint8_t* residues = nullptr;
  const std::uint64_t* offsets = nullptr;
  const std::uint32_t* index = nullptr;
  std::size_t count = 0;
  std::size_t id(std::size_t i) const { return index ? index[i] : i; }
  std::size_t length(std::size_t i) const {
    const std::size_t k = id(i);
    return static_cast<std::size_t>(offsets[k + 1] - offsets[k]);
  }
  const std::uint8_t* subject(std::size_t i) const { return residues + offsets[id(i)]; }
};

// Buffers of one chunk in flight.
struct ChunkSet {
  Stream stream;
  Event done{false};
  PinnedBuffer<unsigned> layout;
  PinnedBuffer<unsigned long long> warp_base;
  PinnedBuffer<unsigned> warp_quads;
  PinnedBuffer<uint2> items;
  PinnedBuffer<unsigned> best;
  DeviceBuffer<unsigned> d_layout;
  DeviceBuffer<unsigned long long> d_warp_base;
  DeviceBuffer<unsigned> d_warp_quads;
  DeviceBuffer<uint2> d_items, d_boundary;
  DeviceBuffer<unsigned> d_best;
  std::size_t first = 0, count = 0;  // tile positions [first, first + count)
  int warps = 0;
};

// Per worker (ctx.local), kept across the tiles of a job.
struct PipelineScratch {
  std::vector<std::unique_ptr<ChunkSet>> sets;
  std::unique_ptr<Stream> setup, intra;
  std::unique_ptr<Event> long_done;
  DeviceBuffer<unsigned> profiles;
  DeviceBuffer<unsigned long long> pair_profile;
  DeviceBuffer<int> pair_m_pad;
  DeviceBuffer<unsigned char> queries;
  DeviceBuffer<int> matrix;
  PinnedBuffer<unsigned char> long_residues;
  DeviceBuffer<unsigned char> d_long_residues;
  DeviceBuffer<unsigned long long> long_offset, long_scratch;
  DeviceBuffer<unsigned> long_length;
  DeviceBuffer<int2> long_rows;
  DeviceBuffer<uint2> long_jobs;  // (long subject, query), most expensive first
  DeviceBuffer<unsigned long long> query_offset;
  DeviceBuffer<unsigned> query_length;
  DeviceBuffer<int> long_best;
  PinnedBuffer<int> long_best_host;
  DeviceBuffer<unsigned char> rescue_residues;
  DeviceBuffer<unsigned long long> rescue_offset, rescue_scratch;
  DeviceBuffer<unsigned> rescue_length;
  DeviceBuffer<int2> rescue_rows;
  DeviceBuffer<int> rescue_best;
  void release() { *this = PipelineScratch{}; }
};

constexpr int kChunkSets = 3;

// The pipeline's buffers outlive a job, per device (DevicePool): allocating and freeing pinned
// and device memory costs tens of milliseconds per GPU and search, serialised across GPUs.
using PipelineLease = molaccel::cuda::DeviceLease<PipelineScratch>;

void launch_intra_raw(int threads, const unsigned char* residues, const unsigned long long* offset,
                      const unsigned* length, const unsigned long long* scratch_offset, int2* rows, int jobs,
                      const unsigned char* query, int m, const int* matrix, const Scoring& scoring, int* best,
                      cudaStream_t stream) {
  const int warps_per_block = threads / gpu::kWarp;
  const int blocks = (jobs + warps_per_block - 1) / warps_per_block;
  gpu::intra_task_kernel<kIntraRowsPerLane><<<blocks, threads, 0, stream>>>(
      residues, offset, length, scratch_offset, rows, jobs, query, m, matrix, scoring.gap_open,
      scoring.gap_extend, best);
  MOLACCEL_CUDA_CHECK_LAUNCH("align intra_task_kernel");
}

// Jobs [first, first + count) of ps.long_jobs (long subject, query), one launch on `stream`.
void launch_intra_jobs(int threads, PipelineScratch& ps, std::size_t first, std::size_t count, std::size_t n_long,
                       const Scoring& scoring, cudaStream_t stream) {
  const int warps_per_block = threads / gpu::kWarp;
  const int blocks = static_cast<int>((count + warps_per_block - 1) / warps_per_block);
  gpu::intra_task_kernel_jobs<kIntraRowsPerLane><<<blocks, threads, 0, stream>>>(
      ps.d_long_residues.data(), ps.long_offset.data(), ps.long_length.data(), ps.long_jobs.data() + first,
      ps.long_scratch.data() + first, ps.long_rows.data(), static_cast<int>(count), ps.queries.data(),
      ps.query_offset.data(), ps.query_length.data(), ps.matrix.data(), scoring.gap_open, scoring.gap_extend,
      ps.long_best.data(), n_long);
  MOLACCEL_CUDA_CHECK_LAUNCH("align intra_task_kernel_jobs");
}

struct QpmArgs {
  const ChunkSet* set;
  unsigned long long boundary_stride, best_stride;
  int items;
  const unsigned* profiles;
  const unsigned long long* pair_profile;
  const int* pair_m_pad;
};

template <int R, int MinBlocks>
void launch_inter_qpm(const QpmArgs& a, const Scoring& scoring) {
  ChunkSet& c = const_cast<ChunkSet&>(*a.set);
  gpu::inter_task_kernel_qpm<R, MinBlocks><<<a.items, 128, 0, c.stream>>>(
      c.d_layout.data(), c.d_warp_base.data(), c.d_warp_quads.data(), c.d_boundary.data(), a.boundary_stride,
      c.warps, c.d_items.data(), a.profiles, a.pair_profile, a.pair_m_pad, scoring.gap_open, scoring.gap_extend,
      c.d_best.data(), a.best_stride);
  MOLACCEL_CUDA_CHECK_LAUNCH("align inter_task_kernel_qpm");
}

void launch_inter_qpm_any(const Tuning& t, const QpmArgs& a, const Scoring& scoring) {
  if (t.strip_rows == 64) return launch_inter_qpm<64, 2>(a, scoring);
  if (t.strip_rows == 40 && t.min_blocks == 3) return launch_inter_qpm<40, 3>(a, scoring);
  if (t.strip_rows == 40) return launch_inter_qpm<40, 2>(a, scoring);
  if (t.strip_rows == 48 && t.min_blocks == 3) return launch_inter_qpm<48, 3>(a, scoring);
  if (t.strip_rows == 48) return launch_inter_qpm<48, 2>(a, scoring);
  if (t.strip_rows == 32 && t.min_blocks == 4) return launch_inter_qpm<32, 4>(a, scoring);
  if (t.strip_rows == 32) return launch_inter_qpm<32, 3>(a, scoring);
  return launch_inter_qpm<16, 4>(a, scoring);
}

// Exact 32-bit scores of tile subjects `positions` against one query (device pointer), blocking,
// on ps.intra. Used for pairs whose 16-bit maximum reached the saturation threshold.
std::vector<int> rescore_exact(const Tuning& t, PipelineScratch& ps, const TileSubjects& tile,
                               const std::vector<std::size_t>& positions, const unsigned char* query, int m,
                               const Scoring& scoring) {
  std::vector<unsigned char> residues;
  std::vector<unsigned long long> offset, scratch;
  std::vector<unsigned> length;
  for (std::size_t i : positions) {
    offset.push_back(residues.size());
    scratch.push_back(residues.size());
    length.push_back(static_cast<unsigned>(tile.length(i)));
    residues.insert(residues.end(), tile.subject(i), tile.subject(i) + tile.length(i));
  }
  cudaStream_t stream = *ps.intra;
  ps.rescue_residues.upload(residues, stream);
  ps.rescue_offset.upload(offset, stream);
  ps.rescue_scratch.upload(scratch, stream);
  ps.rescue_length.upload(length, stream);
  ps.rescue_rows.resize(std::max<std::size_t>(1, residues.size()));
  ps.rescue_best.resize(positions.size());
  launch_intra_raw(t.threads, ps.rescue_residues.data(), ps.rescue_offset.data(), ps.rescue_length.data(),
                   ps.rescue_scratch.data(), ps.rescue_rows.data(), static_cast<int>(positions.size()), query, m,
                   ps.matrix.data(), scoring, ps.rescue_best.data(), stream);
  return ps.rescue_best.download(stream);
}

void score_tile_pipelined(const Tuning& t, PipelineScratch& ps, const QueryView* queries, std::size_t query_count,
                          const TileSubjects& tile, const Scoring& scoring, int* const* scores, int layout_threads,
                          TileResult& counters) {
  const double entered = now_seconds();
  const int R = t.strip_rows;
  const int threads = std::max(1, layout_threads);
  if (!ps.setup) ps.setup = std::make_unique<Stream>();
  if (!ps.intra) ps.intra = std::make_unique<Stream>();
  if (!ps.long_done) ps.long_done = std::make_unique<Event>(false);
  while (ps.sets.size() < kChunkSets) ps.sets.push_back(std::make_unique<ChunkSet>());

  // Short subjects are a prefix of the length-sorted tile.
  std::size_t n_short = 0;
  {
    std::size_t lo = 0, hi = tile.count;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (tile.length(mid) <= t.long_threshold) lo = mid + 1; else hi = mid;
    }
    n_short = lo;
  }
  const std::size_t n_long = tile.count - n_short;

  // Queries paired by length (a lone last query pairs with nothing: its high half is padding); the
  // packed profiles of all pairs in one array.
  std::vector<std::size_t> order(query_count);
  for (std::size_t q = 0; q < query_count; ++q) order[q] = q;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return queries[a].length < queries[b].length; });
  const std::size_t pairs = (query_count + 1) / 2;
  std::vector<unsigned long long> pair_profile(pairs);
  std::vector<int> pair_m_pad(pairs);
  std::vector<std::size_t> pair_a(pairs), pair_b(pairs);  // pair_b == query_count: none
  unsigned long long profile_words = 0;
  bool multi_strip = false;
  for (std::size_t p = 0; p < pairs; ++p) {
    pair_a[p] = order[2 * p];
    pair_b[p] = 2 * p + 1 < query_count ? order[2 * p + 1] : query_count;
    const std::size_t m_max = std::max(queries[pair_a[p]].length,
                                       pair_b[p] < query_count ? queries[pair_b[p]].length : 0);
    pair_m_pad[p] = static_cast<int>((m_max + R - 1) / R * R);
    multi_strip |= pair_m_pad[p] > R;
    pair_profile[p] = profile_words;
    profile_words += static_cast<unsigned long long>(gpu::kMatrixDim) * pair_m_pad[p];
  }
  const int padding_score = scoring.matrix[gpu::kMatrixDim * gpu::kMatrixDim - 1];
  const unsigned padding_half = static_cast<unsigned>(padding_score) & 0xffffu;
  std::vector<unsigned> profiles(profile_words, padding_half | (padding_half << 16));
  parallel_for(pairs, threads, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p)
      for (int half = 0; half < (pair_b[p] < query_count ? 2 : 1); ++half) {
        const QueryView& query = queries[half == 0 ? pair_a[p] : pair_b[p]];
        for (int letter = 0; letter < kAlphabetSize; ++letter)
          for (std::size_t i = 0; i < query.length; ++i) {
            unsigned& word = profiles[pair_profile[p] + static_cast<std::size_t>(letter) * pair_m_pad[p] + i];
            const unsigned value =
                static_cast<unsigned>(scoring.matrix[query.codes[i] * gpu::kMatrixDim + letter]) & 0xffffu;
            word = half == 0 ? ((word & 0xffff0000u) | value) : ((word & 0xffffu) | (value << 16));
          }
      }
  });
  std::vector<unsigned char> query_codes;
  std::vector<std::size_t> query_offset(query_count);
  for (std::size_t q = 0; q < query_count; ++q) {
    query_offset[q] = query_codes.size();
    query_codes.insert(query_codes.end(), queries[q].codes, queries[q].codes + queries[q].length);
  }
  ps.profiles.upload(profiles, *ps.setup);
  ps.pair_profile.upload(pair_profile, *ps.setup);
  ps.pair_m_pad.upload(pair_m_pad, *ps.setup);
  ps.queries.upload(query_codes, *ps.setup);
  std::vector<int> matrix(scoring.matrix, scoring.matrix + gpu::kMatrixDim * gpu::kMatrixDim);
  ps.matrix.upload(matrix, *ps.setup);

  // Chunks of the short subjects: boundaries at multiples of 32 subjects (whole warps), about
  // `chunk` residues each; done longest first.
  std::uint64_t short_residues = 0;
  for (std::size_t i = 0; i < n_short; ++i) short_residues += tile.length(i);
  // Automatic size: as large as the buffers allow (16 M residues), but at least 3 chunks so that
  // laying out and uploading the later ones overlaps the first ones' compute. Each chunk costs a
  // few ms of pipeline overhead and its own critical path (its longest item), so a device's
  // smaller share on several GPUs must not be cut into more, smaller chunks: a quarter of the
  // 486k database on one H100 took 400 ms in 12 chunks, 360 ms in 6 and 344 ms in 3 (1/4 of the
  // whole database's 1,359 ms is 340 ms); the whole database 1,359 ms in 11 or 12 chunks alike.
  std::uint64_t chunk = t.chunk_residues > 0 ? t.chunk_residues
                                             : std::clamp<std::uint64_t>(short_residues / 3 + 1, std::uint64_t{1} << 20,
                                                                         std::uint64_t{16} << 20);
  if (multi_strip) {
    // Boundary rows take ~9 bytes per residue and query pair per set in flight: keep each set
    // within min(2 GB, free memory / (2 x sets)).
    std::size_t free_bytes = 0, total_bytes = 0;
    MOLACCEL_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::uint64_t budget =
        std::min<std::uint64_t>(std::uint64_t{2} << 30, free_bytes / (2 * kChunkSets));
    chunk = std::min<std::uint64_t>(chunk, std::max<std::uint64_t>(std::uint64_t{1} << 14, budget / (9 * pairs)));
  }
  std::vector<std::size_t> bounds{0};
  {
    std::uint64_t acc = 0;
    for (std::size_t i = 0; i < n_short; ++i) {
      acc += tile.length(i);
      if (acc >= chunk && (i + 1) % gpu::kWarp == 0 && i + 1 < n_short) {
        bounds.push_back(i + 1);
        acc = 0;
      }
    }
    if (n_short > 0) bounds.push_back(n_short);
  }
  const std::size_t chunks = bounds.size() - 1;
  // Plan every chunk's sizes first, so the sets are allocated once (a cudaFree in the loop would
  // synchronise the device and stall the pipeline).
  std::size_t max_words = 1, max_warps = 1;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t count = bounds[c + 1] - bounds[c];
    const std::size_t warps = (count + gpu::kWarp - 1) / gpu::kWarp;
    std::size_t words = 0;
    for (std::size_t w = 0; w < warps; ++w)
      words += (tile.length(bounds[c] + std::min(count, (w + 1) * gpu::kWarp) - 1) + 3) / 4 * gpu::kWarp;
    max_words = std::max(max_words, words);
    max_warps = std::max(max_warps, warps);
  }
  const std::size_t max_blocks = (max_warps + 3) / 4;
  for (auto& set : ps.sets) {
    ChunkSet& c = *set;
    c.layout.resize(max_words);
    c.warp_base.resize(max_warps);
    c.warp_quads.resize(max_warps);
    c.items.resize(max_blocks * pairs);
    c.best.resize(max_warps * gpu::kWarp * pairs);
    c.d_layout.resize(max_words);
    c.d_warp_base.resize(max_warps);
    c.d_warp_quads.resize(max_warps);
    c.d_items.resize(max_blocks * pairs);
    c.d_boundary.resize(multi_strip ? max_words * 4 * pairs : 1);
    c.d_best.resize(max_warps * gpu::kWarp * pairs);
  }

  // Long subjects: gathered once, every query on the intra stream, overlapping the chunks.
  std::vector<unsigned long long> long_offset(n_long);
  std::vector<unsigned> long_length(n_long);
  unsigned long long long_total = 0;
  for (std::size_t k = 0; k < n_long; ++k) {
    long_offset[k] = long_total;
    long_length[k] = static_cast<unsigned>(tile.length(n_short + k));
    long_total += long_length[k];
  }
  ps.setup->synchronize();  // profiles, queries and matrix are on the device
  const double first_launch = now_seconds();
  if (n_long > 0) {
    ps.long_residues.resize(long_total);
    parallel_for(n_long, threads, 16, [&](std::size_t b, std::size_t e) {
      for (std::size_t k = b; k < e; ++k)
        std::copy_n(tile.subject(n_short + k), long_length[k], ps.long_residues.data() + long_offset[k]);
    });
    cudaStream_t stream = *ps.intra;
    ps.d_long_residues.resize(long_total);
    ps.d_long_residues.copy_from_host(ps.long_residues.data(), long_total, stream);
    ps.long_offset.upload(long_offset, stream);
    ps.long_length.upload(long_length, stream);
    ps.long_best.resize(n_long * query_count);
    ps.long_best_host.resize(n_long * query_count);
    std::vector<unsigned long long> query_start(query_offset.begin(), query_offset.end());
    std::vector<unsigned> query_length(query_count);
    for (std::size_t q = 0; q < query_count; ++q) query_length[q] = static_cast<unsigned>(queries[q].length);
    ps.query_offset.upload(query_start, stream);
    ps.query_length.upload(query_length, stream);
    // Every (long subject, query) job in one launch, most expensive first (cost: passes x steps).
    // Jobs of more than one pass need n (H, F) pairs of boundary scratch each; launches (waves)
    // are cut so that a wave's scratch stays within `budget` pairs, reused wave after wave.
    constexpr int kIntraRows = gpu::kWarp * kIntraRowsPerLane;
    std::vector<std::pair<unsigned long long, uint2>> jobs;
    jobs.reserve(n_long * query_count);
    for (std::size_t q = 0; q < query_count; ++q)
      for (std::size_t k = 0; k < n_long; ++k) {
        const unsigned long long passes = (queries[q].length + kIntraRows - 1) / kIntraRows;
        jobs.push_back({passes * (long_length[k] + gpu::kWarp), make_uint2(static_cast<unsigned>(k), static_cast<unsigned>(q))});
      }
    std::stable_sort(jobs.begin(), jobs.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::size_t free_bytes = 0, total_bytes = 0;
    MOLACCEL_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    const unsigned long long budget = std::max<unsigned long long>(
        long_total, std::min<unsigned long long>(std::uint64_t{1} << 27, free_bytes / 8 / sizeof(int2)));
    std::vector<uint2> job_pairs(jobs.size());
    std::vector<unsigned long long> job_scratch(jobs.size());
    std::vector<std::size_t> waves{0};
    unsigned long long used = 0;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      job_pairs[j] = jobs[j].second;
      const bool multi_pass = queries[jobs[j].second.y].length > static_cast<std::size_t>(kIntraRows);
      const unsigned long long need = multi_pass ? long_length[jobs[j].second.x] : 0;
      if (used + need > budget) {
        waves.push_back(j);
        used = 0;
      }
      job_scratch[j] = used;
      used += need;
    }
    waves.push_back(jobs.size());
    ps.long_jobs.upload(job_pairs, stream);
    ps.long_scratch.upload(job_scratch, stream);
    ps.long_rows.resize(std::max<unsigned long long>(1, budget));
    for (std::size_t w = 0; w + 1 < waves.size(); ++w)
      if (waves[w + 1] > waves[w])
        launch_intra_jobs(t.threads, ps, waves[w], waves[w + 1] - waves[w], n_long, scoring, stream);
    ps.long_best.copy_to_host(ps.long_best_host.data(), n_long * query_count, stream);
    ps.long_done->record(stream);
  }

  const int threshold = scoring.saturation_threshold;
  std::vector<std::vector<std::size_t>> rescue(query_count);
  const auto finish = [&](ChunkSet& c) {
    c.done.synchronize();
    const std::size_t stride = static_cast<std::size_t>(c.warps) * gpu::kWarp;
    for (std::size_t p = 0; p < pairs; ++p)
      for (int half = 0; half < (pair_b[p] < query_count ? 2 : 1); ++half) {
        const std::size_t q = half == 0 ? pair_a[p] : pair_b[p];
        const unsigned* best = c.best.data() + p * stride;
        int* out = scores[q];
        for (std::size_t i = 0; i < c.count; ++i) {
          const int value = static_cast<short>(half == 0 ? (best[i] & 0xffffu) : (best[i] >> 16));
          out[tile.id(c.first + i)] = value;
          if (value >= threshold) rescue[q].push_back(c.first + i);
        }
      }
  };
  std::vector<ChunkSet*> in_flight;  // FIFO of submitted chunks
  std::size_t submitted = 0;
  for (std::size_t ci = chunks; ci-- > 0;) {
    ChunkSet& c = *ps.sets[submitted % kChunkSets];
    if (in_flight.size() == kChunkSets) {
      finish(*in_flight.front());
      in_flight.erase(in_flight.begin());
    }
    // Layout: per warp w, quad j, lane l: the 4 residues of chunk subject 32w+l in one word.
    c.first = bounds[ci];
    c.count = bounds[ci + 1] - bounds[ci];
    c.warps = static_cast<int>((c.count + gpu::kWarp - 1) / gpu::kWarp);
    unsigned long long total = 0;
    for (int w = 0; w < c.warps; ++w) {
      const std::size_t last = std::min(c.count, static_cast<std::size_t>(w + 1) * gpu::kWarp) - 1;
      c.warp_base[w] = total;
      c.warp_quads[w] = static_cast<unsigned>((tile.length(c.first + last) + 3) / 4);
      total += static_cast<unsigned long long>(c.warp_quads[w]) * gpu::kWarp;
    }
    parallel_for(static_cast<std::size_t>(c.warps), threads, 16, [&](std::size_t wb, std::size_t we) {
      for (std::size_t w = wb; w < we; ++w)
        for (int lane = 0; lane < gpu::kWarp; ++lane) {
          const std::size_t a = w * gpu::kWarp + lane;
          const std::uint8_t* sa = a < c.count ? tile.subject(c.first + a) : nullptr;
          const std::size_t la = a < c.count ? tile.length(c.first + a) : 0;
          unsigned* out = c.layout.data() + c.warp_base[w] + lane;
          const unsigned quads = c.warp_quads[w];
          const std::size_t full = la / 4;
          for (std::size_t j = 0; j < full; ++j) {
            unsigned x;
            std::memcpy(&x, sa + 4 * j, 4);  // little-endian: residue 4j in the low byte
            out[j * gpu::kWarp] = x;
          }
          for (std::size_t j = full; j < quads; ++j) {
            unsigned x = 0;
            for (int k = 0; k < 4; ++k) {
              const std::size_t pos = j * 4 + k;
              x |= static_cast<unsigned>(pos < la ? sa[pos] : kPaddingCode) << (8 * k);
            }
            out[j * gpu::kWarp] = x;
          }
        }
    });
    // Work items (block of 4 warps, pair), most expensive first.
    const std::size_t blocks = (static_cast<std::size_t>(c.warps) + 3) / 4;
    std::vector<std::pair<unsigned long long, uint2>> items;
    items.reserve(blocks * pairs);
    for (std::size_t b = 0; b < blocks; ++b) {
      const unsigned quads = c.warp_quads[std::min<std::size_t>(4 * b + 3, c.warps - 1)];
      for (std::size_t p = 0; p < pairs; ++p)
        items.push_back({static_cast<unsigned long long>(quads) * pair_m_pad[p],
                         make_uint2(static_cast<unsigned>(b), static_cast<unsigned>(p))});
    }
    std::stable_sort(items.begin(), items.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (std::size_t k = 0; k < items.size(); ++k) c.items[k] = items[k].second;

    c.d_layout.copy_from_host(c.layout.data(), total, c.stream);
    c.d_warp_base.copy_from_host(c.warp_base.data(), c.warps, c.stream);
    c.d_warp_quads.copy_from_host(c.warp_quads.data(), c.warps, c.stream);
    c.d_items.copy_from_host(c.items.data(), items.size(), c.stream);
    QpmArgs args{&c, multi_strip ? total * 4 : 0, static_cast<unsigned long long>(c.warps) * gpu::kWarp,
                 static_cast<int>(items.size()), ps.profiles.data(), ps.pair_profile.data(), ps.pair_m_pad.data()};
    launch_inter_qpm_any(t, args, scoring);
    c.d_best.copy_to_host(c.best.data(), static_cast<std::size_t>(c.warps) * gpu::kWarp * pairs, c.stream);
    c.done.record(c.stream);
    in_flight.push_back(&c);
    ++submitted;
  }
  for (ChunkSet* c : in_flight) finish(*c);
  const double chunks_done = now_seconds();
  const bool long_pending = n_long > 0 && cudaEventQuery(ps.long_done->get()) == cudaErrorNotReady;
  if (n_long > 0) {
    ps.long_done->synchronize();
    for (std::size_t q = 0; q < query_count; ++q)
      for (std::size_t k = 0; k < n_long; ++k) scores[q][tile.id(n_short + k)] = ps.long_best_host[q * n_long + k];
  }
  const double long_done = now_seconds();
  for (std::size_t q = 0; q < query_count; ++q) {
    if (rescue[q].empty()) continue;  // 16-bit saturation: exact 32-bit rescoring of those pairs
    const auto best = rescore_exact(t, ps, tile, rescue[q], ps.queries.data() + query_offset[q],
                                    static_cast<int>(queries[q].length), scoring);
    for (std::size_t k = 0; k < rescue[q].size(); ++k) scores[q][tile.id(rescue[q][k])] = best[k];
    counters.rescored += rescue[q].size();
  }
  const double ended = now_seconds();
  counters.device_seconds += ended - first_launch;
  // MOLACCEL_ALIGN_TRACE=1: where one tile's time goes (milliseconds from entering this function),
  // to see which per-device costs do not shrink with a device's share of the database.
  static const bool trace = std::getenv("MOLACCEL_ALIGN_TRACE") != nullptr;
  if (trace) {
    int device = -1;
    cudaGetDevice(&device);
    std::uint64_t long_residues = 0;
    for (std::size_t k = 0; k < n_long; ++k) long_residues += long_length[k];
    fmt::print(stderr,
               fmt::runtime("align trace gpu{}: {} short ({:.1f} M res, {} chunks) + {} long ({:.1f} M res); "
                            "setup {:.1f} ms, chunks done {:.1f}, long done {:.1f}{}, rescored {} by {:.1f} ms\n"),
               device, n_short, static_cast<double>(short_residues) / 1e6, chunks, n_long,
               static_cast<double>(long_residues) / 1e6, (first_launch - entered) * 1e3,
               (chunks_done - entered) * 1e3, (long_done - entered) * 1e3, long_pending ? " (waited)" : "",
               counters.rescored, (ended - entered) * 1e3);
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
  Tuning tuning = tuning_for(device);
  result.kernel = tuning.name;
  if (request.count == 0 || request.query_count == 0) return;
  const Scoring scoring{request.matrix, request.gap_open, request.gap_extend, request.saturation_threshold};
  if (tuning.query_pairs && tuning.merged) {
    PipelineScratch& scratch = ctx.local<PipelineLease>().get(device);
    const TileSubjects tile{request.residues, request.offsets, request.subjects, request.count};
    for (;;) {
      try {
        score_tile_pipelined(tuning, scratch, request.queries, request.query_count, tile, scoring, request.scores,
                             request.layout_threads, result);
        return;
      } catch (const CudaError& e) {
        // Out of memory: free what we hold, clear the error and retry with chunks half as large
        // (scores are simply written again).
        if (!e.is_out_of_memory()) throw;
        cudaGetLastError();
        scratch.release();
        std::uint64_t residues = 0;
        for (std::size_t i = 0; i < tile.count; ++i) residues += tile.length(i);
        const std::uint64_t current = tuning.chunk_residues ? tuning.chunk_residues : std::min<std::uint64_t>(residues, std::uint64_t{16} << 20);
        if (current < (std::uint64_t{1} << 14)) throw;
        tuning.chunk_residues = current / 2;
        log_warn("align: GPU out of memory; retrying the tile with chunks of {} residues", tuning.chunk_residues);
      }
    }
  }
  // Older paths: they take a contiguous range, so an indexed tile is gathered first.
  auto& scratch = ctx.local<DeviceScratch>();
  if (!request.subjects) {
    const SubjectBatch batch{request.residues, request.offsets, request.count};
    score_tile_shrinking(tuning, scratch, request.queries, request.query_count, batch, scoring, request.scores,
                         result);
    return;
  }
  std::vector<std::uint8_t> residues;
  std::vector<std::uint64_t> offsets{0};
  for (std::size_t i = 0; i < request.count; ++i) {
    const std::size_t k = request.subjects[i];
    residues.insert(residues.end(), request.residues + request.offsets[k], request.residues + request.offsets[k + 1]);
    offsets.push_back(residues.size());
  }
  std::vector<std::vector<int>> local(request.query_count, std::vector<int>(request.count));
  std::vector<int*> local_ptrs;
  for (auto& v : local) local_ptrs.push_back(v.data());
  const SubjectBatch batch{residues.data(), offsets.data(), request.count};
  score_tile_shrinking(tuning, scratch, request.queries, request.query_count, batch, scoring, local_ptrs.data(),
                       result);
  for (std::size_t q = 0; q < request.query_count; ++q)
    for (std::size_t i = 0; i < request.count; ++i) request.scores[q][request.subjects[i]] = local[q][i];
}

}  // namespace molaccel::align::gpu_entry

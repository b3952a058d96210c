// The chunk pipeline of the CUDA backend (pipeline.cu) and the tuning it runs with (dispatch.cu).
// Host-side job management: tile layout, pinned staging, streams and events, the long-subject and
// rescoring jobs; the kernels are behind launch.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "align/cuda/gpu_entry.hpp"
#include "align/cuda/launch.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::align::gpu_entry {

using molaccel::cuda::DeviceBuffer;
using molaccel::cuda::Event;
using molaccel::cuda::PinnedBuffer;
using molaccel::cuda::Stream;

struct Scoring {
  const int* matrix;  // 32x32 padded
  int gap_open, gap_extend, saturation_threshold;
};

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

// Per worker (ctx.kept), kept from job to job: allocating and freeing page-locked and device memory
// costs tens of milliseconds per GPU and search, serialised across GPUs.
struct PipelineScratch {
  PinnedPool* pinned = nullptr;  // the Resources' pool, where the page-locked buffers come from
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

// Creates the scratch's streams, events and chunk sets where it has none yet (no buffers).
void ensure_streams(PipelineScratch& ps);

// The settings for `device` (dispatch.cu): the same on every device so far.
Tuning tuning_for(int device);
// Residues per chunk for a tile's short subjects (dispatch.cu): t.chunk_residues, or the automatic
// size; capped so that the boundary rows of multi-strip queries fit the device.
std::uint64_t chunk_residues_for(const Tuning& t, std::uint64_t short_residues, std::size_t query_pairs,
                                 bool multi_strip);

// Scores every query against every subject of the tile; throws CudaError (out of memory included).
void score_tile_pipelined(const Tuning& t, PipelineScratch& ps, const QueryView* queries,
                          std::size_t query_count, const TileSubjects& tile, const Scoring& scoring,
                          int* const* scores, int layout_threads, TileResult& counters);

}  // namespace molaccel::align::gpu_entry

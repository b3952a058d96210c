// CUDA backend interface (CUDA-free, included by the front file only when MOLACCEL_HAVE_CUDA).
// A GpuJob holds the host-side feature sets of one job; its tile methods run on a GPU worker of
// the scheduler (device current), upload what the tile needs (the database block is cached per
// worker) and bring back only results: dense blocks, top-k lists or threshold pairs.
//
// Layers (CUB style): this call -> tuning.hpp (settings, tuning_for) -> job.hpp / job.cu (passes:
// query groups, uploads, launches; top-k, threshold) and pipeline.cu (dense results to the host)
// -> kernels.hpp (similarity_kernels.cu, select_kernels.cu) -> block_pieces.cuh and bitslice.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lingo/cuda/tuning.hpp"
#include "lingo/encoding.hpp"

namespace molaccel::lingo::cuda_backend {

struct Rect {
  std::size_t row_begin = 0, row_end = 0;  // queries
  std::size_t col_begin = 0, col_end = 0;  // database molecules
  std::size_t rows() const { return row_end - row_begin; }
  std::size_t cols() const { return col_end - col_begin; }
};

class GpuJob {
 public:
  // `tuning`: tests and benchmarks; by default tuning_for(device, problem) on each device.
  GpuJob(const detail::Encoding& encoding, Metric metric, std::optional<Tuning> tuning = std::nullopt);
  ~GpuJob();
  GpuJob(const GpuJob&) = delete;
  GpuJob& operator=(const GpuJob&) = delete;

  // Row-major rect of similarities into host memory (ld floats per row).
  void dense(WorkerContext& ctx, const Rect& rect, float* out, std::size_t ld) const;
  // The rect as `type` into host memory (ld_bytes per row). Into page-locked memory the copy
  // engine writes the destination directly (compute of pass i+1 overlapped with the DMA of pass
  // i, no host-side copy); into ordinary memory through dense_stream's staging buffers.
  void dense_to(WorkerContext& ctx, const Rect& rect, OutputType type, std::uint8_t* out,
                std::size_t ld_bytes) const;
  // Receives rows [row, row + rows) of the rect (relative to rect.row_begin), contiguous, each of
  // rect.cols() elements of the output type. Called from helper threads, at most two at a time,
  // never twice for the same rows; the data is valid only during the call.
  using RowSink = std::function<void(std::size_t row, std::size_t rows, const std::uint8_t* data)>;
  // The rect in passes of rows: compute of pass i+1 and the device-to-host copy of pass i (into
  // pinned staging buffers, a copy stream) and the host-side hand-off of pass i-1 to `sink` all
  // overlap. fp16 and u8 are converted on the GPU, so only their bytes cross PCIe.
  void dense_stream(WorkerContext& ctx, const Rect& rect, OutputType type, const RowSink& sink) const;
  // Per row of the rect, rows in order: its best min(k, cols) hits, best first (ties: lower
  // database index first), selected and sorted on the GPU.
  std::vector<Hit> top_k(WorkerContext& ctx, const Rect& rect, std::size_t k) const;
  // Every (row, col) of the rect with similarity >= threshold (self: only col > row).
  std::vector<Hit> threshold(WorkerContext& ctx, const Rect& rect, float threshold, bool self) const;

  // Largest number of dense elements one launch should produce on `device` (memory-bounded).
  std::size_t dense_budget(int device) const;
  std::string kernel_name() const;  // which kernel family the metric uses

  // The rect computed on the context's GPU with the similarities left in device memory, for
  // callers that use them there (and the kernel benchmark). `sink(row, rows, sims, stream)`
  // receives each pass: rows [row, row + rows) of the rect (relative to rect.row_begin), row-major,
  // rect.cols() floats per row, in device memory and valid until the sink returns; `stream` (a
  // cudaStream_t) is the one the pass was computed on. The whole rect is one pass when its results
  // fit in a quarter of the free memory (Tuning::device_pass_elements sets the elements per pass).
  // The worker state (database slice, result matrix, plan buffers) stays in the context from call
  // to call, as from tile to tile in a job. Returns when the last pass is done.
  using DeviceSink = std::function<void(std::size_t row, std::size_t rows, const float* sims, void* stream)>;
  void on_device(WorkerContext& ctx, const Rect& rect, const DeviceSink& sink = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace molaccel::lingo::cuda_backend

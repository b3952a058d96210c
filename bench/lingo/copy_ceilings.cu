#include "copy_ceilings.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lingo/cuda/job.hpp"  // parallel_rows_copy: the pipeline's host copy
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::lingo_bench {

CopyRates measure_copy_rates(int device, std::size_t bytes) {
  cuda::DeviceGuard guard(device);
  cuda::Stream stream;
  cuda::DeviceBuffer<std::uint8_t> source(bytes);
  source.fill_zero(stream);
  cuda::PinnedBuffer<std::uint8_t> staging[2]{cuda::PinnedBuffer<std::uint8_t>(bytes),
                                              cuda::PinnedBuffer<std::uint8_t>(bytes)};
  CopyRates rates;
  constexpr int kCopies = 8;
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(staging[0].data(), source.data(), bytes, cudaMemcpyDeviceToHost, stream));
  cuda::Event start, stop;
  start.record(stream);
  for (int i = 0; i < kCopies; ++i)
    MOLACCEL_CUDA_TRY(
        cudaMemcpyAsync(staging[i & 1].data(), source.data(), bytes, cudaMemcpyDeviceToHost, stream));
  stop.record(stream);
  stop.synchronize();
  rates.d2h_pinned_gbs = kCopies * static_cast<double>(bytes) / (stop.elapsed_ms_since(start) * 1e-3) / 1e9;
  std::vector<std::uint8_t> host(bytes * 4, 1);
  lingo::cuda_backend::parallel_rows_copy(host.data(), bytes, staging[0].data(), 1, bytes, 0);  // warm
  const double t0 = now_seconds();
  for (int i = 0; i < kCopies; ++i)
    lingo::cuda_backend::parallel_rows_copy(host.data() + (i & 3) * bytes, bytes, staging[i & 1].data(), 1,
                                            bytes, 0);
  rates.host_copy_gbs = kCopies * static_cast<double>(bytes) / (now_seconds() - t0) / 1e9;
  return rates;
}

double measure_d2h_into(int device, void* destination, std::size_t destination_bytes, std::size_t chunk) {
  cuda::DeviceGuard guard(device);
  cuda::Stream stream;
  cuda::DeviceBuffer<std::uint8_t> source(chunk);
  source.fill_zero(stream);
  auto* dst = static_cast<std::uint8_t*>(destination);
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, source.data(), std::min(chunk, destination_bytes),
                                    cudaMemcpyDeviceToHost, stream));
  cuda::Event start, stop;
  start.record(stream);
  for (std::size_t off = 0; off < destination_bytes; off += chunk)
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst + off, source.data(), std::min(chunk, destination_bytes - off),
                                      cudaMemcpyDeviceToHost, stream));
  stop.record(stream);
  stop.synchronize();
  return static_cast<double>(destination_bytes) / (stop.elapsed_ms_since(start) * 1e-3) / 1e9;
}

}  // namespace molaccel::lingo_bench

// Selection and conversion kernels over a pass's fp32 similarities on the device: top-k per row
// (histogram cut and bitonic sort, exact radix select as the fallback), threshold pairs, and the
// fp16 / u8 conversion; with their host-side launches.
#include <cub/block/block_scan.cuh>

#include <algorithm>

#include "lingo/cuda/kernels.hpp"
#include "lingo/similarity_math.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::lingo::cuda_backend {
namespace {

// Radix select on the float bit patterns (non-negative floats order like their bits): three
// passes of 11/11/10 bits find the k-th largest value T exactly; every value > T is taken, then
// values == T in column order until k (ties go to the lower database index).
// The exact fallback of select_top_k_kernel (many equal values at the cut): writes the row's
// `take` hits, unsorted, to row_out.
using SelectScan = cub::BlockScan<std::uint32_t, kBlock>;
struct RadixSelectShared {
  SelectScan::TempStorage scan_storage;
  std::uint32_t s_digit, s_above, s_greater_slot;
};
__device__ void radix_select_row(const std::uint32_t* x, std::uint32_t n_cols, std::uint32_t take,
                                 std::uint32_t row_id, std::uint32_t col0, DeviceHit* row_out,
                                 std::uint32_t* hist, RadixSelectShared& sh) {
  using Scan = SelectScan;
  auto& scan_storage = sh.scan_storage;
  auto& s_digit = sh.s_digit;
  auto& s_above = sh.s_above;
  auto& s_greater_slot = sh.s_greater_slot;
  std::uint32_t prefix = 0, prefix_mask = 0, remaining = take;
  const int shifts[3] = {21, 10, 0};
  const int widths[3] = {11, 11, 10};
  for (int pass = 0; pass < 3; ++pass) {
    const std::uint32_t bins = 1u << widths[pass];
    const std::uint32_t digit_mask = bins - 1;
    for (std::uint32_t b = threadIdx.x; b < 2048; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (std::uint32_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      const std::uint32_t v = x[i];
      if ((v & prefix_mask) == prefix) atomicAdd(&hist[(v >> shifts[pass]) & digit_mask], 1u);
    }
    __syncthreads();
    // Thread t owns 8 bins counted from the top; an exclusive scan gives the count above them.
    const int per_thread = 2048 / kBlock;
    const int top = static_cast<int>(bins) - 1 - static_cast<int>(threadIdx.x) * per_thread;
    std::uint32_t local = 0;
    for (int k = 0; k < per_thread; ++k)
      if (top - k >= 0) local += hist[top - k];
    std::uint32_t above = 0;
    Scan(scan_storage).ExclusiveSum(local, above);
    for (int k = 0; k < per_thread; ++k) {
      const int bin = top - k;
      if (bin < 0) break;
      if (above < remaining && above + hist[bin] >= remaining) {
        s_digit = static_cast<std::uint32_t>(bin);
        s_above = above;
      }
      above += hist[bin];
    }
    __syncthreads();
    remaining -= s_above;
    prefix |= s_digit << shifts[pass];
    prefix_mask |= digit_mask << shifts[pass];
    __syncthreads();
  }
  const std::uint32_t threshold = prefix;
  const std::uint32_t greater = take - remaining;
  if (threadIdx.x == 0) s_greater_slot = 0;
  __syncthreads();
  for (std::uint32_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
    const std::uint32_t v = x[i];
    if (v > threshold) {
      const std::uint32_t slot = atomicAdd(&s_greater_slot, 1u);
      row_out[slot] = {row_id, col0 + i, __uint_as_float(v)};
    }
  }
  std::uint32_t base = 0;
  for (std::uint32_t start = 0; start < n_cols && base < remaining; start += blockDim.x) {
    const std::uint32_t i = start + threadIdx.x;
    const std::uint32_t flag = (i < n_cols && x[i] == threshold) ? 1u : 0u;
    std::uint32_t pos = 0, total = 0;
    Scan(scan_storage).ExclusiveSum(flag, pos, total);
    if (flag && base + pos < remaining)
      row_out[greater + base + pos] = {row_id, col0 + i, __uint_as_float(threshold)};
    base += total;
    __syncthreads();
  }
}

constexpr std::uint32_t kSelectBins = 2048;

// Similarities lie in [0, 1]; s * 2048 is exact (a power-of-two scale), so the bin is monotone in s.
__device__ __forceinline__ std::uint32_t similarity_bin(std::uint32_t bits) {
  const float x = __uint_as_float(bits) * 2048.0f;
  return x >= 2047.0f ? kSelectBins - 1 : (x > 0.0f ? static_cast<std::uint32_t>(x) : 0u);
}
// Ascending order of the key = similarity descending, then column ascending (non-negative floats
// order like their bit patterns, so ~bits reverses them).
__device__ __forceinline__ unsigned long long select_key(std::uint32_t bits, std::uint32_t col) {
  return (static_cast<unsigned long long>(~bits) << 32) | col;
}

// Bitonic sort of keys[0, n) in shared memory, n a power of two.
__device__ void block_bitonic_sort(unsigned long long* keys, std::uint32_t n) {
  for (std::uint32_t k = 2; k <= n; k <<= 1)
    for (std::uint32_t j = k >> 1; j > 0; j >>= 1) {
      for (std::uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const std::uint32_t partner = i ^ j;
        if (partner > i) {
          const unsigned long long a = keys[i], b = keys[partner];
          if ((a > b) == ((i & k) == 0)) {
            keys[i] = b;
            keys[partner] = a;
          }
        }
      }
      __syncthreads();
    }
}

// Top-k of each row (one block per row), written sorted: best first, ties by lower database index.
// Pass 1 histograms the row into 2,048 linear similarity bins and finds the bin b holding the k-th
// best; pass 2 gathers every value in bins >= b (the k best plus the rest of bin b) into shared
// memory, where a bitonic sort orders them. Two reads of the row instead of five, and the linear
// bins spread the shared-memory atomics (float-bit digits put most of [0.25, 1] in 16 bins). When
// bin b holds too many equal or close values for the shared buffer, the exact radix select above
// picks the k, which are then sorted the same way. take <= kSelectCapacity (the caller sorts larger
// k on the host).
__global__ void __launch_bounds__(kBlock)
    select_top_k_kernel(const float* sims, std::size_t ld, std::uint32_t n_cols, std::uint32_t take,
                        std::uint32_t row0, std::uint32_t col0, DeviceHit* out) {
  using Scan = SelectScan;
  __shared__ RadixSelectShared radix_shared;
  __shared__ std::uint32_t hist[kSelectBins];
  __shared__ unsigned long long keys[kSelectCapacity];
  __shared__ std::uint32_t s_bin, s_above, s_count;
  const std::uint32_t row = blockIdx.x;
  const auto* x = reinterpret_cast<const std::uint32_t*>(sims + row * ld);
  DeviceHit* row_out = out + static_cast<std::size_t>(row) * take;
  if (take > kSelectCapacity) {  // uniform over the block: unsorted, the host sorts
    radix_select_row(x, n_cols, take, row0 + row, col0, row_out, hist, radix_shared);
    return;
  }

  for (std::uint32_t b = threadIdx.x; b < kSelectBins; b += blockDim.x) hist[b] = 0;
  if (threadIdx.x == 0) s_count = 0;
  __syncthreads();
  for (std::uint32_t i = threadIdx.x; i < n_cols; i += blockDim.x) atomicAdd(&hist[similarity_bin(x[i])], 1u);
  __syncthreads();
  // Thread t owns 8 bins counted from the top; an exclusive scan gives the count above them.
  constexpr std::uint32_t per_thread = kSelectBins / kBlock;
  const int top = static_cast<int>(kSelectBins) - 1 - static_cast<int>(threadIdx.x * per_thread);
  std::uint32_t local = 0;
  for (std::uint32_t k = 0; k < per_thread; ++k) local += hist[top - static_cast<int>(k)];
  std::uint32_t above = 0;
  Scan(radix_shared.scan_storage).ExclusiveSum(local, above);
  for (std::uint32_t k = 0; k < per_thread; ++k) {
    const std::uint32_t bin = static_cast<std::uint32_t>(top) - k;
    if (above < take && above + hist[bin] >= take) {
      s_bin = bin;
      s_above = above;
    }
    above += hist[bin];
  }
  __syncthreads();
  const std::uint32_t cut = s_bin;
  const std::uint32_t candidates = s_above + hist[cut];
  std::uint32_t n_keys;
  if (candidates <= kSelectCapacity) {
    for (std::uint32_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      const std::uint32_t v = x[i];
      if (similarity_bin(v) >= cut) keys[atomicAdd(&s_count, 1u)] = select_key(v, i);
    }
    n_keys = candidates;
  } else {
    __syncthreads();  // everyone has read s_bin and hist before the fallback reuses hist
    radix_select_row(x, n_cols, take, row0 + row, col0, row_out, hist, radix_shared);
    __syncthreads();  // row_out written by all threads
    for (std::uint32_t i = threadIdx.x; i < take; i += blockDim.x) {
      const DeviceHit h = row_out[i];
      keys[i] = select_key(__float_as_uint(h.similarity), h.target - col0);
    }
    n_keys = take;
  }
  std::uint32_t padded = 1;
  while (padded < n_keys) padded <<= 1;
  __syncthreads();
  for (std::uint32_t i = n_keys + threadIdx.x; i < padded; i += blockDim.x) keys[i] = ~0ull;
  __syncthreads();
  block_bitonic_sort(keys, padded);
  for (std::uint32_t i = threadIdx.x; i < take; i += blockDim.x) {
    const unsigned long long key = keys[i];
    row_out[i] = {row0 + row, col0 + static_cast<std::uint32_t>(key & 0xffffffffu),
                  __uint_as_float(~static_cast<std::uint32_t>(key >> 32))};
  }
}

__global__ void select_threshold_kernel(const float* sims, std::size_t ld, std::uint32_t n_rows,
                                        std::uint32_t n_cols, float threshold, bool upper_only,
                                        std::uint32_t row0, std::uint32_t col0, DeviceHit* out,
                                        unsigned long long capacity, unsigned long long* count) {
  const std::size_t total = static_cast<std::size_t>(n_rows) * n_cols;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t r = static_cast<std::uint32_t>(e / n_cols),
                        c = static_cast<std::uint32_t>(e % n_cols);
    const float s = sims[r * ld + c];
    if (!(s >= threshold)) continue;
    if (upper_only && col0 + c <= row0 + r) continue;
    const unsigned long long slot = atomicAdd(count, 1ull);
    if (slot < capacity) out[slot] = {row0 + r, col0 + c, s};
  }
}

// fp32 similarities -> fp16 bits (type 1) or u8 (type 2), the quantisations of similarity_math.hpp.
__global__ void convert_kernel(const float* in, std::size_t n, std::uint8_t* out, int type) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (type == 1)
      reinterpret_cast<std::uint16_t*>(out)[i] = detail::float_to_half_bits(in[i]);
    else
      out[i] = detail::similarity_to_u8(in[i]);
  }
}
}  // namespace

void launch_top_k(const float* sims, std::size_t ld, std::size_t rows, std::uint32_t n_cols,
                  std::uint32_t take, std::uint32_t row0, std::uint32_t col0, DeviceHit* out,
                  cudaStream_t stream) {
  select_top_k_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(sims, ld, n_cols, take, row0, col0,
                                                                          out);
  MOLACCEL_CUDA_CHECK_LAUNCH("lingo select_top_k_kernel");
}

void launch_threshold(const float* sims, std::size_t ld, std::uint32_t rows, std::uint32_t n_cols,
                      float threshold, bool upper_only, std::uint32_t row0, std::uint32_t col0,
                      DeviceHit* out, unsigned long long capacity, unsigned long long* count,
                      cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(
      std::min<std::size_t>((static_cast<std::size_t>(rows) * n_cols + kBlock - 1) / kBlock, 8192));
  select_threshold_kernel<<<blocks, kBlock, 0, stream>>>(sims, ld, rows, n_cols, threshold, upper_only, row0,
                                                         col0, out, capacity, count);
  MOLACCEL_CUDA_CHECK_LAUNCH("lingo select_threshold_kernel");
}

void launch_convert(const float* in, std::size_t n, std::uint8_t* out, OutputType type, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, 4096));
  convert_kernel<<<blocks, kBlock, 0, stream>>>(in, n, out, type == OutputType::fp16 ? 1 : 2);
  MOLACCEL_CUDA_CHECK_LAUNCH("lingo convert_kernel");
}

}  // namespace molaccel::lingo::cuda_backend

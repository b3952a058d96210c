// CUDA backend, in CUB-style layers:
//   GpuJob (public to the front file) -> pass planning (rows per pass, query groups) -> kernels
//   (one block = one query group x a slice of the database) -> block/warp pieces (shared-memory
//   hash table, bit-sliced counters, radix select).
//
// Tanimoto and set metrics use feature expansion: a Lingo of count c becomes c distinct features,
// so the multiset intersection is the number of shared features. A block holds the features of up
// to 32 queries in a shared-memory hash table whose value is a 32-bit mask of the queries holding
// the feature; each thread streams one database molecule's features, looks each up, and adds the
// mask into bit-sliced counters (plane b holds bit b of all 32 counts). The table size depends on
// the queries only, never on the vocabulary, so a large or diverse vocabulary has no cliff.
// Vidal (per-Lingo fractions) and queries too large for a table use a per-pair merge kernel.
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <string_view>

#include "lingo/bitslice.hpp"
#include "lingo/cuda/cuda_backend.hpp"
#include "lingo/cuda/tuning.hpp"
#include "lingo/interleaved_layout.hpp"
#include "lingo/similarity_math.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::lingo::cuda_backend {
namespace {

constexpr std::uint32_t kEmptySlot = 0xffffffffu;
constexpr int kBlock = 256;
constexpr std::uint32_t kQueriesPerGroup = 32;
constexpr std::uint32_t kSmallTableSlots = 4096;   // 32 KiB table: groups of <= 2048 features
constexpr std::uint32_t kLargeTableSlots = 16384;  // 128 KiB table: one query of <= 8192 features
constexpr std::uint32_t kPairWindow = 2 * kBlock;  // database columns per block step (a window pair)

struct DeviceHit {
  std::uint32_t query, target;
  float similarity;
};
static_assert(sizeof(DeviceHit) == sizeof(Hit), "device and host hits share a layout");

struct QueryGroup {
  std::uint32_t first_row;  // row within the query slice on the device
  std::uint32_t count;      // <= 32
};

// One pass of rows [r0, r1): its groups (small-table ones, then large-table ones) and merge-kernel
// rows, as ranges of the uploaded group and fallback arrays.
struct PassPlan {
  std::size_t r0 = 0, r1 = 0;
  std::size_t groups_begin = 0, n_small = 0, n_large = 0;
  std::size_t fallback_begin = 0, n_fallback = 0;
};

// ---- block pieces --------------------------------------------------------------------------------
// Table entry: x = feature (kEmptySlot when free), y = mask of the group's queries holding it.
__device__ __forceinline__ std::uint32_t slot_of(std::uint32_t feature, int log2_slots) {
  return (feature * 2654435761u) >> (32 - log2_slots);
}

__device__ void table_insert(uint2* table, int log2_slots, std::uint32_t feature, std::uint32_t bit) {
  const std::uint32_t wrap = (1u << log2_slots) - 1;
  for (std::uint32_t s = slot_of(feature, log2_slots);; s = (s + 1) & wrap) {
    const std::uint32_t prev = atomicCAS(&table[s].x, kEmptySlot, feature);
    if (prev == kEmptySlot || prev == feature) {
      atomicOr(&table[s].y, bit);
      return;
    }
  }
}

__device__ __forceinline__ std::uint32_t table_lookup(const uint2* table, int log2_slots,
                                                      std::uint32_t feature) {
  const std::uint32_t wrap = (1u << log2_slots) - 1;
  for (std::uint32_t s = slot_of(feature, log2_slots);; s = (s + 1) & wrap) {
    const uint2 e = table[s];
    if (e.x == feature) return e.y;
    if (e.x == kEmptySlot) return 0;
  }
}

// ---- kernels -------------------------------------------------------------------------------------
template <class Clear, class Insert>
__device__ __forceinline__ void fill_group_table(const QueryGroup& group, const std::uint64_t* q_offsets,
                                                 const std::uint32_t* q_features, const std::uint32_t* q_sizes,
                                                 std::uint32_t slots, std::uint32_t* sizes, Clear clear,
                                                 Insert insert) {
  for (std::uint32_t s = threadIdx.x; s < slots; s += blockDim.x) clear(s);
  if (threadIdx.x < group.count) sizes[threadIdx.x] = q_sizes[group.first_row + threadIdx.x];
  __syncthreads();
  const std::uint64_t begin = q_offsets[group.first_row];
  const std::uint64_t end = q_offsets[group.first_row + group.count];
  std::uint32_t q = 0;
  for (std::uint64_t f = begin + threadIdx.x; f < end; f += blockDim.x) {
    while (q_offsets[group.first_row + q + 1] <= f) ++q;  // which query owns feature f
    insert(q_features[f], q);
  }
  __syncthreads();
}

// The database slice as the hashed kernel reads it (interleaved_layout.hpp): windows of kBlock
// molecules, sorted by feature count inside each window (longest first) so a warp's 32 lanes loop
// about as long; each warp's features interleaved ([k][32], rows padded to 4) so a load is one
// coalesced line.
struct InterleavedSlice {
  const std::uint64_t* warp_base;  // per 32 sorted positions: first interleaved element
  const std::uint32_t* length;     // per sorted position: features
  const std::uint32_t* size;       // per sorted position: magnitude (or distinct count)
  const std::uint16_t* column;     // per sorted position: column within its window
  const std::uint32_t* features;   // interleaved
};

// ---- the output stage ----------------------------------------------------------------------------
// The block's reciprocal table for the division-free exact ratio: recip[u] = 1.0f / u (IEEE),
// recip[0] = 0 (an empty union: shared = 0, and the formula then gives +0, as ratio_similarity).
__device__ __forceinline__ void fill_reciprocals(float* recip) {
  for (std::uint32_t u = threadIdx.x; u < detail::kReciprocals; u += blockDim.x)
    recip[u] = u ? 1.0f / static_cast<float>(u) : 0.0f;
}

// shared / (a + b - shared), bit-identical to detail::ratio_similarity: unions below kReciprocals
// take the table and one exact correction step (no division; checked exhaustively on the CPU by
// test_lingo_pieces), larger ones the IEEE division.
__device__ __forceinline__ float pair_similarity(std::uint32_t shared, std::uint32_t size_a, std::uint32_t size_b,
                                                 const float* recip) {
  const std::uint32_t u = size_a + size_b - shared;
  if (u < detail::kReciprocals) return detail::ratio_from_reciprocal(shared, u, recip[u]);
  return detail::ratio_similarity(shared, size_a, size_b);
}

// The 32 counts as bytes (byte j of t[r] = count of query 8j + r, from bitslice_transpose8) out as
// fp32 similarities, o[q * ld] for query q < count.
__device__ __forceinline__ void store_count_bytes(const std::uint32_t (&t)[8], std::uint32_t count,
                                                  const std::uint32_t* sizes, std::uint32_t db_size,
                                                  const float* recip, float* o, std::size_t ld) {
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
    if (8 * j >= count) break;
#pragma unroll
    for (std::uint32_t r = 0; r < 8; ++r) {
      const std::uint32_t q = 8 * j + r;
      if (q < count) o[q * ld] = pair_similarity((t[r] >> (8 * j)) & 0xffu, sizes[q], db_size, recip);
    }
  }
}

// store_count_bytes for a full group (32 queries) whose every union is known to be below
// kReciprocals (the block checked its largest query size; the column has < 256 features): no
// per-pair bounds or range checks, the same arithmetic (ratio_from_reciprocal), the same bits.
__device__ __forceinline__ void store_count_bytes_full(const std::uint32_t (&t)[8], const std::uint32_t* sizes,
                                                       std::uint32_t db_size, const float* recip, float* o,
                                                       std::size_t ld) {
#pragma unroll
  for (std::uint32_t j = 0; j < 4; ++j) {
#pragma unroll
    for (std::uint32_t r = 0; r < 8; ++r) {
      const std::uint32_t q = 8 * j + r;
      const std::uint32_t shared = (t[r] >> (8 * j)) & 0xffu;
      const std::uint32_t u = sizes[q] + db_size - shared;
      o[q * ld] = detail::ratio_from_reciprocal(shared, u, recip[u]);
    }
  }
}

// A molecule of >= 256 features: its counts may not fit a byte, so they leave the planes one at a
// time and it stores its own column.
template <int Planes>
__device__ __forceinline__ void store_counts_one_by_one(const std::uint32_t (&planes)[Planes], std::uint32_t count,
                                                        const std::uint32_t* sizes, std::uint32_t db_size,
                                                        const float* recip, float* o, std::size_t ld) {
  for (std::uint32_t q = 0; q < count; ++q)
    o[q * ld] = pair_similarity(detail::bitslice_count(planes, q), sizes[q], db_size, recip);
}

// ---- the hashed kernel ---------------------------------------------------------------------------
// One block: query group blockIdx.x (its table of (feature, query mask) pairs in shared memory)
// against window pairs blockIdx.y, +gridDim.y, ... of the database slice.
//
// Windows are walked in pairs: warp w takes chunk w (the w-th longest 32 molecules) of window 2p
// and then chunk 7 - w of window 2p + 1, so every warp pairs a long chunk with a short one and the
// eight warps reach the barrier of the count exchange together. The counts of the first window go
// to shared memory at once, those of the second stay in registers until the first window is
// stored; the exchange brings them back to window order so that thread t stores column t
// (coalesced fp32 stores). 8 KiB of exchange: 5 blocks per SM.
//
// The walk takes eight features per step and adds their masks by bitslice_add8 (seven carry-save
// adders, one ripple from plane 3); a chunk whose padded row count is not a multiple of 8 adds its
// last four by bitslice_add4.
//
// A block whose group is full (32 queries) and whose largest query has fewer than
// kReciprocals - 255 features stores its window columns (< 256 features) by
// store_count_bytes_full: every union is below kReciprocals, so no per-pair checks.
template <int Planes>
__global__ void __launch_bounds__(kBlock, Planes <= 11 ? 5 : 1)
    hashed_similarity_kernel(const QueryGroup* groups, const std::uint64_t* q_offsets,
                             const std::uint32_t* q_features, const std::uint32_t* q_sizes, InterleavedSlice db,
                             const std::uint64_t* db_offsets, const std::uint32_t* db_sizes, std::uint32_t n_cols,
                             int log2_slots, float* out, std::size_t ld) {
  extern __shared__ std::uint32_t table_words[];
  const std::uint32_t slots = 1u << log2_slots;
  uint2* const pairs = reinterpret_cast<uint2*>(table_words);
  __shared__ std::uint32_t sizes[kQueriesPerGroup];
  __shared__ float recip[detail::kReciprocals];
  __shared__ std::uint32_t counts[8 * kBlock];  // word k of window column c at counts[k * kBlock + c]
  const QueryGroup group = groups[blockIdx.x];
  fill_reciprocals(recip);
  fill_group_table(
      group, q_offsets, q_features, q_sizes, slots, sizes,
      [&](std::uint32_t s) { pairs[s] = make_uint2(kEmptySlot, 0u); },
      [&](std::uint32_t feature, std::uint32_t q) { table_insert(pairs, log2_slots, feature, 1u << q); });
  const auto lookup = [&](std::uint32_t f) { return table_lookup(pairs, log2_slots, f); };
  float* const rows_out = out + static_cast<std::size_t>(group.first_row) * ld;

  const std::uint32_t lane = threadIdx.x & 31u;
  const std::uint32_t warp = threadIdx.x >> 5;
  const std::uint32_t n_windows = (n_cols + kBlock - 1) / kBlock;
  const std::uint32_t n_pairs = (n_windows + 1) / 2;
  // Walks sorted position pos's chunk (its padded row count) into the bit planes.
  const auto walk = [&](std::uint32_t pos, std::uint32_t (&planes)[Planes]) {
    const std::uint32_t rows = (db.length[pos & ~31u] + 3u) & ~3u;  // lane 0: the chunk's longest
    const std::uint32_t* feature = db.features + db.warp_base[pos / 32] + lane;
#pragma unroll
    for (int b = 0; b < Planes; ++b) planes[b] = 0;
    std::uint32_t k = 0;
    const auto load = [&](std::uint32_t kk, int u) { return __ldg(feature + 32 * (kk + u)); };
    // The masks of features kk .. kk + 7: the eight loads issued before the lookups.
    const auto masks8 = [&](std::uint32_t kk, std::uint32_t (&m8)[8]) {
      std::uint32_t v8[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v8[u] = load(kk, u);
#pragma unroll
      for (int u = 0; u < 8; ++u) m8[u] = lookup(v8[u]);
    };
    std::uint32_t m8[8];
    for (; k + 8 <= rows; k += 8) {
      masks8(k, m8);
      detail::bitslice_add8(planes, m8);
    }
    if (k < rows) {  // the last four (rows is a multiple of 4)
      std::uint32_t v4[4], m4[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v4[u] = load(k, u);
#pragma unroll
      for (int u = 0; u < 4; ++u) m4[u] = lookup(v4[u]);
      detail::bitslice_add4(planes, m4[0], m4[1], m4[2], m4[3]);
    }
  };
  bool full_block = false;  // a full group whose unions all stay below kReciprocals
  {
    std::uint32_t largest = 0;
    for (std::uint32_t q = 0; q < group.count; ++q) largest = max(largest, sizes[q]);
    full_block = group.count == kQueriesPerGroup && largest + 255u < detail::kReciprocals;
  }
  // Window column t of window `window` from shared memory to the output (thread t).
  const auto store_window = [&](std::uint32_t window) {
    const std::uint32_t col = window * kBlock + threadIdx.x;
    if (col < n_cols && db_offsets[col + 1] - db_offsets[col] < 256) {
      std::uint32_t t[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) t[k] = counts[k * kBlock + threadIdx.x];
      if (full_block)
        store_count_bytes_full(t, sizes, db_sizes[col], recip, rows_out + col, ld);
      else
        store_count_bytes(t, group.count, sizes, db_sizes[col], recip, rows_out + col, ld);
    }
  };
  for (std::uint32_t p = blockIdx.y; p < n_pairs; p += gridDim.y) {
    const bool second = 2 * p + 1 < n_windows;  // uniform over the block
    {  // chunk `warp` of window 2p: counts straight to shared memory
      const std::uint32_t base = 2 * p * kBlock;
      const std::uint32_t pos = base + 32 * warp + lane;  // < the layout's padded size
      std::uint32_t planes[Planes];
      walk(pos, planes);
      if (pos < n_cols) {
        const std::uint32_t c = db.column[pos];
        if (db.length[pos] < 256) {
          std::uint32_t t[8];
          detail::bitslice_transpose8(planes, t);
#pragma unroll
          for (int k = 0; k < 8; ++k) counts[k * kBlock + c] = t[k];
        } else {
          store_counts_one_by_one(planes, group.count, sizes, db.size[pos], recip, rows_out + base + c, ld);
        }
      }
    }
    if (second) {  // chunk 7 - warp of window 2p + 1: counts held in registers
      const std::uint32_t base = (2 * p + 1) * kBlock;
      const std::uint32_t pos = base + 32 * (kBlock / 32 - 1 - warp) + lane;
      std::uint32_t planes[Planes];
      walk(pos, planes);
      std::uint32_t held[8];
      std::uint32_t held_column = kBlock;  // kBlock: none held
      if (pos < n_cols) {
        const std::uint32_t c = db.column[pos];
        if (db.length[pos] < 256) {
          detail::bitslice_transpose8(planes, held);
          held_column = c;
        } else {
          store_counts_one_by_one(planes, group.count, sizes, db.size[pos], recip, rows_out + base + c, ld);
        }
      }
      __syncthreads();
      store_window(2 * p);
      __syncthreads();  // window 2p read by all before it is overwritten
      if (held_column < kBlock) {
#pragma unroll
        for (int k = 0; k < 8; ++k) counts[k * kBlock + held_column] = held[k];
      }
      __syncthreads();
      store_window(2 * p + 1);
    } else {
      __syncthreads();
      store_window(2 * p);
    }
    __syncthreads();  // `counts` is reused by the next pair
  }
}

// Per pair: the sorted-merge of (id, count) lists. Vidal, and rows whose queries are too large
// for a shared-memory table. Rows listed in `rows` (all rows when rows == nullptr).
__global__ void merge_similarity_kernel(const std::uint32_t* rows, std::uint32_t n_rows, Metric metric,
                                        const std::uint64_t* q_offsets, const std::uint32_t* q_ids,
                                        const std::uint32_t* q_counts, const std::uint32_t* q_magnitudes,
                                        const std::uint32_t* q_distinct, const std::uint64_t* db_offsets,
                                        const std::uint32_t* db_ids, const std::uint32_t* db_counts,
                                        const std::uint32_t* db_magnitudes, const std::uint32_t* db_distinct,
                                        std::uint32_t n_cols, float* out, std::size_t ld) {
  const std::uint32_t col = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint32_t r = blockIdx.y;
  if (col >= n_cols || r >= n_rows) return;
  const std::uint32_t row = rows ? rows[r] : r;
  std::uint64_t i = q_offsets[row], ie = q_offsets[row + 1];
  std::uint64_t j = db_offsets[col], je = db_offsets[col + 1];
  std::uint32_t intersection = 0, shared_distinct = 0;
  std::uint64_t fixed_sum = 0;
  while (i < ie && j < je) {
    const std::uint32_t a = q_ids[i], b = __ldg(&db_ids[j]);
    if (a == b) {
      const std::uint32_t ca = q_counts[i], cb = __ldg(&db_counts[j]);
      intersection += min(ca, cb);
      shared_distinct += 1;
      if (metric == Metric::vidal) fixed_sum += detail::vidal_term(ca, cb);
      ++i;
      ++j;
    } else if (a < b) {
      ++i;
    } else {
      ++j;
    }
  }
  float s;
  if (metric == Metric::tanimoto)
    s = detail::ratio_similarity(intersection, q_magnitudes[row], db_magnitudes[col]);
  else if (metric == Metric::set)
    s = detail::ratio_similarity(shared_distinct, q_distinct[row], db_distinct[col]);
  else
    s = detail::vidal_similarity(fixed_sum, shared_distinct, q_distinct[row], db_distinct[col]);
  out[row * ld + col] = s;
}

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
constexpr std::uint32_t kSelectCapacity = 4096;  // candidates sorted in shared memory (32 KiB)

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

// ---- host side -----------------------------------------------------------------------------------
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
  bool attributes_set = false;
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

// Pinned staging buffers, kept for the life of the process (page-locking is slow: a fresh pair per
// call would cost more than the copy of a small matrix). Never freed: no teardown-order issues.
struct StagingPool {
  std::mutex mutex;
  std::vector<cuda::PinnedBuffer<std::uint8_t>> free;
};
StagingPool& staging_pool() {
  static auto* pool = new StagingPool;
  return *pool;
}
class StagingLease {
 public:
  explicit StagingLease(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(staging_pool().mutex);
      auto& f = staging_pool().free;
      for (auto& b : buffers_)
        if (!f.empty()) {
          b = std::move(f.back());
          f.pop_back();
        }
    }
    for (auto& b : buffers_) b.resize(std::max<std::size_t>(bytes, 1));
  }
  ~StagingLease() {
    std::lock_guard<std::mutex> lock(staging_pool().mutex);
    for (auto& b : buffers_)
      if (b.data()) staging_pool().free.push_back(std::move(b));
  }
  StagingLease(const StagingLease&) = delete;
  StagingLease& operator=(const StagingLease&) = delete;
  std::uint8_t* buffer(int i) { return buffers_[i].data(); }

 private:
  cuda::PinnedBuffer<std::uint8_t> buffers_[2];
};

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
  parallel_for(rows, threads, std::max<std::size_t>(1, (std::size_t{1} << 20) / std::max<std::size_t>(row_bytes, 1)),
               [&](std::size_t b, std::size_t e) {
                 for (std::size_t r = b; r < e; ++r) std::memcpy(dst + r * ld_bytes, src + r * row_bytes, row_bytes);
               });
}

// Dynamic shared memory of the hashed kernel: its table of (key, mask) pairs.
std::size_t table_bytes(std::uint32_t slots) {
  return slots * sizeof(uint2);
}

int log2_of(std::uint32_t x) {
  int l = 0;
  while ((1u << l) < x) ++l;
  return l;
}

}  // namespace

struct GpuJob::Impl {
  const detail::Encoding& encoding;
  Metric metric;
  bool use_features;
  detail::FeatureSet db_features, query_features;  // query_features empty when self
  std::optional<Tuning> fixed_tuning;              // tests and benchmarks; else tuning_for
  Tuning tuning(int device) const {
    return fixed_tuning ? *fixed_tuning
                        : tuning_for(device, {metric, encoding.query_set().size(), encoding.database.size()});
  }
  // time_kernels' worker state, per device, kept from call to call as a job keeps it from tile to
  // tile: the result matrix and the plan buffers are allocated by the first (warm-up) call, not
  // inside the timed loop of every call (a 1 GiB cudaMalloc landed in the first pass's time).
  mutable std::mutex bench_mutex;
  mutable std::vector<std::pair<int, std::unique_ptr<WorkerContext>>> bench_contexts;
  WorkerContext& bench_context(int device) const {
    std::lock_guard lock(bench_mutex);
    for (auto& [d, ctx] : bench_contexts)
      if (d == device) return *ctx;
    WorkerInfo info;
    info.kind = WorkerInfo::Kind::gpu;
    info.device = device;
    bench_contexts.emplace_back(device, std::make_unique<WorkerContext>(info));
    return *bench_contexts.back().second;
  }

  Impl(const detail::Encoding& e, Metric m, std::optional<Tuning> t)
      : encoding(e), metric(m), use_features(m != Metric::vidal), fixed_tuning(t) {
    if (use_features) {
      const auto bases = detail::feature_bases(e);
      const bool distinct_only = m == Metric::set;
      db_features = detail::expand_features(e.database, e.max_count, bases, distinct_only);
      if (!e.self) query_features = detail::expand_features(e.queries, e.max_count, bases, distinct_only);
    }
  }
  const detail::FeatureSet& qfs() const { return encoding.self ? db_features : query_features; }

  WorkerState& state(WorkerContext& ctx) const {
    auto& s = ctx.local<WorkerState>();
    s.tuning = tuning(ctx.worker().device);
    if (!s.attributes_set) {
      const int large = static_cast<int>(table_bytes(kLargeTableSlots));
      const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
      MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(hashed_similarity_kernel<11>, attr, large));
      MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(hashed_similarity_kernel<21>, attr, large));
      s.attributes_set = true;
    }
    return s;
  }

  void ensure_db(WorkerState& s, std::size_t b, std::size_t e) const {
    if (s.db.valid && s.db.begin == b && s.db.end == e) return;
    s.db.load(use_features ? &db_features : nullptr, encoding.database, b, e, s.stream);
    if (use_features) {
      s.db.valid = false;
      s.db.load_interleaved(db_features, b, e, s.stream);
      s.db.valid = true;
    }
  }

  // The groups of query rows [r0, r1): up to 32 consecutive queries, total features within half
  // the table (shared features take one slot, so the real load is lower). A group whose features do not fit closes early: diverse inputs make smaller groups,
  // no cliff. Queries too large for any table (and every row for vidal) go to the merge kernel.
  // Rows are numbered from `base` (the first row of the query slice on the device); the groups and
  // fallback rows are appended to `groups` / `fallback`.
  PassPlan plan_pass(std::size_t r0, std::size_t r1, std::size_t base, std::vector<QueryGroup>& groups,
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
  void launch_pass(WorkerState& s, const PassPlan& p, const DeviceSlice& q, std::size_t base, float* dst) const {
    const std::size_t cols = s.db.end - s.db.begin;
    if (p.r1 == p.r0 || cols == 0) return;
    cudaStream_t stream = s.stream;
    // The kernels address results by slice row: shift the output so that row p.r0 lands on row 0
    // of `dst` (only rows >= p.r0 are written). Integer arithmetic: the address is never formed
    // as a host pointer into an array.
    float* out = reinterpret_cast<float*>(reinterpret_cast<std::uintptr_t>(dst) -
                                          (p.r0 - base) * cols * sizeof(float));
    if (use_features) {
    const bool wide = s.db.max_features >= 2048;
    // Each block reuses its table over up to 8 windows of kBlock database molecules (amortises
    // the build); fewer when the pass has few query groups, so the launch still fills the GPU
    // (at least 4,096 blocks: the pipelined passes of dense_stream are ~1,024 rows).
    auto splits_for = [&](std::size_t n_groups) {
      const std::size_t window = kPairWindow;  // columns per block step
      const std::size_t windows = (cols + window - 1) / window;
      std::size_t per_block = std::max<std::size_t>(1, s.tuning.block_steps);
      while (per_block > 1 && n_groups * ((windows + per_block - 1) / per_block) < 4096) per_block /= 2;
      return static_cast<unsigned>(std::min<std::size_t>((windows + per_block - 1) / per_block, 65535));
    };
    const InterleavedSlice view = s.db.interleaved_view();
    auto launch = [&](std::size_t first_group, std::size_t n_groups, std::uint32_t slots) {
      if (n_groups == 0) return;
      const unsigned splits = splits_for(n_groups);
      const dim3 grid(static_cast<unsigned>(n_groups), splits);
      const int log2_slots = log2_of(slots);
      const QueryGroup* g = s.groups.data() + p.groups_begin + first_group;
      const auto n = static_cast<std::uint32_t>(cols);
      // Counts need 11 bit planes when every database molecule has < 2,048 features, else 21.
      (wide ? hashed_similarity_kernel<21> : hashed_similarity_kernel<11>)<<<grid, kBlock, table_bytes(slots), stream>>>(
          g, q.feature_offsets.data(), q.features.data(), q.feature_sizes.data(), view, s.db.feature_offsets.data(),
          s.db.feature_sizes.data(), n, log2_slots, out, cols);
      MOLACCEL_CUDA_CHECK_LAUNCH("lingo hashed_similarity kernel");
    };
      // grid.x is limited to 2^31-1 groups, far beyond any pass.
      launch(0, p.n_small, kSmallTableSlots);
      launch(p.n_small, p.n_large, kLargeTableSlots);
    }
    for (std::size_t done = 0; done < p.n_fallback; done += 65535) {
      const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(65535, p.n_fallback - done));
      const dim3 grid(static_cast<unsigned>((cols + kBlock - 1) / kBlock), n);
      merge_similarity_kernel<<<grid, kBlock, 0, stream>>>(
          s.fallback_rows.data() + p.fallback_begin + done, n, metric, q.offsets.data(), q.ids.data(),
          q.counts.data(), q.magnitudes.data(), q.distinct.data(), s.db.offsets.data(), s.db.ids.data(),
          s.db.counts.data(), s.db.magnitudes.data(), s.db.distinct.data(), static_cast<std::uint32_t>(cols), out,
          cols);
      MOLACCEL_CUDA_CHECK_LAUNCH("lingo merge_similarity_kernel");
    }
  }

  // Similarities of rows [r0, r1) x the loaded database slice into `dst` (ld = slice width; by
  // default s.sims, grown as needed; the pipeline passes its own result buffer, so nothing is
  // reallocated inside its loop: a cudaFree there would wait for the copy in flight). Inside
  // prepare_passes' loop the pass only launches kernels; otherwise its queries and plan are
  // uploaded first.
  void compute(WorkerState& s, std::size_t r0, std::size_t r1, float* dst = nullptr) const {
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
  struct PreparedScope {
    WorkerState* s;
    ~PreparedScope() { s->prepared.active = false; }
  };
  PreparedScope prepare_passes(WorkerState& s, const std::vector<std::size_t>& bounds) const {
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
    // Uploaded from ordinary memory, then one synchronisation. (An upload from a page-locked copy
    // without the synchronisation did not move the time before the first kernel in the fourth
    // round; the fifth round's form of it added a cudaMallocHost to every fresh worker state, such
    // as each time_to_host call's, and was reverted.)
    upload_range(s.groups, groups.data(), groups.size(), s.stream);
    upload_range(s.fallback_rows, fallback.data(), fallback.size(), s.stream);
    MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s.stream));
    s.prepare_marks[2] = now_seconds();
    s.prepared.active = true;
    return PreparedScope{&s};
  }

  // Runs `body(r0, r1)` over the rect's rows in passes that fit the dense budget; out of memory
  // halves the pass and retries (shrink, never drop).
  // `pass_rows` (time_kernels) overrides the budget's rows per pass.
  template <class Body>
  void in_passes(WorkerContext& ctx, const Rect& rect, Body&& body, std::size_t pass_rows = 0) const {
    WorkerState& s = state(ctx);
    std::size_t pass = std::max<std::size_t>(
        1, std::min(rect.rows(), pass_rows ? pass_rows
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

  // One line per pass (rows, compute and copy intervals in ms from the first event, copy GB/s),
  // then the totals: where the wall time of a pipelined dense copy goes.
  static void print_timeline(const cuda::Event& t0, std::vector<cuda::Event>& marks, const std::vector<double>& host,
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
      trace_message("lingo", fmt::format(fmt::runtime("pipeline pass {:3} rows {:6} compute {:8.3f}-{:8.3f} copy {:8.3f}-{:8.3f} "
                                         "({:5.1f} GB/s); host enqueues compute {:8.3f}-{:8.3f} copy {:8.3f}-{:8.3f}"),
                                         i, bounds[i + 1] - bounds[i], c0, c1, k0, k1,
                                         bytes / ((k1 - k0) * 1e-3) / 1e9, h(0), h(1), h(2), h(3)));
    }
    const double first_copy = marks[2].elapsed_ms_since(t0), last = marks[4 * n - 1].elapsed_ms_since(t0);
    trace_message("lingo", fmt::format(fmt::runtime("pipeline: {} passes, wall {:.3f} ms = host setup {:.3f} ms + events span "
                                       "{:.3f} ms + after; copy busy {:.3f} ms, before the first copy {:.3f} ms, "
                                       "gaps between copies {:.3f} ms, compute busy {:.3f} ms"),
                                       n, wall_s * 1e3, setup_s * 1e3, last, copy_busy, first_copy, gaps,
                                       compute_busy));
  }

  // The pipeline of dense_stream (see the header): pass i computes into result buffer i % 2 on
  // the compute stream, is converted there (fp16/u8), copied by the copy stream into pinned
  // staging buffer i % 2, and handed to the sink by a helper thread, while pass i + 1 computes.
  // With `direct` (page-locked destination: row r of the rect at direct + r * direct_ld bytes) the
  // copy stream writes each pass straight into it: no staging buffer and no host-side copy.
  void stream_passes(WorkerContext& ctx, const Rect& rect, OutputType type, const GpuJob::RowSink& sink,
                     std::uint8_t* direct = nullptr, std::size_t direct_ld = 0) const {
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
    if (pass >= 64) pass = pass / 64 * 64;  // whole query groups
    else if (pass >= 32) pass = pass / 32 * 32;
    pass = std::min({pass, rect.rows(), std::max<std::size_t>(1, budget(device) / cols)});
    std::optional<StagingLease> staging_lease;  // not needed when copying straight into `direct`
    if (!direct) staging_lease.emplace(pass * cols * elem);
    // Every per-pass buffer at its largest size up front (the queries and plans by prepare_passes):
    // no reallocation (and no cudaFree, which would wait for the copy in flight) inside the loop.
    // The passes: the first ones small and doubling up to `pass` (the default), so that the first
    // pass's computation, which no copy overlaps, is short (32,768^2 fp32 into page-locked memory
    // measured 79.7 ms against 80.4-80.9 ms with equal passes; Tuning::grow_passes).
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
        // Straight into result buffer `slot` (sized above). This used to swap s.sims with the
        // buffer; DeviceBuffer's move does not carry its capacity, so compute() reallocated it
        // every pass, and that cudaFree waited for the copy in flight: every pass's compute ran
        // after the previous copy, plus a 512 MiB cudaMalloc (the ~2.3 ms gaps of docs/lingo.md).
        compute(s, r, r1, s.pipe_sims[slot].data());
        if (timeline) host[4 * i + 1] = now_seconds();
        const std::uint8_t* source = reinterpret_cast<const std::uint8_t*>(s.pipe_sims[slot].data());
        if (type != OutputType::fp32) {
          s.pipe_packed[slot].resize(n * elem);
          const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, 4096));
          convert_kernel<<<blocks, kBlock, 0, s.stream>>>(s.pipe_sims[slot].data(), n, s.pipe_packed[slot].data(),
                                                          type == OutputType::fp16 ? 1 : 2);
          MOLACCEL_CUDA_CHECK_LAUNCH("lingo convert_kernel");
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
        StagingLease* staging = &*staging_lease;
        if (drains[slot].valid()) drains[slot].get();  // staging buffer `slot` handed off
        MOLACCEL_CUDA_TRY(
            cudaMemcpyAsync(staging->buffer(slot), source, n * elem, cudaMemcpyDeviceToHost, s.copy_stream));
        s.copied[slot].record(s.copy_stream);
        if (timeline) {
          host[4 * i + 3] = now_seconds();
          marks[4 * i + 3].record(s.copy_stream);
        }
        drains[slot] = std::async(std::launch::async, [&s, staging, &sink, slot, device,
                                                       row = r - rect.row_begin, rows = r1 - r] {
          cuda::DeviceGuard guard(device);
          s.copied[slot].synchronize();
          sink(row, rows, staging->buffer(slot));
        });
      }
      for (auto& d : drains)
        if (d.valid()) d.get();
      if (direct) MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s.copy_stream));
      if (timeline)
        print_timeline(t_begin, marks, host, host_t0, bounds, cols * elem, now_seconds() - wall_entry, setup_s);
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

  std::size_t budget(int device) const {
    std::size_t free_bytes = 0, total = 0;
    {
      cuda::DeviceGuard guard(device);
      if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) free_bytes = std::size_t{1} << 30;
    }
    // A quarter of free memory for the dense pass, at most 1 GiB of floats.
    return std::max<std::size_t>(1 << 20,
                                 std::min<std::size_t>(free_bytes / 4, std::size_t{1} << 30) / sizeof(float));
  }
};

GpuJob::GpuJob(const detail::Encoding& encoding, Metric metric, std::optional<Tuning> tuning)
    : impl_(std::make_unique<Impl>(encoding, metric, tuning)) {}
GpuJob::~GpuJob() = default;

std::size_t GpuJob::dense_budget(int device) const {
  return impl_->budget(device);
}

std::string GpuJob::kernel_name() const {
  return impl_->use_features ? "hashed-sorted-hp8l" : "merge";
}

double GpuJob::time_kernels(int device, const Rect& rect, float* results) const {
  cuda::DeviceGuard guard(device);
  WorkerContext& ctx = impl_->bench_context(device);
  WorkerState& s = impl_->state(ctx);
  impl_->ensure_db(s, rect.col_begin, rect.col_end);
  // Rows per pass, decided with the database upload (before the start event): the results stay in
  // device memory, so the whole rect is one pass (one launch: one prologue and one tail, where
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
  cuda::Event start, stop;
  // MOLACCEL_TRACE=lingo: each pass's kernels timed apart, to set them against the whole (host
  // planning, uploads and gaps between passes included).
  const bool timeline = trace_enabled("lingo");
  std::vector<std::pair<cuda::Event, cuda::Event>> marks;
  std::vector<std::size_t> rows;
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
        if (results) {  // tests: the pass's rows (in s.sims) to the host, outside any timing
          MOLACCEL_CUDA_TRY(cudaMemcpyAsync(results + (r0 - rect.row_begin) * rect.cols(), st.sims.data(),
                                            (r1 - r0) * rect.cols() * sizeof(float), cudaMemcpyDeviceToHost,
                                            st.stream));
          MOLACCEL_CUDA_TRY(cudaStreamSynchronize(st.stream));
        }
      },
      pass_rows);
  stop.record(s.stream);
  stop.synchronize();
  if (timeline) {
    const auto ms = [&](double t) { return (t - host_start) * 1e3; };
    trace_message("lingo", fmt::format(fmt::runtime("kernel loop, host from the start event: planning {:.3f}-{:.3f} ms, plan "
                                       "upload {:.3f}-{:.3f} ms, first pass enqueued {:.3f} ms"),
                                       ms(s.prepare_marks[0]), ms(s.prepare_marks[1]), ms(s.prepare_marks[1]),
                                       ms(s.prepare_marks[2]), ms(host_first_launched)));
    double kernels = 0;
    for (std::size_t i = 0; i < marks.size(); ++i) {
      const double ms = marks[i].second.elapsed_ms_since(marks[i].first);
      kernels += ms;
      trace_message("lingo", fmt::format(fmt::runtime("kernel loop pass {} rows {} {:.3f} ms ({:.1f} G/s), from start {:.3f} ms"),
                                         i, rows[i], ms, static_cast<double>(rows[i]) * rect.cols() / (ms * 1e-3) / 1e9,
                                         marks[i].first.elapsed_ms_since(start)));
    }
    trace_message("lingo", fmt::format(fmt::runtime("kernel loop: {} passes, kernels {:.3f} ms of {:.3f} ms"), marks.size(),
                                       kernels, stop.elapsed_ms_since(start)));
  }
  return stop.elapsed_ms_since(start) / 1000.0;
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
      cudaGetLastError();
      WorkerState& s = impl_->state(ctx);
      for (auto& b : s.pipe_sims) b.reset();
      for (auto& b : s.pipe_packed) b.reset();
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
    cudaGetLastError();
    WorkerState& s = impl_->state(ctx);
    for (auto& b : s.pipe_sims) b.reset();
    for (auto& b : s.pipe_packed) b.reset();
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
      const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, 4096));
      convert_kernel<<<blocks, kBlock, 0, s.stream>>>(s.sims.data(), n, s.pipe_packed[0].data(),
                                                      type == OutputType::fp16 ? 1 : 2);
      MOLACCEL_CUDA_CHECK_LAUNCH("lingo convert_kernel");
      source = s.pipe_packed[0].data();
    }
    if (n) MOLACCEL_CUDA_TRY(cudaMemcpyAsync(host.data(), source, n * elem, cudaMemcpyDeviceToHost, s.stream));
    s.stream.synchronize();
    sink(r0 - rect.row_begin, r1 - r0, host.data());
  });
}

double GpuJob::time_to_host(int device, const Rect& rect, OutputType type, void* out) const {
  WorkerInfo info;
  info.kind = WorkerInfo::Kind::gpu;
  info.device = device;
  WorkerContext ctx(info);
  cuda::DeviceGuard guard(device);
  WorkerState& s = impl_->state(ctx);
  impl_->ensure_db(s, rect.col_begin, rect.col_end);
  const std::size_t row_bytes = rect.cols() * element_bytes(type);
  const double t0 = now_seconds();
  dense_to(ctx, rect, type, static_cast<std::uint8_t*>(out), row_bytes);
  return now_seconds() - t0;
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
    select_top_k_kernel<<<static_cast<unsigned>(rows), kBlock, 0, s.stream>>>(
        s.sims.data(), rect.cols(), static_cast<std::uint32_t>(rect.cols()), static_cast<std::uint32_t>(take),
        static_cast<std::uint32_t>(r0), static_cast<std::uint32_t>(rect.col_begin), s.hits.data());
    MOLACCEL_CUDA_CHECK_LAUNCH("lingo select_top_k_kernel");
    Hit* dst = result.data() + (r0 - rect.row_begin) * take;
    MOLACCEL_CUDA_TRY(
        cudaMemcpyAsync(dst, s.hits.data(), rows * take * sizeof(DeviceHit), cudaMemcpyDeviceToHost, s.stream));
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
      const unsigned blocks =
          static_cast<unsigned>(std::min<std::size_t>((rows * cols + kBlock - 1) / kBlock, 8192));
      select_threshold_kernel<<<blocks, kBlock, 0, s.stream>>>(
          s.sims.data(), cols, static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols), threshold,
          self, static_cast<std::uint32_t>(r0), static_cast<std::uint32_t>(rect.col_begin), s.hits.data(),
          capacity, s.hit_count.data());
      MOLACCEL_CUDA_CHECK_LAUNCH("lingo select_threshold_kernel");
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

CopyRates measure_copy_rates(int device, std::size_t bytes) {
  cuda::DeviceGuard guard(device);
  cuda::Stream stream;
  cuda::DeviceBuffer<std::uint8_t> source(bytes);
  source.fill_zero(stream);
  StagingLease staging(bytes);
  CopyRates rates;
  constexpr int kCopies = 8;
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(staging.buffer(0), source.data(), bytes, cudaMemcpyDeviceToHost, stream));
  cuda::Event start, stop;
  start.record(stream);
  for (int i = 0; i < kCopies; ++i)
    MOLACCEL_CUDA_TRY(
        cudaMemcpyAsync(staging.buffer(i & 1), source.data(), bytes, cudaMemcpyDeviceToHost, stream));
  stop.record(stream);
  stop.synchronize();
  rates.d2h_pinned_gbs = kCopies * static_cast<double>(bytes) / (stop.elapsed_ms_since(start) * 1e-3) / 1e9;
  std::vector<std::uint8_t> host(bytes * 4, 1);
  parallel_rows_copy(host.data(), bytes, staging.buffer(0), 1, bytes, 0);  // warm
  const double t0 = now_seconds();
  for (int i = 0; i < kCopies; ++i)
    parallel_rows_copy(host.data() + (i & 3) * bytes, bytes, staging.buffer(i & 1), 1, bytes, 0);
  rates.host_copy_gbs = kCopies * static_cast<double>(bytes) / (now_seconds() - t0) / 1e9;
  return rates;
}

double measure_d2h_into(int device, void* destination, std::size_t destination_bytes, std::size_t chunk) {
  cuda::DeviceGuard guard(device);
  cuda::Stream stream;
  cuda::DeviceBuffer<std::uint8_t> source(chunk);
  source.fill_zero(stream);
  auto* dst = static_cast<std::uint8_t*>(destination);
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, source.data(), std::min(chunk, destination_bytes), cudaMemcpyDeviceToHost, stream));
  cuda::Event start, stop;
  start.record(stream);
  for (std::size_t off = 0; off < destination_bytes; off += chunk)
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst + off, source.data(), std::min(chunk, destination_bytes - off),
                                      cudaMemcpyDeviceToHost, stream));
  stop.record(stream);
  stop.synchronize();
  return static_cast<double>(destination_bytes) / (stop.elapsed_ms_since(start) * 1e-3) / 1e9;
}

}  // namespace molaccel::lingo::cuda_backend

// The similarity kernels: the hashed kernel (tanimoto and set: a block's query group in a
// shared-memory hash table, the database streamed through bit-sliced counters) and the per-pair
// merge kernel (vidal, and queries too large for a table), with their host-side launches.
#include <algorithm>

#include "lingo/cuda/block_pieces.cuh"
#include "lingo/cuda/kernels.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::lingo::cuda_backend {
namespace {

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
                             const std::uint32_t* q_features, const std::uint32_t* q_sizes,
                             InterleavedSlice db, const std::uint64_t* db_offsets,
                             const std::uint32_t* db_sizes, std::uint32_t n_cols, int log2_slots, float* out,
                             std::size_t ld) {
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
  const auto walk = [&](std::uint32_t pos, std::uint32_t(&planes)[Planes]) {
    const std::uint32_t rows = (db.length[pos & ~31u] + 3u) & ~3u;  // lane 0: the chunk's longest
    const std::uint32_t* feature = db.features + db.warp_base[pos / 32] + lane;
#pragma unroll
    for (int b = 0; b < Planes; ++b) planes[b] = 0;
    std::uint32_t k = 0;
    const auto load = [&](std::uint32_t kk, int u) { return __ldg(feature + 32 * (kk + u)); };
    // The masks of features kk .. kk + 7: the eight loads issued before the lookups.
    const auto masks8 = [&](std::uint32_t kk, std::uint32_t(&m8)[8]) {
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
    // Chunk `warp` of window 2p: counts straight to shared memory.
    {
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

void allow_large_tables() {
  const int large = static_cast<int>(table_bytes(kLargeTableSlots));
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(hashed_similarity_kernel<11>, attr, large));
  MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(hashed_similarity_kernel<21>, attr, large));
}

void launch_hashed(const QueryGroup* groups, std::size_t n_groups, unsigned splits, std::uint32_t slots,
                   bool wide, const FeatureSlice& queries, const InterleavedSlice& db,
                   const std::uint64_t* db_offsets, const std::uint32_t* db_sizes, std::uint32_t n_cols,
                   float* out, std::size_t ld, cudaStream_t stream) {
  if (n_groups == 0) return;
  // grid.x is limited to 2^31-1 groups, far beyond any pass.
  const dim3 grid(static_cast<unsigned>(n_groups), splits);
  // Counts need 11 bit planes when every database molecule has < 2,048 features, else 21.
  (wide ? hashed_similarity_kernel<21>
        : hashed_similarity_kernel<11>)<<<grid, kBlock, table_bytes(slots), stream>>>(
      groups, queries.offsets, queries.features, queries.sizes, db, db_offsets, db_sizes, n_cols,
      log2_of(slots), out, ld);
  MOLACCEL_CUDA_CHECK_LAUNCH("lingo hashed_similarity kernel");
}

void launch_merge(const std::uint32_t* rows, std::uint32_t n_rows, Metric metric, const CountSlice& queries,
                  const CountSlice& db, std::uint32_t n_cols, float* out, std::size_t ld,
                  cudaStream_t stream) {
  for (std::uint32_t done = 0; done < n_rows; done += 65535) {
    const std::uint32_t n = std::min<std::uint32_t>(65535, n_rows - done);
    const dim3 grid((n_cols + kBlock - 1) / kBlock, n);
    merge_similarity_kernel<<<grid, kBlock, 0, stream>>>(
        rows + done, n, metric, queries.offsets, queries.ids, queries.counts, queries.magnitudes,
        queries.distinct, db.offsets, db.ids, db.counts, db.magnitudes, db.distinct, n_cols, out, ld);
    MOLACCEL_CUDA_CHECK_LAUNCH("lingo merge_similarity_kernel");
  }
}

}  // namespace molaccel::lingo::cuda_backend

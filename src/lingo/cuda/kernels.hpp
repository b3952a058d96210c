// The CUDA backend's kernels as the job layer sees them: shared constants and layouts, and one
// host function per launch. similarity_kernels.cu holds the similarity kernels (hashed and merge),
// select_kernels.cu the selection and conversion kernels; their block pieces are in
// block_pieces.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::cuda_backend {

constexpr std::uint32_t kEmptySlot = 0xffffffffu;  // a free table slot, and the layout's padding feature
constexpr int kBlock = 256;                        // threads per block, every kernel
constexpr std::uint32_t kQueriesPerGroup = 32;
constexpr std::uint32_t kSmallTableSlots = 4096;   // 32 KiB table: groups of <= 2048 features
constexpr std::uint32_t kLargeTableSlots = 16384;  // 128 KiB table: one query of <= 8192 features
constexpr std::uint32_t kPairWindow = 2 * kBlock;  // database columns per block step (a window pair)
constexpr std::uint32_t kSelectCapacity = 4096;    // top-k candidates sorted in shared memory per row

struct DeviceHit {
  std::uint32_t query, target;
  float similarity;
};
static_assert(sizeof(DeviceHit) == sizeof(Hit), "device and host hits share a layout");

// Consecutive query rows whose features share one block's hash table.
struct QueryGroup {
  std::uint32_t first_row;  // row within the query slice on the device
  std::uint32_t count;      // <= 32
};

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

// A set of molecules on the device as CSR feature lists (the hashed kernel's query side).
struct FeatureSlice {
  const std::uint64_t* offsets;
  const std::uint32_t* features;
  const std::uint32_t* sizes;  // magnitude (tanimoto) or distinct count (set)
};

// A set of molecules on the device as sorted (Lingo id, count) lists (the merge kernel).
struct CountSlice {
  const std::uint64_t* offsets;
  const std::uint32_t* ids;
  const std::uint32_t* counts;
  const std::uint32_t* magnitudes;
  const std::uint32_t* distinct;
};

// Once per device context: the hashed kernels may use the large table's shared memory.
void allow_large_tables();

// Query groups [groups, groups + n_groups), all with tables of `slots` slots, against the n_cols
// database columns: group g's rows of `out` (row = QueryGroup::first_row, ld floats per row).
// `splits` blocks per group share the columns; `wide` when some database molecule has >= 2,048
// features (21 bit planes instead of 11).
void launch_hashed(const QueryGroup* groups, std::size_t n_groups, unsigned splits, std::uint32_t slots,
                   bool wide, const FeatureSlice& queries, const InterleavedSlice& db,
                   const std::uint64_t* db_offsets, const std::uint32_t* db_sizes, std::uint32_t n_cols,
                   float* out, std::size_t ld, cudaStream_t stream);

// The per-pair merge for query rows rows[0, n_rows) (rows: slice rows; results in row `row` of
// `out`): vidal, and queries too large for a table.
void launch_merge(const std::uint32_t* rows, std::uint32_t n_rows, Metric metric, const CountSlice& queries,
                  const CountSlice& db, std::uint32_t n_cols, float* out, std::size_t ld,
                  cudaStream_t stream);

// Per row of `sims` (rows x n_cols, ld floats per row): its best `take` hits, best first (ties: lower
// column), sorted when take <= kSelectCapacity (larger: unsorted, the caller sorts). Hits carry
// row0 + row and col0 + column.
void launch_top_k(const float* sims, std::size_t ld, std::size_t rows, std::uint32_t n_cols,
                  std::uint32_t take, std::uint32_t row0, std::uint32_t col0, DeviceHit* out,
                  cudaStream_t stream);

// Every element of `sims` >= threshold (upper_only: only col0 + c > row0 + r) into out[0, capacity),
// counting all of them in *count (the caller grows the buffer and selects again when it overflows).
void launch_threshold(const float* sims, std::size_t ld, std::uint32_t rows, std::uint32_t n_cols,
                      float threshold, bool upper_only, std::uint32_t row0, std::uint32_t col0,
                      DeviceHit* out, unsigned long long capacity, unsigned long long* count,
                      cudaStream_t stream);

// n fp32 similarities as fp16 bits or u8 (the quantisations of similarity_math.hpp) into `out`.
void launch_convert(const float* in, std::size_t n, std::uint8_t* out, OutputType type, cudaStream_t stream);

}  // namespace molaccel::lingo::cuda_backend

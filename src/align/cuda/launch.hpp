// Kernel launches of the CUDA backend (defined in kernels.cu, the one translation unit that
// instantiates the kernels of sw_kernels.cuh). Host code above this layer sees plain pointers only.
#pragma once

#include <cuda_runtime.h>

namespace molaccel::align::gpu_entry {

// Query rows per strip of the inter-task kernel and the blocks of 128 threads per SM its register
// cap guarantees: R = 32 with 3 blocks measured fastest (see docs/align.md).
constexpr int kStripRows = 32;
constexpr int kInterMinBlocks = 3;
constexpr int kInterThreads = 128;    // per block (4 warps: one work item)
constexpr int kIntraThreads = 128;    // per block of the intra-task kernels (one job per warp)
constexpr int kIntraRowsPerLane = 8;  // the intra-task kernel's 32 lanes x 8 = 256 query rows per pass
constexpr int kWarpSize = 32;
constexpr int kMatrixDim = 32;  // padded alphabet (row/column 31 = padding)

struct GapCosts {
  int open, extend;
};

// One inter-task launch for every (block of 4 warps, query pair) work item of a chunk.
struct InterLaunch {
  const unsigned* layout;  // per warp w, quad j, lane l: the 4 residues of chunk subject 32w+l
  const unsigned long long* warp_base;
  const unsigned* warp_quads;
  uint2* boundary;
  unsigned long long boundary_stride;  // uint2 per query pair (0 when every pair fits one strip)
  int warps;
  const uint2* items;  // (block, pair), most expensive first
  int item_count;
  const unsigned* profiles;
  const unsigned long long* pair_profile;
  const int* pair_m_pad;
  unsigned* best;
  unsigned long long best_stride;  // words per query pair
};
void launch_inter(const InterLaunch& a, GapCosts gaps, cudaStream_t stream);

// Exact 32-bit scores of one query (device pointer) against `jobs` subjects.
void launch_intra(const unsigned char* residues, const unsigned long long* offset, const unsigned* length,
                  const unsigned long long* scratch_offset, int2* rows, int jobs, const unsigned char* query,
                  int m, const int* matrix, GapCosts gaps, int* best, cudaStream_t stream);

// Jobs (subject, query) in one launch; best[query * best_stride + subject].
struct IntraJobsLaunch {
  const unsigned char* residues;
  const unsigned long long* subject_offset;
  const unsigned* subject_length;
  const uint2* jobs;
  const unsigned long long* job_scratch;
  int2* scratch;
  int job_count;
  const unsigned char* queries;
  const unsigned long long* query_offset;
  const unsigned* query_length;
  const int* matrix;
  int* best;
  unsigned long long best_stride;
};
void launch_intra_jobs(const IntraJobsLaunch& a, GapCosts gaps, cudaStream_t stream);

// Loads the kernels above into the current device's context (CUDA loads a kernel lazily, at its
// first launch, otherwise).
void load_kernels();

}  // namespace molaccel::align::gpu_entry

// The building blocks of the generated program kernels on their own (linalg/cuda/grid_blocks.cuh,
// program_blocks.cuh and cluster_blocks.cuh, compiled here by nvcc from the same text NVRTC
// gets): a block's staged sums, a cooperative grid's partials, barrier and gathered totals, and a
// cluster's pushed sums, barrier and distributed shared memory, checked against host sums and for
// the same bits in every thread.
#include <cmath>
#include <vector>

#include "runtime/cuda/cuda_support.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

#define MOLACCEL_GRID_BLOCKS(...) __VA_ARGS__
#include "linalg/cuda/grid_blocks.cuh"
#include "linalg/cuda/program_blocks.cuh"
// Thread-block clusters from sm_90 on (the host pass compiles no device code).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define MOLACCEL_TEST_CLUSTERS 1
#include "linalg/cuda/cluster_blocks.cuh"
#endif
#undef MOLACCEL_GRID_BLOCKS

constexpr int kSlots = 3;

// Thread t's value in slot s (not exactly summable: the order matters).
__host__ __device__ double value(long long t, int s) {
  return 1.0 / double(t + 3) + 0.1 * s;
}

__global__ void block_totals(double* out) {
  __shared__ double part[2 * 32 * kSlots];
  for (int round = 0; round < 2; ++round) {  // both halves, as the kernels alternate them
    double* half = part + round * 32 * kSlots;
    for (int s = 0; s < kSlots; ++s) mp_stage(value(threadIdx.x, s) * (round + 1), half, s);
    __syncthreads();
    for (int s = 0; s < kSlots; ++s)
      out[(round * blockDim.x + threadIdx.x) * kSlots + s] = mp_block_total(half, s);
  }
}

__global__ void grid_totals(double* partials, unsigned long long* counter, double* out) {
  __shared__ double part[32 * kSlots], totals[kSlots];
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (int s = 0; s < kSlots; ++s) mp_stage(value(t, s), part, s);
  __syncthreads();
  mp_publish_block_sums(part, kSlots, partials);
  molaccel_grid_barrier(counter);
  mp_gather_totals(partials, kSlots, totals);
  __syncthreads();
  for (int s = 0; s < kSlots; ++s) out[t * kSlots + s] = totals[s] + mp_safe_div(1.0, 0.0);
}

// One cluster (gridDim.x blocks): both halves of the pushed sums, as the kernels alternate them,
// and each block's rank read by the next block through distributed shared memory.
__global__ void cluster_totals(double* out, int* neighbour) {
#ifdef MOLACCEL_TEST_CLUSTERS
  __shared__ double part[2 * 32 * kSlots], pushed[2 * 16 * kSlots];
  __shared__ int rank;
  if (threadIdx.x == 0) rank = int(blockIdx.x);
  mp_cluster_barrier();  // every block started before any touches another's memory
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (int round = 0; round < 2; ++round) {
    double* half = part + round * 32 * kSlots;
    double* to = pushed + round * 16 * kSlots;
    for (int s = 0; s < kSlots; ++s) mp_stage(value(t, s) * (round + 1), half, s);
    __syncthreads();
    mp_push_block_sums(half, kSlots, to);
    mp_cluster_barrier();
    for (int s = 0; s < kSlots; ++s)
      out[((long long)round * gridDim.x * blockDim.x + t) * kSlots + s] = mp_cluster_total(to, s);
  }
  if (threadIdx.x == 0) neighbour[blockIdx.x] = *mp_map(&rank, (blockIdx.x + 1) % gridDim.x);
  mp_cluster_barrier();  // no block leaves while another may read its memory
#else
  __trap();
#endif
}

double host_sum(long long threads, int s) {
  double sum = 0;
  for (long long t = 0; t < threads; ++t) sum += value(t, s);
  return sum;
}

// Sums of up to 1e5 terms in another order than the host's: 1e-12 relative.
TEST(LinalgProgramBlocksGpu, BlockTotalsAreTheSameInEveryThread) {
  MOLACCEL_REQUIRE_GPU();
  for (unsigned threads : {32u, 96u, 256u, 1024u}) {
    cuda::DeviceBuffer<double> out(2 * threads * kSlots);
    block_totals<<<1, threads>>>(out.data());
    MOLACCEL_CUDA_CHECK_LAUNCH("block_totals");
    const auto got = out.download();
    for (int round = 0; round < 2; ++round)
      for (unsigned t = 0; t < threads; ++t)
        for (int s = 0; s < kSlots; ++s) {
          const double v = got[(round * threads + t) * kSlots + s];
          ASSERT_EQ(v, got[std::size_t(round * threads) * kSlots + s]) << threads << " " << t;
          ASSERT_NEAR(v, (round + 1) * host_sum(threads, s), 1e-12 * std::fabs(v)) << threads;
        }
  }
}

TEST(LinalgProgramBlocksGpu, GridTotalsAreTheSameInEveryThread) {
  MOLACCEL_REQUIRE_GPU();
  cuda::DeviceBuffer<unsigned long long> counter(1);
  for (int blocks : {1, 7, 40, 300}) {
    // The counter is a multiple of the grid's blocks between barriers only for one grid size: a
    // solve zeroes it before its launch (program_gpu.cpp), and so does each size here.
    counter.fill_zero();
    int per_sm = 0, sms = 0;
    MOLACCEL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_totals, 256, 0));
    MOLACCEL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    if (blocks > per_sm * sms) continue;
    cuda::DeviceBuffer<double> partials(std::size_t(blocks) * kSlots),
        out(std::size_t(blocks) * 256 * kSlots);
    double* p_partials = partials.data();
    unsigned long long* p_counter = counter.data();
    double* p_out = out.data();
    void* args[] = {&p_partials, &p_counter, &p_out};
    MOLACCEL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(grid_totals),
                                                  dim3(unsigned(blocks)), dim3(256), args, 0, nullptr));
    MOLACCEL_CUDA_CHECK_LAUNCH("grid_totals");
    const auto got = out.download();
    for (std::size_t t = 0; t < std::size_t(blocks) * 256; ++t)
      for (int s = 0; s < kSlots; ++s) {
        const double v = got[t * kSlots + s];
        ASSERT_EQ(v, got[std::size_t(s)]) << blocks << " " << t;
        ASSERT_NEAR(v, host_sum(blocks * 256LL, s), 1e-12 * std::fabs(v)) << blocks;
      }
  }
}

// Clusters of 1 to 16 blocks (above 8: the non-portable size, as program_gpu.cpp allows).
TEST(LinalgProgramBlocksGpu, ClusterTotalsAreTheSameInEveryThread) {
  MOLACCEL_REQUIRE_GPU();
  int major = 0;
  MOLACCEL_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major < 9) GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(cluster_totals, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (unsigned blocks : {1u, 2u, 5u, 8u, 16u}) {
    const unsigned threads = 256;
    cuda::DeviceBuffer<double> out(2 * std::size_t(blocks) * threads * kSlots);
    cuda::DeviceBuffer<int> neighbour(blocks);
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute attr{};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(threads);
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = blocks;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    MOLACCEL_CUDA_TRY(cudaLaunchKernelEx(&config, cluster_totals, out.data(), neighbour.data()));
    MOLACCEL_CUDA_CHECK_LAUNCH("cluster_totals");
    const auto got = out.download();
    const auto ranks = neighbour.download();
    const std::size_t all = std::size_t(blocks) * threads;
    for (int round = 0; round < 2; ++round)
      for (std::size_t t = 0; t < all; ++t)
        for (int s = 0; s < kSlots; ++s) {
          const double v = got[(round * all + t) * kSlots + s];
          ASSERT_EQ(v, got[round * all * kSlots + std::size_t(s)]) << blocks << " " << t;
          ASSERT_NEAR(v, (round + 1) * host_sum(blocks * (long long)threads, s), 1e-12 * std::fabs(v))
              << blocks;
        }
    for (unsigned b = 0; b < blocks; ++b) EXPECT_EQ(ranks[b], int((b + 1) % blocks)) << blocks;
  }
}

}  // namespace
}  // namespace molaccel

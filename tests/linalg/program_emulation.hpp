// A CPU emulation of the CUDA the program emitter writes (program_cuda.cpp): one std::thread per
// CUDA thread, std::barrier for __syncthreads and the grid barrier. It checks the generated
// kernel's logic (segments, in-place scalar names, renamed buffers, registers of the resident
// kind, staged sums and block partials, the deferred scalars, the stop tests, one block or
// several over their rows) in every form (KernelShape) without a GPU; not memory ordering or the
// warp butterflies, which only a GPU run checks (test_program_gpu.cpp).
#pragma once

#include <math.h>
#include <barrier>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace molaccel::linalg::emulation {

// The CUDA math functions the kernels call (hiding linalg's expression builders of the same names).
using std::cos;
using std::exp;
using std::fabs;
using std::fmax;
using std::fmin;
using std::log;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;

struct Dim3 {
  unsigned x = 0;
};
inline thread_local Dim3 threadIdx, blockIdx;
inline Dim3 blockDim, gridDim;
inline std::barrier<>* grid_barrier = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> block_barriers;

// Shared memory: the generated kernel's `__shared__ double name[count];` becomes
// `double* name = block_shared("name", count);` (program_emulation_gen.cpp): one array per block.
inline std::mutex shared_mutex;
inline std::vector<std::map<std::string, std::vector<double>>> shared_arrays;
inline double* block_shared(const char* name, std::size_t count) {
  std::lock_guard<std::mutex> lock(shared_mutex);
  auto& a = shared_arrays[blockIdx.x][name];
  if (a.empty()) a.assign(count, 0.0);
  return a.data();
}

// The shared exchange (`extern __shared__ T mp_exchange[];`, KernelShape::shared_exchange) becomes
// a per-block array of kExchangeValues (run_emulated checks exchange_buffers x n fits).
inline constexpr std::size_t kExchangeValues = std::size_t(1) << 14;

inline void __syncthreads() {
  block_barriers[blockIdx.x]->arrive_and_wait();
}
inline void molaccel_grid_barrier(unsigned long long*) {
  grid_barrier->arrive_and_wait();
}
// The sums of program_blocks.cuh with warps of one thread (emulated blocks have at most 32
// threads): the same slots, stages, partials and totals, without the butterflies.
inline void mp_stage(double v, double* part, int slot) {
  part[slot * 32 + int(threadIdx.x)] = v;
}
inline double mp_block_total(const double* part, int slot) {
  double s = 0;
  for (unsigned w = 0; w < blockDim.x; ++w) s += part[slot * 32 + int(w)];
  return s;
}
inline void mp_publish_block_sums(const double* part, int slots, double* partials) {
  for (int s = int(threadIdx.x); s < slots; s += int(blockDim.x))
    partials[std::size_t(s) * gridDim.x + blockIdx.x] = mp_block_total(part, s);
}
inline void mp_gather_totals(const double* partials, int slots, double* totals) {
  for (int s = int(threadIdx.x); s < slots; s += int(blockDim.x)) {
    double v = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) v += partials[std::size_t(s) * gridDim.x + b];
    totals[s] = v;
  }
}
inline double mp_safe_div(double a, double b) {
  return b == 0.0 ? 0.0 : a / b;
}
template <class P>
P __ldcg(const P* p) {
  return *p;
}

// The cluster form (cluster_blocks.cuh): the emulated launch is the cluster, blockIdx.x its rank.
// mp_map finds the shared array `p` points into and gives the same place in block `rank`'s.
inline double* mp_map(double* p, unsigned rank) {
  std::lock_guard<std::mutex> lock(shared_mutex);
  for (auto& [name, a] : shared_arrays[blockIdx.x])
    if (p >= a.data() && p < a.data() + a.size()) {
      auto& other = shared_arrays[rank][name];
      if (other.empty()) other.assign(a.size(), 0.0);  // before that block declared it
      return other.data() + (p - a.data());
    }
  throw std::logic_error("mp_map: not a shared array");
}
inline void mp_cluster_barrier() {
  grid_barrier->arrive_and_wait();
}
inline void mp_push_block_sums(const double* part, int slots, double* pushed) {
  for (int s = int(threadIdx.x); s < slots; s += int(blockDim.x))
    for (unsigned b = 0; b < gridDim.x; ++b)
      mp_map(pushed, b)[s * 16 + int(blockIdx.x)] = mp_block_total(part, s);
}
inline double mp_cluster_total(const double* pushed, int slot) {
  double v = 0;
  for (unsigned b = 0; b < gridDim.x; ++b) v += pushed[slot * 16 + int(b)];
  return v;
}

using T = double;
using EmulatedKernel = void (*)(const int*, const int*, const T*, long long, T*, double*, double*,
                                unsigned long long*, double*, long long*, int);

// Runs `kernel` on blocks x threads emulated CUDA threads (threads <= 32: warps of one thread).
template <class Launch>
void emulate(unsigned blocks, unsigned threads, Launch launch) {
  if (threads > 32) throw std::invalid_argument("emulate: at most 32 threads per block");
  shared_arrays.assign(blocks, {});
  blockDim.x = threads;
  gridDim.x = blocks;
  std::barrier<> grid(std::ptrdiff_t(blocks * threads));
  grid_barrier = &grid;
  block_barriers.clear();
  for (unsigned b = 0; b < blocks; ++b) block_barriers.push_back(std::make_unique<std::barrier<>>(threads));
  std::vector<std::thread> all;
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < threads; ++t)
      all.emplace_back([&launch, b, t] {
        blockIdx.x = b;
        threadIdx.x = t;
        launch();
      });
  for (auto& th : all) th.join();
}

}  // namespace molaccel::linalg::emulation

#define __global__
#define __launch_bounds__(threads)
#define __device__
#define __forceinline__ inline

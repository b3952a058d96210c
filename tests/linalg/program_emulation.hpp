// A CPU emulation of the CUDA the program emitter writes (program_cuda.cpp): one std::thread per
// CUDA thread, std::barrier for __syncthreads and the grid barrier. It checks the generated
// kernel's logic (segments, in-place scalar names, renamed buffers, block partials, the
// deferred scalars, the stop tests, several blocks over strided rows) without a GPU; not
// memory ordering, which only a GPU run checks (test_program_gpu.cpp).
#pragma once

#include <math.h>
#include <barrier>
#include <cmath>
#include <memory>
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
inline std::vector<std::vector<double>> block_values;

inline void molaccel_grid_barrier(unsigned long long*) {
  grid_barrier->arrive_and_wait();
}
inline void mp_block_sum(double v, double* out) {
  block_values[blockIdx.x][threadIdx.x] = v;
  block_barriers[blockIdx.x]->arrive_and_wait();
  if (threadIdx.x == 0) {
    double s = 0;
    for (double x : block_values[blockIdx.x]) s += x;
    *out = s;
  }
  block_barriers[blockIdx.x]->arrive_and_wait();
}
inline double mp_grid_total(const double* partials) {
  double s = 0;
  for (unsigned b = 0; b < gridDim.x; ++b) s += partials[b];
  return s;
}
inline double mp_safe_div(double a, double b) {
  return b == 0.0 ? 0.0 : a / b;
}
template <class P>
P __ldcg(const P* p) {
  return *p;
}

using T = double;
using EmulatedKernel = void (*)(const int*, const int*, const T*, long long, T*, double*, double*,
                                unsigned long long*, double*, long long*, int);

// Runs `kernel` on blocks x threads emulated CUDA threads.
template <class Launch>
void emulate(unsigned blocks, unsigned threads, Launch launch) {
  blockDim.x = threads;
  gridDim.x = blocks;
  std::barrier<> grid(std::ptrdiff_t(blocks * threads));
  grid_barrier = &grid;
  block_barriers.clear();
  for (unsigned b = 0; b < blocks; ++b) block_barriers.push_back(std::make_unique<std::barrier<>>(threads));
  block_values.assign(blocks, std::vector<double>(threads, 0.0));
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

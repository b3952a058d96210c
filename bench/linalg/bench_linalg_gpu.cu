// GPU pieces of bench_linalg that need CUDA headers: the measured copy bandwidth (the limit
// every row is compared with) and the cuBLAS baseline of the paper's BLAS-2 example.
#include <cublas_v2.h>

#include <vector>

#include "common/harness.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::bench {

double measured_copy_bandwidth(int device) {
  cuda::DeviceGuard guard(device);
  const std::size_t n = std::size_t{1} << 27;  // 1 GiB of doubles
  cuda::DeviceBuffer<double> a(n), b(n);
  cuda::Stream stream;
  a.fill_zero(stream);
  cuda::Event e0, e1;
  const Timing t = measure_with(
      [&] {
        e0.record(stream);
        MOLACCEL_CUDA_TRY(
            cudaMemcpyAsync(b.data(), a.data(), n * sizeof(double), cudaMemcpyDeviceToDevice, stream));
        e1.record(stream);
        e1.synchronize();
        return e1.elapsed_ms_since(e0) / 1e3;
      },
      2, 9);
  const double bytes = 2.0 * double(n) * sizeof(double);
  print_row({.benchmark = "linalg/copy-bandwidth",
             .device = gpu_list().at(std::size_t(device)).name,
             .size = "1 GiB",
             .timing = t,
             .work = bytes,
             .work_unit = "B",
             .bytes = bytes,
             .note = "cudaMemcpy device to device, read + write"});
  return bytes / t.median_s;
}

#define BENCH_CUBLAS_TRY(expr)                                                                          \
  do {                                                                                                  \
    if ((expr) != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS call failed: " #expr, __FILE__, __LINE__); \
  } while (0)

// x = A (ip(y, y + z) y + z) as separate cuBLAS calls (copy, axpy, dot, copy, axpy, gemv); the
// inner product stays on the device (pointer mode device), so there is no host round trip.
void blas2_cublas_baseline(int device, std::size_t n, const std::string& device_name) {
  cuda::DeviceGuard guard(device);
  cuda::Stream stream;
  cublasHandle_t handle = nullptr;
  BENCH_CUBLAS_TRY(cublasCreate(&handle));
  BENCH_CUBLAS_TRY(cublasSetStream(handle, stream));
  BENCH_CUBLAS_TRY(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE));
  cuda::DeviceBuffer<double> a(n * n), x(n), y(n), z(n), w(n), scalars(2);
  a.upload(std::vector<double>(n * n, 1.0 / double(n)), stream);
  y.upload(std::vector<double>(n, 0.5), stream);
  z.upload(std::vector<double>(n, 0.25), stream);
  scalars.upload(std::vector<double>{1.0, 0.0}, stream);  // one, zero
  const int m = static_cast<int>(n);
  const int reps = n <= 1000 ? 200 : 20;
  Timing t = measure(
      [&] {
        for (int i = 0; i < reps; ++i) {
          BENCH_CUBLAS_TRY(cublasDcopy(handle, m, z.data(), 1, w.data(), 1));
          BENCH_CUBLAS_TRY(cublasDaxpy(handle, m, scalars.data(), y.data(), 1, w.data(), 1));  // w = y + z
          BENCH_CUBLAS_TRY(cublasDdot(handle, m, y.data(), 1, w.data(), 1, x.data()));         // x[0] = ip
          BENCH_CUBLAS_TRY(cublasDcopy(handle, m, z.data(), 1, w.data(), 1));
          BENCH_CUBLAS_TRY(cublasDaxpy(handle, m, x.data(), y.data(), 1, w.data(), 1));  // w = ip y + z
          BENCH_CUBLAS_TRY(cublasDgemv(handle, CUBLAS_OP_T, m, m, scalars.data(), a.data(), m, w.data(), 1,
                                       scalars.data() + 1, x.data(), 1));  // x = A w
        }
        stream.synchronize();
      },
      1, 5);
  t.median_s /= reps;
  t.min_s /= reps;
  t.max_s /= reps;
  print_row({.benchmark = "linalg/blas2-paper/cublas-separate",
             .device = device_name,
             .size = std::to_string(n) + "x" + std::to_string(n),
             .timing = t,
             .work = 8.0 * double(n) * double(n),
             .work_unit = "B",
             .bytes = 8.0 * double(n) * double(n),
             .note = "6 cuBLAS calls"});
  cublasDestroy(handle);
}

}  // namespace molaccel::bench

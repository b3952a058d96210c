// CUDA-side runtime helpers: error checking, RAII for device memory, pinned memory, streams,
// events and JIT-loaded libraries. Include only from CUDA translation units (src/*/cuda/).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line);
void report_cuda_error_nothrow(cudaError_t code, const char* expr, const char* file, int line);
// MOLACCEL_CUDA_DEBUG_SYNC=1 makes every checked launch synchronise (finds the failing kernel).
bool debug_sync_enabled();
void check_launch(const char* what, const char* file, int line);

}  // namespace molaccel::cuda

// Throws molaccel::CudaError with the expression, file and line when a CUDA call fails.
#define MOLACCEL_CUDA_TRY(expr)                                                        \
  do {                                                                                 \
    cudaError_t molaccel_status_ = (expr);                                             \
    if (molaccel_status_ != cudaSuccess)                                               \
      ::molaccel::cuda::throw_cuda_error(molaccel_status_, #expr, __FILE__, __LINE__); \
  } while (0)
// For destructors: logs instead of throwing.
#define MOLACCEL_CUDA_TRY_NOTHROW(expr)                                                         \
  do {                                                                                          \
    cudaError_t molaccel_status_ = (expr);                                                      \
    if (molaccel_status_ != cudaSuccess)                                                        \
      ::molaccel::cuda::report_cuda_error_nothrow(molaccel_status_, #expr, __FILE__, __LINE__); \
  } while (0)
// After a <<<>>> launch: checks the launch error, and synchronises in debug-sync mode.
#define MOLACCEL_CUDA_CHECK_LAUNCH(what) ::molaccel::cuda::check_launch(what, __FILE__, __LINE__)

namespace molaccel::cuda {

// Makes `device` current for the scope, restoring the previous device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Device memory for n elements of T on the current device (remembers it for freeing).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);  // else the next resize() reallocates (and cudaFree syncs)
      device_ = o.device_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Reallocates only when growing; contents are not preserved.
  void resize(std::size_t n) {
    if (n <= capacity_ && ptr_) {
      size_ = n;
      return;
    }
    reset();
    if (n == 0) return;
    MOLACCEL_CUDA_TRY(cudaGetDevice(&device_));
    MOLACCEL_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
    size_ = capacity_ = n;
  }
  void reset() noexcept {
    if (ptr_) {
      int current = -1;
      cudaGetDevice(&current);
      if (current != device_) cudaSetDevice(device_);
      MOLACCEL_CUDA_TRY_NOTHROW(cudaFree(ptr_));
      if (current != device_ && current >= 0) cudaSetDevice(current);
    }
    ptr_ = nullptr;
    size_ = capacity_ = 0;
  }
  void copy_from_host(const T* src, std::size_t n, cudaStream_t stream = nullptr) {
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(ptr_, src, n * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  void copy_to_host(T* dst, std::size_t n, cudaStream_t stream = nullptr) const {
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, ptr_, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  }
  void upload(const std::vector<T>& v, cudaStream_t stream = nullptr) {
    resize(v.size());
    if (!v.empty()) copy_from_host(v.data(), v.size(), stream);
  }
  std::vector<T> download(cudaStream_t stream = nullptr) const {
    std::vector<T> v(size_);
    if (size_) {
      copy_to_host(v.data(), size_, stream);
      MOLACCEL_CUDA_TRY(cudaStreamSynchronize(stream));
    }
    return v;
  }
  void fill_zero(cudaStream_t stream = nullptr) {
    if (size_) MOLACCEL_CUDA_TRY(cudaMemsetAsync(ptr_, 0, size_ * sizeof(T), stream));
  }

  T* data() noexcept { return ptr_; }
  const T* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  int device() const noexcept { return device_; }

 private:
  T* ptr_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
  int device_ = -1;
};

// Page-locked host memory for n objects of T (fast, asynchronous copies), a typed view of a block
// from a PinnedPool: an engine passes its Resources' pool (WorkerContext::pinned_pool), so staging
// is reused from job to job; without a pool the block is the buffer's own. Growing takes a larger
// block and hands the old one back; the contents are not kept.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t n, PinnedPool* pool = nullptr) { resize(n, pool); }
  void resize(std::size_t n, PinnedPool* pool = nullptr) {
    if (n * sizeof(T) <= block_.bytes() && block_) {
      size_ = n;
      return;
    }
    reset();
    if (n == 0) return;
    block_ = pool ? pool->take(n * sizeof(T)) : PinnedPool().take(n * sizeof(T));
    size_ = n;
  }
  void reset() noexcept {
    block_ = PinnedBlock{};
    size_ = 0;
  }
  T* data() noexcept { return block_.as<T>(); }
  const T* data() const noexcept { return block_.as<T>(); }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  const T& operator[](std::size_t i) const noexcept { return data()[i]; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return block_.bytes() / sizeof(T); }

 private:
  PinnedBlock block_;
  std::size_t size_ = 0;
};

class Stream {
 public:
  Stream();  // non-blocking stream on the current device
  ~Stream();
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const noexcept { return s_; }
  operator cudaStream_t() const noexcept { return s_; }
  void synchronize() const;

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const noexcept { return e_; }
  void record(cudaStream_t stream = nullptr);
  void synchronize() const;
  // Milliseconds from `start` to this event (both recorded, this one completed).
  float elapsed_ms_since(const Event& start) const;

 private:
  cudaEvent_t e_ = nullptr;
};

// A JIT program loaded into the current device's context through the runtime API
// (cudaLibraryLoadData), so no driver library is linked.
class LoadedProgram {
 public:
  LoadedProgram() = default;
  explicit LoadedProgram(const JitProgram& program);
  ~LoadedProgram();
  LoadedProgram(LoadedProgram&& o) noexcept;
  LoadedProgram& operator=(LoadedProgram&& o) noexcept;
  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;

  // Kernel handle by the name expression given at compile time.
  cudaKernel_t kernel(std::string_view name_expression) const;
  bool loaded() const noexcept { return lib_ != nullptr; }

 private:
  cudaLibrary_t lib_ = nullptr;
  std::vector<std::string> names_;
  std::vector<cudaKernel_t> kernels_;
};

// Launches a JIT kernel: args are the kernel's parameters, by value, in order.
template <class... Args>
void launch(cudaKernel_t kernel, dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream,
            Args... args) {
  void* params[] = {static_cast<void*>(&args)..., nullptr};
  MOLACCEL_CUDA_TRY(
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, params, shared_bytes, stream));
  check_launch("JIT kernel", __FILE__, __LINE__);
}

// True when `p` is page-locked host memory (cudaHostAlloc, cudaHostRegister, allocate_host_buffer),
// which the copy engines can write directly; false for ordinary memory or an unknown pointer.
inline bool is_page_locked(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // an unknown pointer is ordinary memory
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

// Launches a JIT kernel whose parameter list is only known at run time (generated code):
// `args` holds one pointer per parameter, in order.
inline void launch_raw(cudaKernel_t kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                       cudaStream_t stream, void** args) {
  MOLACCEL_CUDA_TRY(
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, args, shared_bytes, stream));
  check_launch("JIT kernel", __FILE__, __LINE__);
}

// Number of GPUs visible (0 when the driver is missing); never throws.
int device_count_nothrow();

}  // namespace molaccel::cuda

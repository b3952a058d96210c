// CUDA side of the runtime: device queries, error handling, RAII wrappers, JIT program loading.
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/cuda/cuda_support.hpp"
#include "runtime/device_hooks.hpp"

namespace molaccel::cuda {

void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the worker can go on with other tiles
  throw CudaError(static_cast<int>(code),
                  fmt::format(fmt::runtime("CUDA error {} ({}): {} in `{}`"), static_cast<int>(code),
                              cudaGetErrorName(code), cudaGetErrorString(code), expr),
                  file, line);
}

void report_cuda_error_nothrow(cudaError_t code, const char* expr, const char* file, int line) {
  log_message(LogLevel::error,
              fmt::format(fmt::runtime("CUDA error {} ({}) in `{}` at {}:{}"), static_cast<int>(code),
                          cudaGetErrorString(code), expr, file, line));
}

bool debug_sync_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MOLACCEL_CUDA_DEBUG_SYNC");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void check_launch(const char* what, const char* file, int line) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, what, file, line);
  if (debug_sync_enabled()) {
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess) throw_cuda_error(e, what, file, line);
  }
}

int device_count_nothrow() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

DeviceGuard::DeviceGuard(int device) {
  MOLACCEL_CUDA_TRY(cudaGetDevice(&previous_));
  if (previous_ != device) MOLACCEL_CUDA_TRY(cudaSetDevice(device));
}
DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) MOLACCEL_CUDA_TRY_NOTHROW(cudaSetDevice(previous_));
}

Stream::Stream() {
  MOLACCEL_CUDA_TRY(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
}
Stream::~Stream() {
  if (s_) MOLACCEL_CUDA_TRY_NOTHROW(cudaStreamDestroy(s_));
}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_) MOLACCEL_CUDA_TRY_NOTHROW(cudaStreamDestroy(s_));
    s_ = std::exchange(o.s_, nullptr);
  }
  return *this;
}
void Stream::synchronize() const {
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s_));
}

Event::Event(bool timing) {
  MOLACCEL_CUDA_TRY(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() {
  if (e_) MOLACCEL_CUDA_TRY_NOTHROW(cudaEventDestroy(e_));
}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (e_) MOLACCEL_CUDA_TRY_NOTHROW(cudaEventDestroy(e_));
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}
void Event::record(cudaStream_t stream) {
  MOLACCEL_CUDA_TRY(cudaEventRecord(e_, stream));
}
void Event::synchronize() const {
  MOLACCEL_CUDA_TRY(cudaEventSynchronize(e_));
}
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  MOLACCEL_CUDA_TRY(cudaEventElapsedTime(&ms, start.e_, e_));
  return ms;
}

LoadedProgram::LoadedProgram(const JitProgram& program) {
  MOLACCEL_CUDA_TRY(
      cudaLibraryLoadData(&lib_, program.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  names_ = program.kernel_names;
  kernels_.resize(names_.size());
  for (std::size_t i = 0; i < names_.size(); ++i)
    MOLACCEL_CUDA_TRY(cudaLibraryGetKernel(&kernels_[i], lib_, program.lowered_names[i].c_str()));
}
LoadedProgram::~LoadedProgram() {
  if (lib_) MOLACCEL_CUDA_TRY_NOTHROW(cudaLibraryUnload(lib_));
}
LoadedProgram::LoadedProgram(LoadedProgram&& o) noexcept {
  *this = std::move(o);
}
LoadedProgram& LoadedProgram::operator=(LoadedProgram&& o) noexcept {
  if (this != &o) {
    if (lib_) MOLACCEL_CUDA_TRY_NOTHROW(cudaLibraryUnload(lib_));
    lib_ = std::exchange(o.lib_, nullptr);
    names_ = std::move(o.names_);
    kernels_ = std::move(o.kernels_);
  }
  return *this;
}
cudaKernel_t LoadedProgram::kernel(std::string_view name_expression) const {
  for (std::size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name_expression) return kernels_[i];
  throw Error(fmt::format(fmt::runtime("JIT program has no kernel '{}'"), name_expression), __FILE__,
              __LINE__);
}

}  // namespace molaccel::cuda

namespace molaccel::detail {

std::vector<GpuInfo> query_gpus(std::string& reason) {
  std::vector<GpuInfo> gpus;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (e == cudaErrorInsufficientDriver)
      reason = "no NVIDIA driver (or one too old for this build)";
    else if (e == cudaErrorNoDevice)
      reason = "no CUDA-capable GPU";
    else
      reason = fmt::format(fmt::runtime("CUDA unavailable: {}"), cudaGetErrorString(e));
    return gpus;
  }
  if (n == 0) {
    reason = "no CUDA-capable GPU";
    return gpus;
  }
  // Properties only: no device's context is created here (hundreds of ms each on a large GPU, and
  // device memory): a process, or an MPI rank, creates contexts only on the GPUs it uses, when its
  // workers start or when free memory is asked for (refresh_free_memory).
  std::vector<GpuInfo> found(static_cast<std::size_t>(n));
  std::vector<char> usable(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    GpuInfo& g = found[static_cast<std::size_t>(i)];
    g.index = i;
    g.name = p.name;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.sm_count = p.multiProcessorCount;
    g.total_memory = p.totalGlobalMem;
    g.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
    g.shared_per_block_optin = p.sharedMemPerBlockOptin;
    cudaDeviceGetAttribute(&g.clock_khz, cudaDevAttrClockRate, i);
    cudaDeviceGetAttribute(&g.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, i);
    usable[static_cast<std::size_t>(i)] = 1;
  }
  for (int i = 0; i < n; ++i)
    if (usable[static_cast<std::size_t>(i)]) gpus.push_back(std::move(found[static_cast<std::size_t>(i)]));
  if (gpus.empty()) reason = "no usable CUDA GPU";
  return gpus;
}

void refresh_free_memory(std::vector<GpuInfo>& gpus) noexcept {
  // The query needs the device's context, which it creates the first time (100s of ms on a large
  // GPU): one thread per device, so N GPUs do not pay N context creations in a row. The contexts
  // are the ones the workers use later, so nothing is created twice. Each thread's current device
  // is its own: the calling thread's is left alone.
  const auto query = [](GpuInfo& g) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(g.index) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      g.free_memory = free_b;
    cudaGetLastError();
  };
  std::vector<std::thread> threads;
  for (auto& g : gpus) {
    try {
      threads.emplace_back(query, std::ref(g));
    } catch (const std::system_error&) {  // no thread to be had: this one, on the calling thread
      int previous = -1;
      if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
      query(g);
      if (previous >= 0) cudaSetDevice(previous);
    }
  }
  for (auto& t : threads) t.join();
}

void bind_thread_to_device(int device) {
  MOLACCEL_CUDA_TRY(cudaSetDevice(device));
}

void release_thread_device() noexcept {}

void* allocate_page_locked(std::size_t bytes) noexcept {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // no driver, or page-locking refused: the caller falls back
    return nullptr;
  }
  return p;
}
void free_page_locked(void* p) noexcept {
  if (p) cudaFreeHost(p);
}

}  // namespace molaccel::detail

// The OpenCL runtime (internal): the ICD loader (libOpenCL.so.1) is opened with dlopen on first
// use, so a machine without OpenCL runs everything else. One context and in-order queue per
// device, created lazily by a thread-safe singleton; programs are built through a binary cache
// keyed like the NVRTC cache. Compiled only when MOLACCEL_HAVE_OPENCL is defined.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "molaccel/opencl.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::opencl {

// The entry points molaccel uses, resolved from the ICD loader.
struct Api {
  decltype(&::clGetPlatformIDs) GetPlatformIDs = nullptr;
  decltype(&::clGetPlatformInfo) GetPlatformInfo = nullptr;
  decltype(&::clGetDeviceIDs) GetDeviceIDs = nullptr;
  decltype(&::clGetDeviceInfo) GetDeviceInfo = nullptr;
  decltype(&::clCreateContext) CreateContext = nullptr;
  decltype(&::clReleaseContext) ReleaseContext = nullptr;
  decltype(&::clCreateCommandQueue) CreateCommandQueue = nullptr;
  decltype(&::clReleaseCommandQueue) ReleaseCommandQueue = nullptr;
  decltype(&::clCreateBuffer) CreateBuffer = nullptr;
  decltype(&::clReleaseMemObject) ReleaseMemObject = nullptr;
  decltype(&::clEnqueueWriteBuffer) EnqueueWriteBuffer = nullptr;
  decltype(&::clEnqueueReadBuffer) EnqueueReadBuffer = nullptr;
  decltype(&::clEnqueueCopyBuffer) EnqueueCopyBuffer = nullptr;
  decltype(&::clEnqueueFillBuffer) EnqueueFillBuffer = nullptr;
  decltype(&::clCreateProgramWithSource) CreateProgramWithSource = nullptr;
  decltype(&::clCreateProgramWithBinary) CreateProgramWithBinary = nullptr;
  decltype(&::clBuildProgram) BuildProgram = nullptr;
  decltype(&::clGetProgramBuildInfo) GetProgramBuildInfo = nullptr;
  decltype(&::clGetProgramInfo) GetProgramInfo = nullptr;
  decltype(&::clReleaseProgram) ReleaseProgram = nullptr;
  decltype(&::clCreateKernel) CreateKernel = nullptr;
  decltype(&::clReleaseKernel) ReleaseKernel = nullptr;
  decltype(&::clSetKernelArg) SetKernelArg = nullptr;
  decltype(&::clEnqueueNDRangeKernel) EnqueueNDRangeKernel = nullptr;
  decltype(&::clFinish) Finish = nullptr;
};

// The loaded API, or nullptr when no ICD loader could be opened (absence_reason says why).
const Api* api();

// Throws molaccel::Error "OpenCL <what> failed: <code name> (<code>)" when `status` is not CL_SUCCESS.
void check(cl_int status, std::string_view what, const char* file, int line);
#define MOLACCEL_CL_TRY(call, what) ::molaccel::opencl::check((call), (what), __FILE__, __LINE__)
std::string_view error_name(cl_int status);

// One device with its context and in-order queue (owned by the runtime; lives as long as the
// process).
struct Device {
  OpenClDeviceInfo info;
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
};
// Device `index` of opencl_devices(); context and queue are created on first use (thread-safe).
// Throws DeviceUnavailable when OpenCL or the device is missing.
Device& device(int index);

// A device buffer (zero-filled on creation).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  cl_mem get() const { return mem_; }
  std::size_t bytes() const { return bytes_; }
  void write(const void* host, std::size_t bytes, std::size_t offset = 0);  // blocking
  void read(void* host, std::size_t bytes, std::size_t offset = 0) const;   // blocking
 private:
  Device* device_ = nullptr;
  cl_mem mem_ = nullptr;
  std::size_t bytes_ = 0;
};

// A built program and its kernels by name.
class Program {
 public:
  Program() = default;
  Program(cl_program program, const std::vector<std::string>& kernel_names);
  ~Program();
  Program(Program&& o) noexcept;
  Program& operator=(Program&& o) noexcept;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  cl_kernel kernel(std::string_view name) const;

 private:
  cl_program program_ = nullptr;
  std::map<std::string, cl_kernel, std::less<>> kernels_;
};

struct BuildRequest {
  std::string source;                        // OpenCL C
  std::string program_name = "molaccel.cl";  // shown in build errors
  std::vector<std::string> kernel_names;
  std::string options;      // clBuildProgram options, e.g. "-cl-mad-enable"
  bool needs_fp64 = false;  // double precision: a device without cl_khr_fp64 is refused
};

struct BinaryCacheStats {
  std::size_t memory_hits = 0, disk_hits = 0, builds = 0, corrupt_rebuilt = 0, untrusted_ignored = 0;
};

// Program binaries on disk, keyed by source, options, device name, driver version, platform and
// the entry format (like the NVRTC cache; same directory trust rules: a private directory,
// entries owned by this user and writable by nobody else, written through a temporary file and a
// rename). A corrupt, foreign or unloadable entry is rebuilt and replaced, never used.
class BinaryCache {
 public:
  explicit BinaryCache(std::filesystem::path dir);  // e.g. <JIT cache dir>/opencl
  Program build(Device& device, const BuildRequest& request);
  std::string key_for(const Device& device, const BuildRequest& request) const;
  std::filesystem::path entry_path(const std::string& key) const;
  BinaryCacheStats stats() const;
  void clear_memory();

 private:
  std::filesystem::path dir_;
  mutable std::mutex mutex_;
  std::map<std::string, std::string> memory_;  // key -> binary
  BinaryCacheStats stats_;
};
BinaryCache& default_binary_cache();  // <default JIT cache directory>/opencl

// Entry encoding (exposed for tests): magic, format version, payload size and checksum, then key
// and binary.
inline constexpr std::uint32_t kBinaryCacheFormat = 1;
std::string encode_binary_entry(std::string_view key, std::string_view binary);
std::optional<std::string> decode_binary_entry(std::string_view bytes, std::string_view expected_key);

// Throws InputError-free Error naming the device and cl_khr_fp64 when `info` has no fp64.
void require_fp64(const OpenClDeviceInfo& info, std::string_view what);

}  // namespace molaccel::opencl

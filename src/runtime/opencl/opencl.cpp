// The OpenCL runtime: lazy ICD loader, device discovery, contexts and queues, buffers, program
// builds and their binary cache.
#include "runtime/opencl/opencl.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/jit_cache_format.hpp"
#include "runtime/secure_file.hpp"

namespace molaccel::opencl {

namespace {

template <class F>
bool bind(void* h, F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(h, name));
  return f != nullptr;
}

struct Loaded {
  Api api;
  bool ok = false;
  std::string why;
};

const Loaded& loaded() {
  static const Loaded lib = [] {
    Loaded l;
    void* h = nullptr;
    for (const char* name : {"libOpenCL.so.1", "libOpenCL.so"})
      if ((h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (!h) {
      l.why =
          "no OpenCL ICD loader (libOpenCL.so.1; Debian: ocl-icd-libopencl1 and a driver such as "
          "pocl-opencl-icd)";
      return l;
    }
    Api& a = l.api;
    const bool all =
        bind(h, a.GetPlatformIDs, "clGetPlatformIDs") && bind(h, a.GetPlatformInfo, "clGetPlatformInfo") &&
        bind(h, a.GetDeviceIDs, "clGetDeviceIDs") && bind(h, a.GetDeviceInfo, "clGetDeviceInfo") &&
        bind(h, a.CreateContext, "clCreateContext") && bind(h, a.ReleaseContext, "clReleaseContext") &&
        bind(h, a.CreateCommandQueue, "clCreateCommandQueue") &&
        bind(h, a.ReleaseCommandQueue, "clReleaseCommandQueue") &&
        bind(h, a.CreateBuffer, "clCreateBuffer") && bind(h, a.ReleaseMemObject, "clReleaseMemObject") &&
        bind(h, a.EnqueueWriteBuffer, "clEnqueueWriteBuffer") &&
        bind(h, a.EnqueueReadBuffer, "clEnqueueReadBuffer") &&
        bind(h, a.EnqueueCopyBuffer, "clEnqueueCopyBuffer") &&
        bind(h, a.EnqueueFillBuffer, "clEnqueueFillBuffer") &&
        bind(h, a.CreateProgramWithSource, "clCreateProgramWithSource") &&
        bind(h, a.CreateProgramWithBinary, "clCreateProgramWithBinary") &&
        bind(h, a.BuildProgram, "clBuildProgram") &&
        bind(h, a.GetProgramBuildInfo, "clGetProgramBuildInfo") &&
        bind(h, a.GetProgramInfo, "clGetProgramInfo") && bind(h, a.ReleaseProgram, "clReleaseProgram") &&
        bind(h, a.CreateKernel, "clCreateKernel") && bind(h, a.ReleaseKernel, "clReleaseKernel") &&
        bind(h, a.SetKernelArg, "clSetKernelArg") &&
        bind(h, a.EnqueueNDRangeKernel, "clEnqueueNDRangeKernel") && bind(h, a.Finish, "clFinish");
    if (!all) {
      ::dlclose(h);
      l.why = "the OpenCL ICD loader lacks OpenCL 1.2 entry points";
      return l;
    }
    l.ok = true;
    return l;
  }();
  return lib;
}

std::string platform_string(const Api& a, cl_platform_id p, cl_platform_info what) {
  std::size_t n = 0;
  if (a.GetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  a.GetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string device_string(const Api& a, cl_device_id d, cl_device_info what) {
  std::size_t n = 0;
  if (a.GetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  a.GetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <class V>
V device_value(const Api& a, cl_device_id d, cl_device_info what) {
  V v{};
  a.GetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

// The process's OpenCL devices: discovered once; contexts made on first use of each.
class Runtime {
 public:
  static Runtime& get() {
    static Runtime r;
    return r;
  }
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  const std::string& why_none() const { return why_; }

  Device& open(int index) {
    if (index < 0 || index >= static_cast<int>(devices_.size()))
      MOLACCEL_THROW(
          DeviceUnavailable,
          devices_.empty()
              ? fmt::format("--device opencl:{}: no OpenCL device ({})", index, why_)
              : fmt::format("--device opencl:{}: OpenCL device {} does not exist (this machine has {})",
                            index, index, devices_.size()));
    Device& d = *devices_[static_cast<std::size_t>(index)];
    std::lock_guard lock(mutex_);
    if (!d.context) {
      const Api& a = *api();
      cl_int status = CL_SUCCESS;
      const cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                             reinterpret_cast<cl_context_properties>(d.platform), 0};
      cl_context c = a.CreateContext(props, 1, &d.id, nullptr, nullptr, &status);
      check(status, "clCreateContext", __FILE__, __LINE__);
      cl_command_queue q = a.CreateCommandQueue(c, d.id, 0, &status);
      if (status != CL_SUCCESS) a.ReleaseContext(c);
      check(status, "clCreateCommandQueue", __FILE__, __LINE__);
      d.context = c;
      d.queue = q;
    }
    return d;
  }

 private:
  Runtime() {
    const Api* a = api();
    if (!a) {
      why_ = loaded().why;
      return;
    }
    cl_uint np = 0;
    if (a->GetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
      why_ = "no OpenCL platform (install a driver, e.g. Debian pocl-opencl-icd)";
      return;
    }
    std::vector<cl_platform_id> platforms(np);
    a->GetPlatformIDs(np, platforms.data(), nullptr);
    for (cl_platform_id p : platforms) {
      cl_uint nd = 0;
      if (a->GetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> ids(nd);
      a->GetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr);
      for (cl_device_id id : ids) {
        auto d = std::make_unique<Device>();
        d->platform = p;
        d->id = id;
        OpenClDeviceInfo& i = d->info;
        i.index = static_cast<int>(devices_.size());
        i.platform = platform_string(*a, p, CL_PLATFORM_NAME);
        i.name = device_string(*a, id, CL_DEVICE_NAME);
        i.vendor = device_string(*a, id, CL_DEVICE_VENDOR);
        i.version = device_string(*a, id, CL_DEVICE_VERSION);
        i.driver_version = device_string(*a, id, CL_DRIVER_VERSION);
        i.gpu = (device_value<cl_device_type>(*a, id, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
        i.fp64 = device_string(*a, id, CL_DEVICE_EXTENSIONS).find("cl_khr_fp64") != std::string::npos;
        i.compute_units = static_cast<int>(device_value<cl_uint>(*a, id, CL_DEVICE_MAX_COMPUTE_UNITS));
        i.global_memory = static_cast<std::size_t>(device_value<cl_ulong>(*a, id, CL_DEVICE_GLOBAL_MEM_SIZE));
        i.max_work_group = device_value<std::size_t>(*a, id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
        devices_.push_back(std::move(d));
      }
    }
    if (devices_.empty()) why_ = "no OpenCL device on any platform";
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::string why_;
};

}  // namespace

const Api* api() {
  return loaded().ok ? &loaded().api : nullptr;
}

std::string_view error_name(cl_int status) {
  switch (status) {
    case CL_DEVICE_NOT_FOUND:
      return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE:
      return "CL_DEVICE_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
      return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES:
      return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY:
      return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE:
      return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE:
      return "CL_INVALID_VALUE";
    case CL_INVALID_BINARY:
      return "CL_INVALID_BINARY";
    case CL_INVALID_KERNEL_NAME:
      return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS:
      return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_INDEX:
      return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE:
      return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE:
      return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_WORK_GROUP_SIZE:
      return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_BUFFER_SIZE:
      return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_MEM_OBJECT:
      return "CL_INVALID_MEM_OBJECT";
    default:
      return "OpenCL error";
  }
}

void check(cl_int status, std::string_view what, const char* file, int line) {
  if (status != CL_SUCCESS)
    throw Error(fmt::format("OpenCL {} failed: {} ({})", what, error_name(status), status), file, line);
}

Device& device(int index) {
  return Runtime::get().open(index);
}

void require_fp64(const OpenClDeviceInfo& info, std::string_view what) {
  if (!info.fp64)
    throw Error(fmt::format("OpenCL device {} ({}) cannot run {}: it lacks double precision (cl_khr_fp64); "
                            "use single precision (fp32) or another device",
                            info.index, info.name, what),
                __FILE__, __LINE__);
}

// ---- buffers ---------------------------------------------------------------------------------------
Buffer::Buffer(Device& device, std::size_t bytes) : device_(&device), bytes_(bytes) {
  cl_int status = CL_SUCCESS;
  mem_ = api()->CreateBuffer(device.context, CL_MEM_READ_WRITE, std::max<std::size_t>(bytes, 1), nullptr,
                             &status);
  check(status, fmt::format("clCreateBuffer ({} bytes)", bytes), __FILE__, __LINE__);
  if (bytes > 0) {
    const cl_uchar zero = 0;
    MOLACCEL_CL_TRY(api()->EnqueueFillBuffer(device.queue, mem_, &zero, 1, 0, bytes, 0, nullptr, nullptr),
                    "clEnqueueFillBuffer");
  }
}

Buffer::~Buffer() {
  if (mem_) api()->ReleaseMemObject(mem_);
}

Buffer::Buffer(Buffer&& o) noexcept : device_(o.device_), mem_(o.mem_), bytes_(o.bytes_) {
  o.mem_ = nullptr;
  o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (mem_) api()->ReleaseMemObject(mem_);
    device_ = o.device_;
    mem_ = o.mem_;
    bytes_ = o.bytes_;
    o.mem_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::write(const void* host, std::size_t bytes, std::size_t offset) {
  MOLACCEL_EXPECTS(offset + bytes <= bytes_, "opencl::Buffer::write: out of range");
  if (bytes == 0) return;
  MOLACCEL_CL_TRY(
      api()->EnqueueWriteBuffer(device_->queue, mem_, CL_TRUE, offset, bytes, host, 0, nullptr, nullptr),
      "clEnqueueWriteBuffer");
}

void Buffer::read(void* host, std::size_t bytes, std::size_t offset) const {
  MOLACCEL_EXPECTS(offset + bytes <= bytes_, "opencl::Buffer::read: out of range");
  if (bytes == 0) return;
  MOLACCEL_CL_TRY(
      api()->EnqueueReadBuffer(device_->queue, mem_, CL_TRUE, offset, bytes, host, 0, nullptr, nullptr),
      "clEnqueueReadBuffer");
}

// ---- programs ----------------------------------------------------------------------------------------
Program::Program(cl_program program, const std::vector<std::string>& kernel_names) : program_(program) {
  for (const auto& name : kernel_names) {
    cl_int status = CL_SUCCESS;
    cl_kernel k = api()->CreateKernel(program_, name.c_str(), &status);
    if (status != CL_SUCCESS) {
      for (auto& [n, kk] : kernels_) api()->ReleaseKernel(kk);
      api()->ReleaseProgram(program_);
      program_ = nullptr;
      kernels_.clear();
      check(status, "clCreateKernel " + name, __FILE__, __LINE__);
    }
    kernels_.emplace(name, k);
  }
}

Program::~Program() {
  for (auto& [n, k] : kernels_) api()->ReleaseKernel(k);
  if (program_) api()->ReleaseProgram(program_);
}

Program::Program(Program&& o) noexcept : program_(o.program_), kernels_(std::move(o.kernels_)) {
  o.program_ = nullptr;
  o.kernels_.clear();
}

Program& Program::operator=(Program&& o) noexcept {
  if (this != &o) {
    for (auto& [n, k] : kernels_) api()->ReleaseKernel(k);
    if (program_) api()->ReleaseProgram(program_);
    program_ = o.program_;
    kernels_ = std::move(o.kernels_);
    o.program_ = nullptr;
    o.kernels_.clear();
  }
  return *this;
}

cl_kernel Program::kernel(std::string_view name) const {
  auto it = kernels_.find(name);
  if (it == kernels_.end())
    throw Error(fmt::format("OpenCL program has no kernel '{}'", name), __FILE__, __LINE__);
  return it->second;
}

// ---- binary cache --------------------------------------------------------------------------------------
namespace {
constexpr std::string_view kMagic = "MOLACCEL-CLBIN\n";

std::string build_log(cl_program program, cl_device_id device) {
  std::size_t n = 0;
  api()->GetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n) api()->GetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Builds from source; throws with the build log.
cl_program build_from_source(Device& d, const BuildRequest& r) {
  const char* text = r.source.c_str();
  const std::size_t length = r.source.size();
  cl_int status = CL_SUCCESS;
  cl_program p = api()->CreateProgramWithSource(d.context, 1, &text, &length, &status);
  check(status, "clCreateProgramWithSource", __FILE__, __LINE__);
  status = api()->BuildProgram(p, 1, &d.id, r.options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    const std::string log = build_log(p, d.id);
    api()->ReleaseProgram(p);
    throw Error(fmt::format("OpenCL could not build {} for device {} ({}): {}\n{}", r.program_name,
                            d.info.index, d.info.name, error_name(status), log),
                __FILE__, __LINE__);
  }
  return p;
}

// Loads a cached binary; nullptr when the device refuses it.
cl_program build_from_binary(Device& d, const BuildRequest& r, const std::string& binary) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
  const std::size_t length = binary.size();
  cl_int status = CL_SUCCESS, binary_status = CL_SUCCESS;
  cl_program p =
      api()->CreateProgramWithBinary(d.context, 1, &d.id, &length, &bytes, &binary_status, &status);
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS) {
    if (p) api()->ReleaseProgram(p);
    return nullptr;
  }
  if (api()->BuildProgram(p, 1, &d.id, r.options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    api()->ReleaseProgram(p);
    return nullptr;
  }
  return p;
}

std::string program_binary(cl_program p) {
  std::size_t size = 0;
  MOLACCEL_CL_TRY(api()->GetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr),
                  "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
  std::string binary(size, '\0');
  unsigned char* where = reinterpret_cast<unsigned char*>(binary.data());
  MOLACCEL_CL_TRY(api()->GetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof where, &where, nullptr),
                  "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  return binary;
}

// Reads an entry this user wrote (owner-only, a regular file, not a link); nullopt otherwise.
std::optional<std::string> read_private(const std::filesystem::path& path, bool& untrusted) {
  untrusted = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    untrusted = errno == ELOOP;
    return std::nullopt;
  }
  std::string why;
  if (!detail::file_is_private(fd, why)) {
    ::close(fd);
    untrusted = true;
    log_warn("OpenCL cache entry {} is not trusted: {}; rebuilding it", path.string(), why);
    return std::nullopt;
  }
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return bytes;
}
}  // namespace

std::string encode_binary_entry(std::string_view key, std::string_view binary) {
  std::string payload;
  molaccel::detail::put_cache_string(payload, key);
  molaccel::detail::put_cache_string(payload, binary);
  return molaccel::detail::frame_cache_entry(kMagic, kBinaryCacheFormat, payload);
}

std::optional<std::string> decode_binary_entry(std::string_view bytes, std::string_view expected_key) {
  const auto payload = molaccel::detail::unframe_cache_entry(bytes, kMagic, kBinaryCacheFormat);
  if (!payload) return std::nullopt;
  molaccel::detail::CacheCursor c{*payload};
  const std::string key = c.str(), binary = c.str();
  if (!c.ok || !c.data.empty() || key != expected_key || binary.empty()) return std::nullopt;
  return binary;
}

BinaryCache::BinaryCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::string BinaryCache::key_for(const Device& d, const BuildRequest& r) const {
  return hash_hex(
      fmt::format("format={}\nplatform={}\ndevice={}\ndevice_version={}\ndriver={}\noptions={}\nsource=\n{}",
                  kBinaryCacheFormat, d.info.platform, d.info.name, d.info.version, d.info.driver_version,
                  r.options, r.source));
}

std::filesystem::path BinaryCache::entry_path(const std::string& key) const {
  return dir_ / key.substr(0, 2) / (key + ".clbin");
}

BinaryCacheStats BinaryCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void BinaryCache::clear_memory() {
  std::lock_guard lock(mutex_);
  memory_.clear();
}

Program BinaryCache::build(Device& d, const BuildRequest& r) {
  if (r.needs_fp64) require_fp64(d.info, "a double-precision program (" + r.program_name + ")");
  const std::string key = key_for(d, r);
  if (kernel_dump_dir()) dump_kernel_source(r.program_name, r.source);
  {
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      if (cl_program p = build_from_binary(d, r, it->second)) {
        ++stats_.memory_hits;
        return Program(p, r.kernel_names);
      }
      memory_.erase(it);
    }
  }
  // Disk: a private directory only (created 0700), like the NVRTC cache.
  const auto path = entry_path(key);
  bool use_disk = false;
  {
    std::error_code ec;
    if (dir_.has_parent_path()) std::filesystem::create_directories(dir_.parent_path(), ec);
    ::mkdir(dir_.c_str(), 0700);
    ::mkdir(path.parent_path().c_str(), 0700);
    std::string why;
    use_disk =
        detail::directory_is_private(dir_, why) && detail::directory_is_private(path.parent_path(), why);
  }
  if (use_disk) {
    bool untrusted = false;
    if (auto bytes = read_private(path, untrusted)) {
      if (auto binary = decode_binary_entry(*bytes, key)) {
        if (cl_program p = build_from_binary(d, r, *binary)) {
          std::lock_guard lock(mutex_);
          ++stats_.disk_hits;
          memory_[key] = *binary;
          return Program(p, r.kernel_names);
        }
      }
      log_warn("OpenCL cache entry {} is corrupt or foreign; rebuilding it", path.string());
      std::lock_guard lock(mutex_);
      ++stats_.corrupt_rebuilt;
    } else if (untrusted) {
      std::lock_guard lock(mutex_);
      ++stats_.untrusted_ignored;
    }
  }
  cl_program p = build_from_source(d, r);
  Program program(p, r.kernel_names);
  std::string binary;
  try {
    binary = program_binary(p);
  } catch (const Error& e) {
    log_warn("OpenCL cache: no binary for {}: {}", r.program_name, e.what());
  }
  if (use_disk && !binary.empty()) try {
      const auto bytes = encode_binary_entry(key, binary);
      detail::replace_file(
          path, 0600, std::nullopt, [&](std::FILE* f) { std::fwrite(bytes.data(), 1, bytes.size(), f); },
          path.string());
    } catch (const std::exception& e) {
      log_warn("OpenCL cache: could not store {}: {}", path.string(), e.what());
    }
  std::lock_guard lock(mutex_);
  ++stats_.builds;
  if (!binary.empty()) memory_[key] = binary;
  return program;
}

BinaryCache& default_binary_cache() {
  static BinaryCache cache(default_jit_cache().directory() / "opencl");
  return cache;
}

}  // namespace molaccel::opencl

namespace molaccel {

std::vector<OpenClDeviceInfo> opencl_devices() {
  std::vector<OpenClDeviceInfo> out;
  for (const auto& d : opencl::Runtime::get().devices()) out.push_back(d->info);
  return out;
}

std::string opencl_absence_reason() {
  return opencl::Runtime::get().why_none();
}

}  // namespace molaccel

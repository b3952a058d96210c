// Build and machine information, device selection and Resources.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "molaccel/runtime.hpp"
#include "runtime/device_hooks.hpp"
#include "runtime/host_resources.hpp"

#ifndef MOLACCEL_VERSION_STRING
#define MOLACCEL_VERSION_STRING "unknown"
#endif

namespace molaccel {

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = MOLACCEL_VERSION_STRING;
#ifdef MOLACCEL_HAVE_CUDA
    b.cuda = true;
    b.cuda_version = MOLACCEL_CUDA_VERSION_STRING;
    b.cuda_archs = MOLACCEL_CUDA_ARCHS;
#endif
#if defined(__clang__)
    b.compiler = fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
    b.compiler = fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
    b.compiler = "unknown";
#endif
#ifdef NDEBUG
    b.build_type = "optimised";
#else
    b.build_type = "debug";
#endif
    return b;
  }();
  return info;
}

std::string_view to_string(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar:
      return "scalar";
    case SimdLevel::sse4:
      return "sse4";
    case SimdLevel::avx2:
      return "avx2";
    case SimdLevel::avx512:
      return "avx512";
  }
  return "?";
}

namespace {
SimdLevel detect_simd() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return SimdLevel::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
    return SimdLevel::avx2;
  if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt")) return SimdLevel::sse4;
#endif
  return SimdLevel::scalar;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto s = line.substr(colon + 1);
        s.erase(0, s.find_first_not_of(" \t"));
        return s;
      }
    }
  }
  return "unknown CPU";
}
}  // namespace

namespace detail {

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(std::min<long>(n, CPU_SETSIZE)) : usable_cpus();
}

std::string claim_cpu_share(int local_rank, int local_size) {
  const int online = online_cpus();
  const int share = std::max(1, online / std::max(1, local_size));
  const int usable = usable_cpus();
  if (usable >= share || local_rank < 0 || local_rank >= local_size) return {};
  cpu_set_t set;
  CPU_ZERO(&set);
  const int first = local_rank * share;
  for (int c = first; c < first + share && c < online; ++c) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) return {};  // a cpuset forbids it: keep the binding
  return fmt::format(
      "the launcher bound this process to {} CPU{}; using CPUs {}-{} (its share of {} for {} "
      "process{} on this host)",
      usable, usable == 1 ? "" : "s", first, first + share - 1, online, local_size,
      local_size == 1 ? "" : "es");
}

bool write_all_at(int fd, std::uint64_t offset, const void* data, std::size_t bytes) noexcept {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

namespace {
// madvise(`advice`) over the whole pages inside [data, data + bytes), in parts on up to 8 threads;
// nothing below 8 MB. A failure (an old kernel, no threads to be had) changes nothing the caller
// relies on: the pages are then faulted in or freed as they would have been anyway.
void advise_in_parallel(void* data, std::size_t bytes, int advice) noexcept {
  constexpr std::size_t kAtLeast = std::size_t{8} << 20;
  const long page_size = sysconf(_SC_PAGESIZE);
  if (!data || bytes < kAtLeast || page_size <= 0) return;
  const auto page = static_cast<std::uintptr_t>(page_size);
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
  if (end <= begin) return;
  const std::size_t pages = (end - begin) / page;
  const std::size_t parts = static_cast<std::size_t>(std::clamp(usable_cpus(), 1, 8));
  try {
    parallel_for(parts, static_cast<int>(parts), 1, [&](std::size_t b, std::size_t e) {
      const std::uintptr_t first = begin + pages * b / parts * page;
      const std::uintptr_t last = begin + pages * e / parts * page;
      if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, advice);
    });
  } catch (...) {
  }
}
}  // namespace

void populate_pages(void* data, std::size_t bytes) noexcept {
#ifdef MADV_POPULATE_WRITE
  advise_in_parallel(data, bytes, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

void release_pages(void* data, std::size_t bytes) noexcept {
  advise_in_parallel(data, bytes, MADV_DONTNEED);
}

}  // namespace detail

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo c;
    c.model = cpu_model();
    c.logical_cores = detail::usable_cpus();
    c.simd = detect_simd();
    if (const char* env = std::getenv("MOLACCEL_SIMD")) {
      std::string_view want = env;
      for (auto level : {SimdLevel::scalar, SimdLevel::sse4, SimdLevel::avx2, SimdLevel::avx512})
        if (want == to_string(level) && level < c.simd) c.simd = level;
    }
    return c;
  }();
  return info;
}

namespace {
// The GPUs do not change during a process: their properties are queried once (no context is
// created), and free memory is refreshed only when asked for (which creates the contexts of the
// GPUs asked about), so a library call that asks per request costs microseconds.
std::mutex gpu_mutex;
bool gpus_queried = false;
std::vector<GpuInfo> gpu_cache;
std::string gpu_reason;

void query_once() {  // under gpu_mutex
  if (gpus_queried) return;
  gpu_cache = detail::query_gpus(gpu_reason);
  gpus_queried = true;
}

std::vector<GpuInfo> cached_gpus(std::string* reason, bool refresh_free) {
  std::lock_guard lock(gpu_mutex);
  query_once();
  if (refresh_free) detail::refresh_free_memory(gpu_cache);
  if (reason) *reason = gpu_reason;
  return gpu_cache;
}
}  // namespace

std::vector<GpuInfo> gpu_list() {
  return cached_gpus(nullptr, true);
}

std::vector<GpuInfo> detail::gpu_properties() {
  return cached_gpus(nullptr, false);
}

std::size_t detail::gpu_free_memory(int device) {
  std::lock_guard lock(gpu_mutex);
  query_once();
  for (auto& g : gpu_cache) {
    if (g.index != device) continue;
    std::vector<GpuInfo> one{g};
    detail::refresh_free_memory(one);
    g.free_memory = one[0].free_memory;
    return g.free_memory;
  }
  return 0;
}

std::string gpu_absence_reason() {
  std::string reason;
  auto gpus = cached_gpus(&reason, false);
  return gpus.empty() ? reason : std::string();
}

std::string GpuInfo::arch() const {
  return fmt::format("sm_{}{}", cc_major, cc_minor);
}

// ---- DeviceSpec ---------------------------------------------------------------------------------
std::string_view to_string(ComputeBackend backend) {
  switch (backend) {
    case ComputeBackend::automatic:
      return "auto";
    case ComputeBackend::reference:
      return "reference";
    case ComputeBackend::cpu:
      return "cpu";
    case ComputeBackend::cuda:
      return "cuda";
  }
  return "?";
}

ComputeBackend parse_compute_backend(std::string_view text) {
  if (text == "auto") return ComputeBackend::automatic;
  if (text == "reference") return ComputeBackend::reference;
  if (text == "cpu") return ComputeBackend::cpu;
  if (text == "cuda" || text == "gpu") return ComputeBackend::cuda;
  throw InputError("--backend", 0, fmt::format("'{}' is not one of auto, reference, cpu, cuda", text));
}

DeviceSpec DeviceSpec::parse(std::string_view text) {
  DeviceSpec spec;
  auto bad = [&](const std::string& why) {
    throw InputError("--device", 0,
                     fmt::format("'{}' {}; expected auto, cpu, gpu or gpu:N[,M...]", text, why), __FILE__,
                     __LINE__);
  };
  if (text == "auto") return spec;
  if (text == "cpu") {
    spec.kind = Kind::cpu;
    return spec;
  }
  if (text == "gpu" || text == "cuda") {
    spec.kind = Kind::gpu;
    return spec;
  }
  std::string_view list;
  if (text.rfind("gpu:", 0) == 0)
    list = text.substr(4);
  else if (text.rfind("cuda:", 0) == 0)
    list = text.substr(5);
  else
    bad("is not a device");
  spec.kind = Kind::gpu;
  if (list.empty()) bad("names no GPU");
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = list.substr(0, comma);
    int id = -1;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (ec != std::errc() || ptr != item.data() + item.size() || id < 0) bad("has a bad GPU index");
    if (std::find(spec.gpu_ids.begin(), spec.gpu_ids.end(), id) != spec.gpu_ids.end())
      bad("names a GPU twice");
    spec.gpu_ids.push_back(id);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    if (list.empty()) bad("ends with a comma");
  }
  return spec;
}

std::string DeviceSpec::to_string() const {
  switch (kind) {
    case Kind::automatic:
      return "auto";
    case Kind::cpu:
      return "cpu";
    case Kind::gpu: {
      if (gpu_ids.empty()) return "gpu";
      std::string s = "gpu:";
      for (std::size_t i = 0; i < gpu_ids.size(); ++i) s += (i ? "," : "") + std::to_string(gpu_ids[i]);
      return s;
    }
  }
  return "?";
}

// ---- WorkerInfo / Resources ---------------------------------------------------------------------
std::string WorkerInfo::name() const {
  return kind == Kind::gpu ? fmt::format("gpu:{}", device) : std::string("cpu");
}

Resources Resources::create(const Options& options) {
  Resources r;
  r.show_progress_ = options.show_progress;
  r.cpu_worker_with_gpus_ = options.cpu_worker_with_gpus;
  r.cpu_threads_ = options.cpu_threads > 0 ? options.cpu_threads : cpu_info().logical_cores;
  const auto& spec = options.device;
  if (spec.kind != DeviceSpec::Kind::cpu) {
    std::string reason;
    auto gpus = cached_gpus(&reason, false);
    if (spec.kind == DeviceSpec::Kind::gpu) {
      if (!build_info().cuda)
        MOLACCEL_THROW(NotCompiled,
                       "--device " + spec.to_string() +
                           ": this build of molaccel has no CUDA support (rebuild with the cuda preset)");
      if (gpus.empty())
        MOLACCEL_THROW(DeviceUnavailable,
                       "--device " + spec.to_string() + ": no GPU available (" + reason + ")");
      if (spec.gpu_ids.empty()) {
        for (auto& g : gpus) r.gpus_.push_back(g.index);
      } else {
        for (int id : spec.gpu_ids) {
          if (id >= static_cast<int>(gpus.size()))
            MOLACCEL_THROW(DeviceUnavailable,
                           fmt::format("--device {}: GPU {} does not exist (this machine has {} GPU{})",
                                       spec.to_string(), id, gpus.size(), gpus.size() == 1 ? "" : "s"));
          r.gpus_.push_back(id);
        }
      }
    } else {  // automatic
      if (gpus.empty())
        log_info("--device auto: running on the CPU ({})", reason);
      else
        for (auto& g : gpus) r.gpus_.push_back(g.index);
    }
  }
  std::vector<WorkerInfo> workers;
  for (int g : r.gpus_) {
    WorkerInfo w;
    w.kind = WorkerInfo::Kind::gpu;
    w.device = g;
    w.index = static_cast<int>(workers.size());
    w.cpu_threads = 1;
    workers.push_back(w);
  }
  if (r.uses_cpu()) {
    WorkerInfo w;
    w.kind = WorkerInfo::Kind::cpu;
    w.index = static_cast<int>(workers.size());
    // GPU feeder threads take a core each; the CPU worker gets the rest.
    w.cpu_threads = std::max(1, r.cpu_threads_ - static_cast<int>(r.gpus_.size()));
    workers.push_back(w);
  }
  r.pool_ = std::make_shared<WorkerPool>(std::move(workers));
  return r;
}

Resources Resources::cpu(int threads) {
  Options o;
  o.device.kind = DeviceSpec::Kind::cpu;
  o.cpu_threads = threads;
  return create(o);
}

std::string Resources::describe() const {
  std::string s;
  if (!gpus_.empty()) {
    auto all = cached_gpus(nullptr, false);  // names only
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      std::string name = "GPU";
      for (auto& g : all)
        if (g.index == gpus_[i]) name = g.name;
      s += fmt::format("{}gpu:{} ({})", i ? ", " : "", gpus_[i], name);
    }
  }
  if (uses_cpu()) s += fmt::format("{}cpu ({} threads)", s.empty() ? "" : " + ", cpu_threads_);
  return s;
}

WorkerPool& Resources::pool() const {
  MOLACCEL_EXPECTS(pool_ != nullptr, "Resources used before Resources::create()");
  return *pool_;
}

}  // namespace molaccel

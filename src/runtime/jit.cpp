// Run-time compilation of generated CUDA source with NVRTC, and its two-level cache.
// NVRTC is loaded with dlopen on first use, so a binary built without CUDA, or run where the
// toolkit is missing, still starts; JIT then reports NotCompiled.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "molaccel/runtime.hpp"
#include "runtime/host_resources.hpp"
#include "runtime/jit_cache_format.hpp"
#include "runtime/secure_file.hpp"

namespace molaccel {

// ---- NVRTC, loaded lazily -----------------------------------------------------------------------
namespace {
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct Nvrtc {
  void* handle = nullptr;
  std::string library;
  int major = 0, minor = 0;
  nvrtcResult (*Version)(int*, int*) = nullptr;
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, std::size_t*) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, std::size_t*) = nullptr;
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*AddNameExpression)(nvrtcProgram, const char*) = nullptr;
  nvrtcResult (*GetLoweredName)(nvrtcProgram, const char*, const char**) = nullptr;
  bool ok() const { return handle != nullptr; }
};

template <class F>
bool bind(void* h, F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(h, name));
  return f != nullptr;
}

// Where a CUDA toolkit may be: $CUDA_HOME, $CUDA_PATH, then the usual prefix.
std::vector<std::string> cuda_roots() {
  std::vector<std::string> roots;
  if (const char* v = std::getenv("CUDA_HOME"); v && *v) roots.emplace_back(v);
  if (const char* v = std::getenv("CUDA_PATH"); v && *v) roots.emplace_back(v);
  roots.emplace_back("/usr/local/cuda");
  return roots;
}

const Nvrtc& nvrtc() {
  static const Nvrtc lib = [] {
    Nvrtc n;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("MOLACCEL_NVRTC_LIBRARY")) candidates.emplace_back(env);
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      candidates.emplace_back(name);
    for (const std::string& r : cuda_roots())
      for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
        candidates.push_back(r + "/lib64/" + name);
        candidates.push_back(r + "/targets/x86_64-linux/lib/" + name);
      }
    for (auto& c : candidates) {
      void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) continue;
      bool all = bind(h, n.Version, "nvrtcVersion") && bind(h, n.GetErrorString, "nvrtcGetErrorString") &&
                 bind(h, n.CreateProgram, "nvrtcCreateProgram") &&
                 bind(h, n.DestroyProgram, "nvrtcDestroyProgram") &&
                 bind(h, n.CompileProgram, "nvrtcCompileProgram") &&
                 bind(h, n.GetProgramLogSize, "nvrtcGetProgramLogSize") &&
                 bind(h, n.GetProgramLog, "nvrtcGetProgramLog") &&
                 bind(h, n.GetCUBINSize, "nvrtcGetCUBINSize") && bind(h, n.GetCUBIN, "nvrtcGetCUBIN") &&
                 bind(h, n.AddNameExpression, "nvrtcAddNameExpression") &&
                 bind(h, n.GetLoweredName, "nvrtcGetLoweredName");
      if (!all) {
        ::dlclose(h);
        continue;
      }
      n.handle = h;
      n.library = c;
      n.Version(&n.major, &n.minor);
      break;
    }
    return n;
  }();
  return lib;
}

std::string cuda_include_dir() {
  for (const std::string& r : cuda_roots()) {
    std::error_code ec;
    if (std::filesystem::exists(r + "/include/cuda_runtime.h", ec)) return r + "/include";
  }
  return {};
}

std::string default_arch() {
  if (build_info().cuda) {
    auto gpus = detail::gpu_properties();
    if (!gpus.empty()) return gpus.front().arch();
    const std::string archs = build_info().cuda_archs;
    std::string first = archs.substr(0, archs.find_first_of(";, "));
    while (!first.empty() && !std::isdigit(static_cast<unsigned char>(first.back()))) first.pop_back();
    if (!first.empty()) return "sm_" + first;
  }
  return "sm_90";
}
}  // namespace

bool nvrtc_available() {
  return nvrtc().ok();
}
int nvrtc_version() {
  return nvrtc().ok() ? nvrtc().major * 1000 + nvrtc().minor * 10 : 0;
}

const std::string& JitProgram::lowered(std::string_view kernel_name) const {
  for (std::size_t i = 0; i < kernel_names.size(); ++i)
    if (kernel_names[i] == kernel_name) return lowered_names[i];
  throw Error(fmt::format("JIT program has no kernel '{}'", kernel_name), __FILE__, __LINE__);
}

// ---- cache entry encoding -------------------------------------------------------------------------
namespace detail {
namespace {
constexpr std::string_view kMagic = "MOLACCEL-JIT\n";
}  // namespace

void put_cache_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}

void put_cache_string(std::string& out, std::string_view s) {
  put_cache_u64(out, s.size());
  out.append(s);
}

std::uint64_t CacheCursor::u64() {
  if (data.size() < 8) {
    ok = false;
    return 0;
  }
  std::uint64_t v;
  std::memcpy(&v, data.data(), 8);
  data.remove_prefix(8);
  return v;
}

std::string CacheCursor::str() {
  const auto n = u64();
  if (!ok || n > data.size()) {
    ok = false;
    return {};
  }
  std::string s(data.substr(0, n));
  data.remove_prefix(n);
  return s;
}

std::string frame_cache_entry(std::string_view magic, std::uint32_t version, std::string_view payload) {
  std::string out(magic);
  out.append(reinterpret_cast<const char*>(&version), 4);
  put_cache_u64(out, payload.size());
  put_cache_u64(out, hash64(payload, version));
  out += payload;
  return out;
}

std::optional<std::string_view> unframe_cache_entry(std::string_view bytes, std::string_view magic,
                                                    std::uint32_t version) {
  if (bytes.size() < magic.size() + 4 + 16 || bytes.substr(0, magic.size()) != magic) return std::nullopt;
  std::uint32_t found;
  std::memcpy(&found, bytes.data() + magic.size(), 4);
  if (found != version) return std::nullopt;
  CacheCursor header{bytes.substr(magic.size() + 4)};
  const auto size = header.u64();
  const auto checksum = header.u64();
  if (!header.ok || header.data.size() != size) return std::nullopt;
  if (hash64(header.data, version) != checksum) return std::nullopt;
  return header.data;
}

std::string encode_cache_entry(const JitProgram& p) {
  std::string payload;
  put_cache_string(payload, p.key);
  put_cache_string(payload, p.arch);
  put_cache_string(payload, p.log);
  put_cache_string(payload, p.cubin);
  put_cache_u64(payload, p.kernel_names.size());
  for (std::size_t i = 0; i < p.kernel_names.size(); ++i) {
    put_cache_string(payload, p.kernel_names[i]);
    put_cache_string(payload, p.lowered_names[i]);
  }
  return frame_cache_entry(kMagic, kJitCacheFormat, payload);
}

std::optional<JitProgram> decode_cache_entry(std::string_view bytes, std::string_view expected_key) {
  const auto payload = unframe_cache_entry(bytes, kMagic, kJitCacheFormat);
  if (!payload) return std::nullopt;
  CacheCursor c{*payload};
  JitProgram p;
  p.key = c.str();
  p.arch = c.str();
  p.log = c.str();
  p.cubin = c.str();
  const auto names = c.u64();
  if (!c.ok || names > c.data.size() / 16) return std::nullopt;
  for (std::uint64_t i = 0; i < names && c.ok; ++i) {
    p.kernel_names.push_back(c.str());
    p.lowered_names.push_back(c.str());
  }
  if (!c.ok || !c.data.empty() || p.key != expected_key || p.cubin.empty()) return std::nullopt;
  return p;
}
}  // namespace detail

// ---- the cache ------------------------------------------------------------------------------------
// The disk cache holds code that runs in the user's process, so it trusts only what this user
// wrote: a private directory (owner-only, not writable by others) and entries owned by this user
// and writable by nobody else. Anything else is ignored: the directory with one warning (programs
// are then compiled in memory only), an entry by rebuilding and replacing it.
struct JitCache::Impl {
  mutable std::mutex mutex;
  std::unordered_map<std::string, JitProgram> memory;
  JitCacheStats stats;
  std::once_flag directory_checked;
  bool directory_usable = false;
  std::set<std::string> refused_subdirectories;  // warned about once each (under `mutex`)

  // Creates the cache directory (0700) on first use and decides whether it may be used.
  bool usable(const std::filesystem::path& dir) {
    std::call_once(directory_checked, [&] {
      std::filesystem::path d = dir.has_filename() ? dir : dir.parent_path();  // "cache/" -> "cache"
      std::error_code ec;
      if (d.has_parent_path()) std::filesystem::create_directories(d.parent_path(), ec);
      std::string why;
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
        why = std::strerror(errno);
      else
        directory_usable = detail::directory_is_private(d, why);
      if (!directory_usable)
        log_warn(
            "JIT cache directory {} is not used: {}; kernels are compiled in memory only (use a directory "
            "only you can write, e.g. mode 0700, or set MOLACCEL_CACHE_DIR)",
            d.string(), why);
    });
    return directory_usable;
  }

  // The entry's subdirectory: created 0700; used only when private and not a link.
  bool usable_subdirectory(const std::filesystem::path& sub) {
    std::string why;
    struct stat st {};
    bool ok = false;
    if (::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST)
      why = std::strerror(errno);
    else if (::lstat(sub.c_str(), &st) != 0)
      why = std::strerror(errno);
    else if (S_ISLNK(st.st_mode))
      why = "a symbolic link";
    else
      ok = detail::directory_is_private(sub, why);
    if (!ok) {
      std::lock_guard lock(mutex);
      if (refused_subdirectories.insert(sub.string()).second)
        log_warn("JIT cache directory {} is not used: {}; kernels are compiled in memory only", sub.string(),
                 why);
    }
    return ok;
  }

  // Reads an entry when this user wrote it; nullopt when absent, untrusted (counted) or corrupt.
  std::optional<std::string> read_trusted(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    std::string why;
    if (fd < 0) {
      if (errno != ELOOP) return std::nullopt;  // absent (or unreadable: rebuilt and replaced)
      why = "a symbolic link";
    } else if (!detail::file_is_private(fd, why)) {
      ::close(fd);
    } else {
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
    log_warn("JIT cache entry {} is not trusted: {}; ignoring it and rebuilding it", path.string(), why);
    std::lock_guard lock(mutex);
    ++stats.untrusted_ignored;
    return std::nullopt;
  }
};

namespace {
std::filesystem::path default_cache_dir() {
  if (const char* d = std::getenv("MOLACCEL_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "molaccel";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "molaccel";
  return std::filesystem::temp_directory_path() / fmt::format("molaccel-cache-{}", ::geteuid());
}

// "name.cu(12): error: ..." -> 12
std::string offending_line(const std::string& log, const std::string& program_name, const std::string& source,
                           int& line_no) {
  line_no = 0;
  const auto needle = program_name + "(";
  auto pos = log.find(needle);
  while (pos != std::string::npos) {
    const auto close = log.find(')', pos + needle.size());
    if (close != std::string::npos && log.compare(close, 9, "): error:") == 0) {
      line_no = std::atoi(log.c_str() + pos + needle.size());
      break;
    }
    pos = log.find(needle, pos + 1);
  }
  if (line_no <= 0) return {};
  std::istringstream in(source);
  std::string line;
  for (int i = 1; std::getline(in, line); ++i)
    if (i == line_no) return line;
  return {};
}
}  // namespace

JitCache::JitCache(std::filesystem::path dir)
    : dir_(dir.empty() ? default_cache_dir() : std::move(dir)), impl_(std::make_unique<Impl>()) {}
JitCache::~JitCache() = default;

std::string JitCache::key_for(const JitRequest& request) const {
  std::string material = fmt::format("format={}\nnvrtc={}\narch={}\n", detail::kJitCacheFormat,
                                     nvrtc_version(), request.arch.empty() ? default_arch() : request.arch);
  for (auto& o : request.options) material += "option=" + o + "\n";
  for (auto& k : request.kernel_names) material += "kernel=" + k + "\n";
  material += "source=\n" + request.source;
  return hash_hex(material);
}

std::filesystem::path JitCache::entry_path(const std::string& key) const {
  return dir_ / key.substr(0, 2) / (key + ".jit");
}

JitCacheStats JitCache::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

void JitCache::clear_memory() {
  std::lock_guard lock(impl_->mutex);
  impl_->memory.clear();
}

JitProgram JitCache::compile(const JitRequest& request) {
  const std::string arch = request.arch.empty() ? default_arch() : request.arch;
  const std::string key = key_for(request);
  {
    std::lock_guard lock(impl_->mutex);
    if (auto it = impl_->memory.find(key); it != impl_->memory.end()) {
      ++impl_->stats.memory_hits;
      JitProgram p = it->second;
      p.origin = JitProgram::Origin::memory_cache;
      return p;
    }
  }
  if (kernel_dump_dir())
    dump_kernel_source(
        std::filesystem::path(request.program_name).stem().string() + "." + key.substr(0, 8) + ".cu",
        request.source);
  // Disk.
  const auto path = entry_path(key);
  const bool use_disk = impl_->usable(dir_) && impl_->usable_subdirectory(path.parent_path());
  if (use_disk) {
    if (auto read = impl_->read_trusted(path)) {
      const std::string& bytes = *read;
      if (auto p = detail::decode_cache_entry(bytes, key)) {
        p->origin = JitProgram::Origin::disk_cache;
        std::lock_guard lock(impl_->mutex);
        ++impl_->stats.disk_hits;
        impl_->memory.emplace(key, *p);
        return *p;
      }
      log_warn("JIT cache entry {} is corrupt or foreign; rebuilding it", path.string());
      std::lock_guard lock(impl_->mutex);
      ++impl_->stats.corrupt_rebuilt;
    }
  }
  // Compile.
  const Nvrtc& nv = nvrtc();
  if (!nv.ok())
    MOLACCEL_THROW(NotCompiled,
                   "run-time compilation: NVRTC (libnvrtc.so from the CUDA toolkit) could not be loaded; set "
                   "MOLACCEL_NVRTC_LIBRARY");
  nvrtcProgram prog = nullptr;
  auto check = [&](nvrtcResult r, const char* what) {
    if (r != 0)
      throw Error(fmt::format("NVRTC {} failed: {}", what, nv.GetErrorString(r)), __FILE__, __LINE__);
  };
  check(nv.CreateProgram(&prog, request.source.c_str(), request.program_name.c_str(), 0, nullptr, nullptr),
        "create program");
  struct Destroy {
    const Nvrtc& nv;
    nvrtcProgram* p;
    ~Destroy() { nv.DestroyProgram(p); }
  } destroy{nv, &prog};
  for (auto& k : request.kernel_names) check(nv.AddNameExpression(prog, k.c_str()), "add name expression");
  std::vector<std::string> opts = {"--gpu-architecture=" + arch};
  bool has_std = false;
  for (auto& o : request.options) has_std = has_std || o.rfind("--std", 0) == 0 || o.rfind("-std", 0) == 0;
  if (!has_std) opts.push_back("--std=c++17");
  if (auto inc = cuda_include_dir(); !inc.empty()) opts.push_back("--include-path=" + inc);
  for (auto& o : request.options) opts.push_back(o);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  const nvrtcResult rc = nv.CompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  nv.GetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nv.GetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (rc != 0) {
    int line_no = 0;
    auto line = offending_line(log, request.program_name, request.source, line_no);
    std::string msg = fmt::format("NVRTC could not compile {} for {}: {}", request.program_name, arch,
                                  nv.GetErrorString(rc));
    if (line_no > 0) msg += fmt::format("\n  line {}: {}", line_no, line);
    msg += "\n" + log;
    throw NvrtcError(msg, log, line, __FILE__, __LINE__);
  }
  JitProgram p;
  p.arch = arch;
  p.key = key;
  p.log = log;
  p.kernel_names = request.kernel_names;
  for (auto& k : request.kernel_names) {
    const char* lowered = nullptr;
    check(nv.GetLoweredName(prog, k.c_str(), &lowered), "get lowered name");
    p.lowered_names.emplace_back(lowered);
  }
  std::size_t cubin_size = 0;
  check(nv.GetCUBINSize(prog, &cubin_size), "get CUBIN size");
  p.cubin.resize(cubin_size);
  check(nv.GetCUBIN(prog, p.cubin.data()), "get CUBIN");
  // Store: an owner-only temporary file, created exclusively, renamed over the entry (never through
  // a link there), so concurrent processes never see a partial entry.
  if (use_disk) try {
      const auto bytes = detail::encode_cache_entry(p);
      detail::replace_file(
          path, 0600, std::nullopt, [&](std::FILE* f) { std::fwrite(bytes.data(), 1, bytes.size(), f); },
          path.string());
    } catch (const std::exception& e) {
      log_warn("JIT cache: could not store {}: {}", path.string(), e.what());
      std::lock_guard lock(impl_->mutex);
      ++impl_->stats.disk_write_failures;
    }
  std::lock_guard lock(impl_->mutex);
  ++impl_->stats.misses;
  impl_->memory.emplace(key, p);
  return p;
}

JitCache& default_jit_cache() {
  static JitCache cache;
  return cache;
}

namespace {
struct BackgroundWaits {
  std::mutex mutex;
  std::vector<std::function<void()>> waits;
};
BackgroundWaits& background_waits() {
  static BackgroundWaits w;
  return w;
}
}  // namespace

void on_finish_background_work(std::function<void()> wait) {
  BackgroundWaits& w = background_waits();
  std::lock_guard lock(w.mutex);
  w.waits.push_back(std::move(wait));
}

void finish_background_work() {
  std::vector<std::function<void()>> waits;
  {
    BackgroundWaits& w = background_waits();
    std::lock_guard lock(w.mutex);
    waits = w.waits;
  }
  for (const auto& wait : waits) wait();
}

std::optional<std::filesystem::path> kernel_dump_dir() {
  if (const char* d = std::getenv("MOLACCEL_DUMP_KERNELS"); d && *d) return std::filesystem::path(d);
  return std::nullopt;
}

void dump_kernel_source(const std::string& file_name, std::string_view source) {
  const auto dir = kernel_dump_dir();
  if (!dir) return;
  const auto path = *dir / file_name;
  try {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    detail::replace_file(
        path, 0666 & ~detail::current_umask(), std::nullopt,
        [&](std::FILE* f) { std::fwrite(source.data(), 1, source.size(), f); }, path.string());
  } catch (const std::exception& e) {
    log_warn("MOLACCEL_DUMP_KERNELS: could not write {}: {}", path.string(), e.what());
  }
}

}  // namespace molaccel

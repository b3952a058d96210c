// molaccel runtime: errors, devices, resources, the tile scheduler, JIT compilation, progress and
// logging. This header is CUDA-free; CUDA-side helpers live in src/runtime/cuda/.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

#include <fmt/format.h>

namespace molaccel {

// ---------------------------------------------------------------------------------------------
// Errors: one hierarchy; every error records where in molaccel it was raised.
// ---------------------------------------------------------------------------------------------
class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file = "", int line = 0);
  const char* source_file() const noexcept { return file_; }
  int source_line() const noexcept { return line_; }

 private:
  const char* file_;
  int line_;
};

// Bad user input. what() reads "PATH:LINE: message" (LINE omitted when 0), the form editors jump to.
class InputError : public Error {
 public:
  InputError(std::string path, std::size_t line, std::string message, const char* file = "",
             int src_line = 0);
  const std::string& path() const noexcept { return path_; }
  std::size_t line() const noexcept { return line_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string path_;
  std::size_t line_;
  std::string detail_;
};

// A CUDA runtime call failed. code() is the cudaError_t value.
class CudaError : public Error {
 public:
  CudaError(int code, std::string message, const char* file, int line);
  int code() const noexcept { return code_; }
  bool is_out_of_memory() const noexcept;

 private:
  int code_;
};

// NVRTC rejected generated source: carries the whole log and the offending source line.
class NvrtcError : public Error {
 public:
  NvrtcError(std::string message, std::string log, std::string offending_line, const char* file, int line);
  const std::string& log() const noexcept { return log_; }
  const std::string& offending_line() const noexcept { return offending_line_; }

 private:
  std::string log_;
  std::string offending_line_;
};

// A backend that this build does not contain (e.g. CUDA in a CPU-only build).
class NotCompiled : public Error {
 public:
  NotCompiled(std::string what_is_missing, const char* file, int line);
};

// A device was asked for that this machine does not have (e.g. --device gpu with no GPU).
class DeviceUnavailable : public Error {
 public:
  using Error::Error;
};

// A job was cancelled through its CancelToken.
class Cancelled : public Error {
 public:
  using Error::Error;
};

// Fault raised by the scheduler's fault-injection hook (tests only).
class InjectedFault : public Error {
 public:
  using Error::Error;
};

#define MOLACCEL_THROW(ExceptionType, ...) throw ExceptionType(__VA_ARGS__, __FILE__, __LINE__)
#define MOLACCEL_EXPECTS(cond, msg)                                                                         \
  do {                                                                                                      \
    if (!(cond)) throw ::molaccel::Error(std::string("precondition failed: ") + (msg), __FILE__, __LINE__); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Build and machine information.
// ---------------------------------------------------------------------------------------------
struct BuildInfo {
  std::string version;
  bool cuda = false;         // CUDA backends compiled in
  std::string cuda_version;  // nvcc version used to build (empty without CUDA)
  std::string cuda_archs;    // e.g. "90"
  std::string compiler;      // host compiler
  std::string build_type;
};
const BuildInfo& build_info();

enum class SimdLevel { scalar, sse4, avx2, avx512 };
std::string_view to_string(SimdLevel level);

struct CpuInfo {
  std::string model;
  int logical_cores = 1;
  SimdLevel simd = SimdLevel::scalar;
};
// Detected once; MOLACCEL_SIMD=scalar|sse4|avx2|avx512 lowers the level (for tests/benchmarks).
const CpuInfo& cpu_info();

struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::size_t total_memory = 0;
  std::size_t free_memory = 0;
  std::size_t l2_bytes = 0;
  std::size_t shared_per_block_optin = 0;
  int clock_khz = 0;
  int memory_bus_bits = 0;
  std::string arch() const;  // "sm_90"
};
// Every CUDA GPU this process can use (empty in a CPU-only build or with no driver/GPU).
std::vector<GpuInfo> gpu_list();
// Why gpu_list() is empty, in words ("this build has no CUDA", "no NVIDIA driver", "no GPU").
std::string gpu_absence_reason();

// ---------------------------------------------------------------------------------------------
// Device selection: `--device auto|cpu|gpu|gpu:0,2` is parsed here and nowhere else.
// ---------------------------------------------------------------------------------------------
struct DeviceSpec {
  enum class Kind { automatic, cpu, gpu };
  Kind kind = Kind::automatic;
  std::vector<int> gpu_ids;                        // empty with Kind::gpu = every GPU
  static DeviceSpec parse(std::string_view text);  // throws InputError("--device", 0, ...)
  std::string to_string() const;
};

// Backend choice shared by engines whose fast paths are one CPU and one CUDA implementation
// (align, lingo): automatic = what the Resources select. `--backend auto|reference|cpu|cuda`
// ("gpu" is accepted for cuda). Engines with more GPU paths (orbital) have their own enum.
enum class ComputeBackend { automatic, reference, cpu, cuda };
std::string_view to_string(ComputeBackend backend);
ComputeBackend parse_compute_backend(std::string_view text);  // throws InputError("--backend", 0, ...)

class WorkerPool;
class PinnedPool;

// What runs a job: CPU threads and/or GPUs. Cheap to copy (shares the worker pool).
class Resources {
 public:
  struct Options {
    DeviceSpec device;
    int cpu_threads = 0;                // 0 = all logical cores
    bool cpu_worker_with_gpus = false;  // add a CPU worker beside the GPUs in the scheduler
    bool show_progress = false;
  };
  // Resolves the spec against this machine: `gpu` without a GPU (or without CUDA in this build)
  // throws DeviceUnavailable / NotCompiled; `auto` falls back to the CPU and says so in the log.
  static Resources create(const Options& options);
  static Resources cpu(int threads = 0);  // CPU only; convenient for tests

  bool uses_gpu() const { return !gpus_.empty(); }
  bool uses_cpu() const { return gpus_.empty() || cpu_worker_with_gpus_; }
  const std::vector<int>& gpus() const { return gpus_; }
  int cpu_threads() const { return cpu_threads_; }
  bool show_progress() const { return show_progress_; }
  std::string describe() const;  // "cpu (8 threads)" or "gpu:0 (the GPU's name)"
  WorkerPool& pool() const;
  PinnedPool& pinned_pool() const;  // page-locked staging shared by this handle's jobs

 private:
  std::vector<int> gpus_;
  int cpu_threads_ = 1;
  bool cpu_worker_with_gpus_ = false;
  bool show_progress_ = false;
  std::shared_ptr<WorkerPool> pool_;
};

// ---------------------------------------------------------------------------------------------
// Tile scheduler (the VMD multi-GPU design): one persistent thread per device, a shared iterator
// hands out tiles dynamically, failed tiles are retried on another worker.
// ---------------------------------------------------------------------------------------------
struct WorkerInfo {
  enum class Kind { cpu, gpu };
  Kind kind = Kind::cpu;
  int device = -1;           // CUDA device ordinal for GPU workers
  int index = 0;             // position in the pool
  int cpu_threads = 1;       // threads a CPU worker may use inside one tile
  std::string name() const;  // "cpu" or "gpu:1"
};

class CancelToken {
 public:
  void cancel() noexcept { flag_.store(true, std::memory_order_relaxed); }
  bool cancelled() const noexcept { return flag_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> flag_{false};
};

// Page-locked host memory lent by a PinnedPool; goes back to the pool when destroyed. Where memory
// cannot be page-locked (no driver, CPU-only build, refused) it is ordinary memory: copies into it
// are then correct but not asynchronous.
class PinnedBlock {
 public:
  PinnedBlock() = default;
  ~PinnedBlock();
  PinnedBlock(PinnedBlock&& other) noexcept;
  PinnedBlock& operator=(PinnedBlock&& other) noexcept;
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  std::byte* data() const noexcept { return data_; }
  template <class T>
  T* as() const noexcept {
    return reinterpret_cast<T*>(data_);
  }
  std::size_t bytes() const noexcept { return bytes_; }
  bool page_locked() const noexcept { return page_locked_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

 private:
  friend class PinnedPool;
  struct Store;
  std::shared_ptr<Store> store_;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool page_locked_ = false;
};

// The one pool of page-locked staging memory. Page-locking costs milliseconds (and the driver
// serialises it across GPUs), more than a small request takes, so blocks are kept from job to
// job. Each Resources handle owns one (shared by its workers and copies); thread-safe.
class PinnedPool {
 public:
  PinnedPool();
  // A block of at least `bytes` (the smallest kept one that fits, else a new one).
  PinnedBlock take(std::size_t bytes);
  std::size_t kept_bytes() const;  // held for reuse now

 private:
  std::shared_ptr<PinnedBlock::Store> store_;
};

// What a worker sees of its job and of itself.
// - `ctx.local<T>()`: per-job state, created on first use on that worker (on the worker's own
//   thread, with its device current) and destroyed when the job ends.
// - `ctx.kept<T>()`: per-worker state kept from job to job for the life of the Resources handle
//   (device scratch, streams, a device's copy of the inputs), destroyed on the worker's thread,
//   device current, when the worker pool stops. The user resets what a job sets.
// - `ctx.pinned_pool()`: the Resources' pool of page-locked staging memory.
class WorkerContext {
 public:
  struct Slots {
    template <class T, class... Args>
    T& get(Args&&... args) {
      for (auto& slot : slots)
        if (slot.type == std::type_index(typeid(T))) return *static_cast<T*>(slot.ptr.get());
      auto owned = std::make_shared<T>(std::forward<Args>(args)...);
      T& ref = *owned;
      slots.push_back({std::type_index(typeid(T)), std::shared_ptr<void>(std::move(owned))});
      return ref;
    }
    void clear() {
      while (!slots.empty()) slots.pop_back();  // newest first: later slots may use earlier ones
    }
    struct Slot {
      std::type_index type;
      std::shared_ptr<void> ptr;
    };
    std::vector<Slot> slots;
  };

  explicit WorkerContext(const WorkerInfo& info, Slots* kept = nullptr, PinnedPool* pinned = nullptr)
      : info_(info), kept_(kept), pinned_(pinned) {}
  ~WorkerContext() { clear(); }
  WorkerContext(const WorkerContext&) = delete;
  WorkerContext& operator=(const WorkerContext&) = delete;
  const WorkerInfo& worker() const { return info_; }
  template <class T, class... Args>
  T& local(Args&&... args) {
    return job_.get<T>(std::forward<Args>(args)...);
  }
  // Outside a worker pool (a context made by hand) kept state lasts as long as the context.
  template <class T, class... Args>
  T& kept(Args&&... args) {
    return (kept_ ? *kept_ : own_kept_).get<T>(std::forward<Args>(args)...);
  }
  // Outside a worker pool, a pool of the context's own.
  PinnedPool& pinned_pool() { return pinned_ ? *pinned_ : own_pinned_; }
  void clear() {
    job_.clear();
    own_kept_.clear();
  }

 private:
  WorkerInfo info_;
  Slots* kept_;
  PinnedPool* pinned_;
  Slots job_, own_kept_;
  PinnedPool own_pinned_;
};

struct JobOptions {
  std::string name = "job";  // shown in progress bars and logs
  const CancelToken* cancel = nullptr;
  // Called after each finished tile with (tiles done, tiles total); serialised by the scheduler.
  std::function<void(std::size_t, std::size_t)> on_progress;
  // Tests: return true to make `tile` fail on `worker` at this attempt (0 = first try).
  std::function<bool(const WorkerInfo&, std::size_t tile, int attempt)> inject_fault;
  bool progress_bar = true;  // draw a bar when Resources::show_progress()
};

struct JobStats {
  std::size_t tiles = 0;
  std::size_t retries = 0;
  std::vector<std::size_t> tiles_per_worker;  // indexed like WorkerPool::workers()
  double seconds = 0;
};

using TileFunction = std::function<void(WorkerContext&, std::size_t tile)>;

class WorkerPool {
 public:
  explicit WorkerPool(std::vector<WorkerInfo> workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  const std::vector<WorkerInfo>& workers() const { return workers_; }
  PinnedPool& pinned_pool() const;
  // Runs tiles [0, n_tiles) over the workers; every tile runs successfully exactly once or the
  // job throws. A tile that throws is handed to another worker; when every worker has failed a
  // tile, the job stops and rethrows that tile's last error. One job at a time per pool.
  JobStats run(std::size_t n_tiles, const TileFunction& fn, const JobOptions& options = {});

 private:
  struct Impl;
  std::vector<WorkerInfo> workers_;
  std::unique_ptr<Impl> impl_;
};

// Shortcut: resources.pool().run(...), with a progress bar when resources show progress.
JobStats run_tiles(const Resources& resources, std::size_t n_tiles, const TileFunction& fn,
                   const JobOptions& options = {});

// Splits [0, n) into tiles of at most `tile` elements; tile i covers [begin(i), end(i)).
struct TileRange {
  std::size_t n = 0, tile = 1;
  std::size_t count() const { return tile == 0 ? 0 : (n + tile - 1) / tile; }
  std::size_t begin(std::size_t i) const { return i * tile; }
  std::size_t end(std::size_t i) const { return std::min(n, (i + 1) * tile); }
};

// Runs fn(begin, end) over [0, n) on `threads` threads (0 = all cores), in chunks handed out
// dynamically. Used inside a CPU tile. Exceptions are rethrown on the calling thread.
void parallel_for(std::size_t n, int threads, std::size_t chunk,
                  const std::function<void(std::size_t, std::size_t)>& fn);

// ---------------------------------------------------------------------------------------------
// JIT: NVRTC compile of generated CUDA source, cached in memory and on disk.
// ---------------------------------------------------------------------------------------------
struct JitRequest {
  std::string source;                            // complete CUDA C++ translation unit
  std::string program_name = "molaccel_jit.cu";  // shown in compile errors
  std::vector<std::string> kernel_names;         // name expressions, e.g. "my_kernel" or "f<float>"
  std::vector<std::string> options;              // extra NVRTC options, e.g. "-use_fast_math"
  std::string arch;                              // "sm_90"; empty = first selected GPU, else build default
};

struct JitProgram {
  std::string cubin;  // CUBIN image for `arch`
  std::string arch;
  std::vector<std::string> kernel_names;   // as requested
  std::vector<std::string> lowered_names;  // mangled symbols, same order
  std::string log;                         // NVRTC log (warnings)
  std::string key;                         // cache key (hex)
  enum class Origin { compiled, memory_cache, disk_cache } origin = Origin::compiled;
  const std::string& lowered(std::string_view kernel_name) const;
};

struct JitCacheStats {
  std::size_t memory_hits = 0, disk_hits = 0, misses = 0, corrupt_rebuilt = 0, disk_write_failures = 0;
  // Entries not loaded because someone else could have written them (not owned by this user,
  // writable by others, a link). A cache directory that is not private is not read at all.
  std::size_t untrusted_ignored = 0;
};

// Whether NVRTC could be loaded (it is loaded lazily, so CPU-only builds can use it too), and
// its version as major*1000+minor*10 (like CUDA_VERSION), or 0.
bool nvrtc_available();
int nvrtc_version();

class JitCache {
 public:
  // dir empty = MOLACCEL_CACHE_DIR, else $XDG_CACHE_HOME/molaccel, else ~/.cache/molaccel.
  // The directory is created owner-only (0700). One that is writable by its group or others, or
  // not owned by this user, is not used (a warning names it; programs are compiled in memory only).
  // Entries are written owner-only (0600) through an exclusively created temporary file; an entry
  // not owned by this user, writable by others or a link is ignored and replaced.
  explicit JitCache(std::filesystem::path dir = {});
  ~JitCache();
  JitCache(const JitCache&) = delete;
  JitCache& operator=(const JitCache&) = delete;

  // Returns the compiled program, from memory, disk or a fresh NVRTC compile (then stored).
  // Throws NvrtcError on a compile error, NotCompiled when NVRTC cannot be loaded.
  JitProgram compile(const JitRequest& request);
  std::string key_for(const JitRequest& request) const;  // the cache key the request maps to
  std::filesystem::path entry_path(const std::string& key) const;
  const std::filesystem::path& directory() const { return dir_; }
  JitCacheStats stats() const;
  void clear_memory();

 private:
  struct Impl;
  std::filesystem::path dir_;
  std::unique_ptr<Impl> impl_;
};

JitCache& default_jit_cache();  // process-wide, created on first use (thread-safe)

// Waits for the work the library left running in the background after a call returned: the
// orbital JIT kernel's compile, started while the generic kernel computes a new basis set's first
// grid, which fills the disk cache for later runs. Call it before the process ends (the CLI, the
// Python module and the tests do): exit() destroys the compiler's own statics, and a compile still
// running then crashes or hangs the process, whatever joins it from a static destructor.
void finish_background_work();
// Registers `wait` with finish_background_work, for the life of the process (the engines' own
// background work).
void on_finish_background_work(std::function<void()> wait);

// Directory where generated kernels are dumped (MOLACCEL_DUMP_KERNELS), if set.
std::optional<std::filesystem::path> kernel_dump_dir();
// Writes `source` as `file_name` in the dump directory when MOLACCEL_DUMP_KERNELS is set: created
// exclusively under a temporary name and renamed into place (a link there is replaced, not
// followed). Failures are logged as warnings, never thrown.
void dump_kernel_source(const std::string& file_name, std::string_view source);

// ---------------------------------------------------------------------------------------------
// Logging and progress (stderr).
// ---------------------------------------------------------------------------------------------
enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };
void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, std::string_view message);
// fmt checks format strings at compile time with consteval, which nvcc cannot evaluate: in CUDA
// sources the log helpers take a run-time format string, and .cu code formats with
// fmt::format(fmt::runtime("..."), ...).
#ifdef __CUDACC__
#define MOLACCEL_LOG_HELPER(name, level)                                                           \
  template <class... Args>                                                                         \
  void name(std::string_view f, const Args&... args) {                                             \
    if (log_level() >= level) log_message(level, fmt::vformat(f, fmt::make_format_args(args...))); \
  }
#else
#define MOLACCEL_LOG_HELPER(name, level)                                                       \
  template <class... Args>                                                                     \
  void name(fmt::format_string<Args...> f, Args&&... args) {                                   \
    if (log_level() >= level) log_message(level, fmt::format(f, std::forward<Args>(args)...)); \
  }
#endif
MOLACCEL_LOG_HELPER(log_warn, LogLevel::warn)
MOLACCEL_LOG_HELPER(log_info, LogLevel::info)
MOLACCEL_LOG_HELPER(log_debug, LogLevel::debug)
#undef MOLACCEL_LOG_HELPER

// Engine traces on stderr (per-stage timings for performance work): `MOLACCEL_TRACE=align,orbital`
// names the engines to trace ("all" traces every engine). Read once per process, on first use.
bool trace_enabled(std::string_view engine);
// Prints one trace line, "molaccel trace ENGINE: message", when trace_enabled(engine).
void trace_message(std::string_view engine, std::string_view message);

// Global switch for progress bars (the CLI's --quiet turns them off).
void set_progress_enabled(bool enabled);
bool progress_enabled();

// A progress bar on stderr (done/total, elapsed time and the estimated time left); draws only when
// stderr is a terminal and progress is enabled, and only once the task has run half a second.
// Thread-safe; redraws at most ~10 times a second.
class ProgressBar {
 public:
  ProgressBar(std::string title, std::size_t total, std::string unit = "tiles");
  ~ProgressBar();
  void advance(std::size_t n = 1);
  void set(std::size_t done);
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Small shared utilities.
// ---------------------------------------------------------------------------------------------
// Host memory that GPUs can write by DMA: page-locked (cudaHostAlloc) when a CUDA driver is
// usable, ordinary memory otherwise (CPU-only builds, no driver, or page-locking refused). Engines
// that land results in host memory copy straight into page-locked memory (no host-side copy), so
// this is the fast destination for large results. Page-locking costs about as much as copying the
// bytes once: allocate once, reuse. `page_locked` says which kind was obtained.
struct HostBuffer {
  std::shared_ptr<std::byte> data;
  std::size_t bytes = 0;
  bool page_locked = false;
};
HostBuffer allocate_host_buffer(std::size_t bytes);

// Writes a file atomically: the callback writes to a temporary file in the same directory,
// which is renamed over `path` only when the callback returns; on an exception it is removed.
// Inside an OutputGroup the rename waits for the group's commit().
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::FILE*)>& write);
// Several outputs that appear together or not at all (the cubes of several fields, OBJ + MTL).
// While a group lives, write_file_atomically on the thread that made it writes each output to its
// temporary file (permissions set, closed) without renaming it; commit() renames them all into
// place, in the order written. A group destroyed without commit() (an exception on the way) removes
// every temporary file: none of its outputs appears and older files under those names stay as they
// were. Outputs written through (standard output, devices, pipes) are written at once. A group made
// while another is active on the thread joins it: the outermost one commits. The renames of a commit
// are separate steps: only a rename itself failing (or SIGKILL between two) can leave part of the
// group renamed; the staged files are removed on SIGINT, SIGTERM and SIGHUP like every temporary.
class OutputGroup {
 public:
  OutputGroup();
  ~OutputGroup();
  OutputGroup(const OutputGroup&) = delete;
  OutputGroup& operator=(const OutputGroup&) = delete;
  void commit();
  struct Impl;  // opaque

 private:
  std::unique_ptr<Impl> impl_;
};
// For programs (the molaccel command): on SIGINT, SIGTERM or SIGHUP, the temporary files of outputs
// being written are removed and the process exits with 128 + the signal (130, 143, 129). The
// library itself installs no signal handler.
void remove_temporaries_on_signals();
std::string hash_hex(std::string_view data);  // 128-bit non-cryptographic hash, 32 hex digits
std::uint64_t hash64(std::string_view data, std::uint64_t seed = 0);
bool stderr_is_terminal();
double now_seconds();  // monotonic clock

}  // namespace molaccel

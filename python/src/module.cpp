// molaccel._core: the nanobind extension behind the molaccel Python package. The pure-Python
// modules (python/molaccel/*.py) turn Python inputs into the arguments bound here and write the
// docstrings users read.
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "device_array.hpp"

namespace molaccel::python {

namespace {

struct KeptResources {
  std::mutex mutex;         // guards the maps; never held while a handle is created
  std::mutex create_mutex;  // one handle created at a time
  // By the request's canonical DeviceSpec, and by the arguments as given (the fast path of every
  // call after the first: no parsing, no GIL release).
  std::map<std::tuple<std::string, int, bool>, Resources> handles;
  std::map<std::tuple<std::string, int, bool>, Resources> by_request;
};

KeptResources& kept_resources() {
  static KeptResources kept;
  return kept;
}

}  // namespace

Resources resources_for(const std::string& device, int threads, bool progress) {
  KeptResources& kept = kept_resources();
  auto request = std::make_tuple(device, threads, progress);
  {
    std::lock_guard lock(kept.mutex);
    if (auto it = kept.by_request.find(request); it != kept.by_request.end()) return it->second;
  }
  const DeviceSpec spec = DeviceSpec::parse(device);  // InputError("--device") on bad text
  if (threads < 0) throw InputError("threads", 0, "must be >= 0 (0 = all cores)");
  if (progress) set_progress_enabled(true);
  nb::gil_scoped_release release;  // the first request queries the GPUs and creates contexts
  std::lock_guard creating(kept.create_mutex);
  const auto key = std::make_tuple(spec.to_string(), threads, progress);
  std::optional<Resources> found;
  {
    std::lock_guard lock(kept.mutex);
    if (auto it = kept.handles.find(key); it != kept.handles.end()) found = it->second;
  }
  if (!found) {
    Resources::Options options;
    options.device = spec;
    options.cpu_threads = threads;
    options.show_progress = progress;
    found = Resources::create(options);
  }
  std::lock_guard lock(kept.mutex);
  kept.handles.emplace(key, *found);
  kept.by_request.emplace(std::move(request), *found);
  return *found;
}

ResultMemory result_memory(const Resources& resources, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 1);
  ResultMemory out;
  if (bytes <= kPooledResultBytes) {
    auto* block = new PinnedBlock(resources.pinned_pool().take(bytes));
    out.data = block->data();
    out.owner = nb::capsule(block, [](void* p) noexcept { delete static_cast<PinnedBlock*>(p); });
  } else if (resources.uses_gpu()) {
    auto* buffer = new HostBuffer(allocate_host_buffer(bytes));
    out.data = buffer->data.get();
    out.owner = nb::capsule(buffer, [](void* p) noexcept { delete static_cast<HostBuffer*>(p); });
  } else {  // nothing writes it by DMA: no page-locking
    const NewArray<std::byte> array = new_array<std::byte>(bytes);
    out.data = array.data;
    out.owner = array.owner;
  }
  return out;
}

// Called from Python's atexit: a kernel compiling in the background finishes (finish_background_work:
// before exit() destroys the compiler's statics), and the worker pools stop (and free their GPU
// state) while the CUDA runtime is still up, not in a static destructor after it has been torn down.
void release_resources() {
  nb::gil_scoped_release release;
  molaccel::finish_background_work();
  release_kept_gpu_workers();
  std::map<std::tuple<std::string, int, bool>, Resources> handles, by_request;
  {
    std::lock_guard lock(kept_resources().mutex);
    handles.swap(kept_resources().handles);
    by_request.swap(kept_resources().by_request);
  }
}

namespace {

nb::list engines() {
  nb::list list;
#ifndef MOLACCEL_PYTHON_NO_LINGO
  list.append("lingo");
#endif
#ifndef MOLACCEL_PYTHON_NO_ALIGN
  list.append("align");
#endif
#ifndef MOLACCEL_PYTHON_NO_ORBITAL
  list.append("orbital");
#endif
#ifndef MOLACCEL_PYTHON_NO_LINALG
  list.append("linalg");
#endif
  return list;
}

nb::dict info() {
  const BuildInfo& build = build_info();
  const CpuInfo& cpu = cpu_info();
  nb::dict d;
  d["version"] = build.version;
  d["cuda"] = build.cuda;
  d["cuda_version"] = build.cuda_version;
  d["cuda_archs"] = build.cuda_archs;
  d["compiler"] = build.compiler;
  d["build_type"] = build.build_type;
  nb::dict c;
  c["model"] = cpu.model;
  c["logical_cores"] = cpu.logical_cores;
  c["simd"] = std::string(to_string(cpu.simd));
  d["cpu"] = c;
  nb::list gpus;
  std::vector<GpuInfo> list;
  {
    nb::gil_scoped_release release;  // the first call creates a context on every GPU
    list = gpu_list();
  }
  for (const GpuInfo& g : list) {
    nb::dict e;
    e["index"] = g.index;
    e["name"] = g.name;
    e["arch"] = g.arch();
    e["sm_count"] = g.sm_count;
    e["total_memory"] = g.total_memory;
    e["free_memory"] = g.free_memory;
    gpus.append(e);
  }
  d["gpus"] = gpus;
  d["gpu_absence_reason"] = list.empty() ? gpu_absence_reason() : std::string();
  d["nvrtc"] = nvrtc_available() ? nvrtc_version() : 0;
  d["engines"] = engines();
  return d;
}

}  // namespace
}  // namespace molaccel::python

NB_MODULE(_core, m) {
  using namespace molaccel::python;
  m.doc() = "molaccel's compiled core; use the molaccel package, not this module.";
  register_errors(m);
  bind_device_array(m);
  m.def("info", &info);
  // What the package needs at import: no driver query (info() creates a context on every GPU).
  m.def("version", [] { return std::string(molaccel::build_info().version); });
  m.def("engines", &engines);
  m.def("resources_describe", [](const std::string& device, int threads) {
    return resources_for(device, threads, false).describe();
  });
  m.def("release_resources", &release_resources);
  m.def("set_log_level", [](int level) {
    molaccel::set_log_level(static_cast<molaccel::LogLevel>(level < 0 ? 0 : (level > 3 ? 3 : level)));
  });
  m.def("log_level", [] { return static_cast<int>(molaccel::log_level()); });
#ifndef MOLACCEL_PYTHON_NO_LINGO
  nb::module_ lingo = m.def_submodule("lingo");
  bind_lingo(lingo);
#endif
#ifndef MOLACCEL_PYTHON_NO_ALIGN
  nb::module_ align = m.def_submodule("align");
  bind_align(align);
#endif
#ifndef MOLACCEL_PYTHON_NO_ORBITAL
  nb::module_ orbital = m.def_submodule("orbital");
  bind_orbital(orbital);
#endif
#ifndef MOLACCEL_PYTHON_NO_LINALG
  nb::module_ linalg = m.def_submodule("linalg");
  bind_linalg(linalg);
#endif
}

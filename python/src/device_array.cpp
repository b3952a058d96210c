// DLPack and __cuda_array_interface__ over memory handed out by the bindings, and the arrays of
// engine results left on a GPU (see device_array.hpp).
#include "device_array.hpp"

#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <string>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#ifdef MOLACCEL_HAVE_CUDA
#include "runtime/cuda/cuda_support.hpp"
#endif

namespace molaccel::python {

namespace {

std::size_t element_bytes(nb::dlpack::dtype dtype) {
  return (dtype.bits / 8u) * dtype.lanes;
}

// NumPy's name of the dtype ("float32", "uint8", ...) and its array-interface type string.
std::string dtype_name(nb::dlpack::dtype dtype) {
  const char* kind = dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float)  ? "float"
                     : dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt) ? "uint"
                                                                                             : "int";
  return kind + std::to_string(dtype.bits);
}

std::string typestr(nb::dlpack::dtype dtype) {
  const char kind = dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float)  ? 'f'
                    : dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt) ? 'u'
                                                                                            : 'i';
  return std::string("<") + kind + std::to_string(element_bytes(dtype));
}

nb::tuple shape_tuple(const DeviceView& view) {
  nb::list shape;
  for (std::size_t s : view.shape) shape.append(s);
  return nb::tuple(shape);
}

// DLPack's `stream`: nothing to wait for (the memory is complete), so only checked.
void check_stream(const DeviceView& view, nb::handle stream) {
  if (stream.is_none()) return;
  if (view.device < 0) throw nb::buffer_error("this memory is on the host: DLPack's stream must be None");
  if (!nb::isinstance<nb::int_>(stream))
    throw nb::type_error("DLPack stream: None, -1, 1, 2 or a CUDA stream handle (an int)");
  if (nb::cast<long long>(stream) == 0)
    throw nb::value_error("DLPack stream 0 is ambiguous: use 1 (legacy default stream) or 2 (per-thread)");
}

}  // namespace

std::size_t DeviceArray::elements() const {
  return std::accumulate(view.shape.begin(), view.shape.end(), std::size_t{1}, std::multiplies<>());
}

nb::ndarray<> dlpack_array(nb::handle owner, const DeviceView& view, nb::handle stream) {
  check_stream(view, stream);
  const bool gpu = view.device >= 0;
  return nb::ndarray<>(view.data, view.shape.size(), view.shape.data(), owner, nullptr, view.dtype,
                       gpu ? nb::device::cuda::value : nb::device::cpu::value, gpu ? view.device : 0);
}

nb::tuple dlpack_device(const DeviceView& view) {
  return view.device < 0 ? nb::make_tuple(nb::device::cpu::value, 0)
                         : nb::make_tuple(nb::device::cuda::value, view.device);
}

nb::dict cuda_array_interface(const DeviceView& view) {
  if (view.device < 0) throw nb::attribute_error("this memory is on the host (use DLPack or NumPy)");
  nb::dict d;
  d["shape"] = shape_tuple(view);
  d["typestr"] = typestr(view.dtype);
  d["data"] = nb::make_tuple(reinterpret_cast<std::uintptr_t>(view.data), false);
  d["version"] = 3;
  d["strides"] = nb::none();
  d["stream"] = nb::none();  // complete when handed out: nothing to wait for
  return d;
}

int output_device(const Resources& resources) {
#ifdef MOLACCEL_HAVE_CUDA
  if (!resources.uses_gpu())
    throw DeviceUnavailable(
        fmt::format("device_output=True needs a GPU, but the call runs on {}", resources.describe()),
        __FILE__, __LINE__);
  return resources.gpus().front();
#else
  (void)resources;
  MOLACCEL_THROW(NotCompiled, "device_output=True (this build has no CUDA)");
#endif
}

DeviceArray new_device_array(int device, nb::dlpack::dtype dtype, std::vector<std::size_t> shape) {
  DeviceArray a;
  a.view.device = device;
  a.view.dtype = dtype;
  a.view.shape = std::move(shape);
#ifdef MOLACCEL_HAVE_CUDA
  cuda::DeviceGuard guard(device);
  void* p = nullptr;
  MOLACCEL_CUDA_TRY(cudaMalloc(&p, std::max<std::size_t>(a.elements() * element_bytes(dtype), 1)));
  a.memory = std::shared_ptr<void>(p, [](void* q) { MOLACCEL_CUDA_TRY_NOTHROW(cudaFree(q)); });
  a.view.data = p;
#else
  MOLACCEL_THROW(NotCompiled, "device_output=True (this build has no CUDA)");
#endif
  return a;
}

#ifdef MOLACCEL_HAVE_CUDA
namespace {

struct KeptGpuWorker {
  std::mutex mutex;  // one call at a time on this state
  WorkerContext::Slots slots;
};

struct KeptGpuWorkers {
  std::mutex mutex;
  std::map<int, std::unique_ptr<KeptGpuWorker>> by_device;
};

KeptGpuWorkers& kept_gpu_workers() {
  static auto* kept = new KeptGpuWorkers;  // emptied by release_kept_gpu_workers, never destroyed
  return *kept;
}

}  // namespace
#endif

void with_kept_gpu_worker(int device, const Resources& resources,
                          const std::function<void(WorkerContext&)>& fn) {
#ifdef MOLACCEL_HAVE_CUDA
  KeptGpuWorker* kept = nullptr;
  {
    KeptGpuWorkers& all = kept_gpu_workers();
    std::lock_guard lock(all.mutex);
    auto& slot = all.by_device[device];
    if (!slot) slot = std::make_unique<KeptGpuWorker>();
    kept = slot.get();
  }
  std::lock_guard lock(kept->mutex);
  cuda::DeviceGuard guard(device);
  WorkerInfo worker;
  worker.kind = WorkerInfo::Kind::gpu;
  worker.device = device;
  WorkerContext ctx(worker, &kept->slots, &resources.pinned_pool());
  fn(ctx);
#else
  (void)device;
  (void)resources;
  (void)fn;
  MOLACCEL_THROW(NotCompiled, "device_output=True (this build has no CUDA)");
#endif
}

void release_kept_gpu_workers() {
#ifdef MOLACCEL_HAVE_CUDA
  KeptGpuWorkers& all = kept_gpu_workers();
  std::lock_guard lock(all.mutex);
  for (auto& [device, kept] : all.by_device) {
    std::lock_guard kept_lock(kept->mutex);
    cuda::DeviceGuard guard(device);
    kept->slots.clear();
  }
  all.by_device.clear();
#endif
}

void bind_device_array(nb::module_& m) {
  nb::class_<DeviceArray>(m, "DeviceArray",
                          "An engine's result in GPU memory (device_output=True): DLPack and "
                          "__cuda_array_interface__ hand it to CuPy and PyTorch without a copy "
                          "(cupy.asarray(a), torch.from_dlpack(a)); to_numpy() copies it to the host.")
      .def_prop_ro("shape", [](const DeviceArray& a) { return shape_tuple(a.view); })
      .def_prop_ro("dtype", [](const DeviceArray& a) { return dtype_name(a.view.dtype); })
      .def_prop_ro("device", [](const DeviceArray& a) { return a.view.device; })
      .def_prop_ro("nbytes", [](const DeviceArray& a) { return a.elements() * element_bytes(a.view.dtype); })
      .def_prop_ro("pointer",
                   [](const DeviceArray& a) { return reinterpret_cast<std::uintptr_t>(a.view.data); })
      .def("__len__", [](const DeviceArray& a) { return a.view.shape.empty() ? 0 : a.view.shape[0]; })
      .def(
          "__dlpack__",
          [](nb::handle self, nb::handle stream, nb::handle, nb::handle dl_device, nb::handle copy) {
            const DeviceArray& a = nb::cast<const DeviceArray&>(self);
            if (!dl_device.is_none() && !dlpack_device(a.view).equal(dl_device))
              throw nb::buffer_error("this array is on another device (copy it with its framework)");
            if (!copy.is_none() && nb::cast<bool>(copy))
              throw nb::buffer_error("DLPack copy=True is not supported (copy with the consumer)");
            return dlpack_array(self, a.view, stream);
          },
          nb::kw_only(), nb::arg("stream").none() = nb::none(), nb::arg("max_version").none() = nb::none(),
          nb::arg("dl_device").none() = nb::none(), nb::arg("copy").none() = nb::none())
      .def("__dlpack_device__", [](const DeviceArray& a) { return dlpack_device(a.view); })
      .def_prop_ro("__cuda_array_interface__",
                   [](const DeviceArray& a) { return cuda_array_interface(a.view); })
      .def("to_numpy", [](const DeviceArray& a) {
        // A host copy, in the array's own dtype.
        auto host = new_array<std::byte>(a.elements() * element_bytes(a.view.dtype));
        {
          nb::gil_scoped_release release;
#ifdef MOLACCEL_HAVE_CUDA
          cuda::DeviceGuard guard(a.view.device);
          MOLACCEL_CUDA_TRY(cudaMemcpy(host.data, a.view.data, a.elements() * element_bytes(a.view.dtype),
                                       cudaMemcpyDeviceToHost));
#endif
        }
        return nb::ndarray<nb::numpy>(host.data, a.view.shape.size(), a.view.shape.data(), host.owner,
                                      nullptr, a.view.dtype);
      });
}

}  // namespace molaccel::python

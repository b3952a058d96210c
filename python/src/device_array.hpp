// Memory handed to other frameworks without a copy, one mechanism for every producer (engine
// results left on a GPU, linalg containers): DLPack (__dlpack__, __dlpack_device__) and the CUDA
// Array Interface (v3).
//
// Streams: the producer has finished writing the memory when it is handed out (the engines wait
// for their own stream before a call returns; a linalg container waits for linalg's stream on its
// device), so the consumer may use it at once on any stream, its own included. DLPack's `stream`
// argument is therefore checked, not waited on: None, -1, 1 (legacy default stream), 2
// (per-thread default stream) or a stream handle of the memory's device; 0 is refused, as the
// protocol says. __cuda_array_interface__'s "stream" is None (nothing to wait for).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "common.hpp"

namespace molaccel::python {

struct DeviceView {
  void* data = nullptr;
  int device = -1;  // CUDA device; -1: host memory
  nb::dlpack::dtype dtype;
  std::vector<std::size_t> shape;
};

// A DLPack-capable array over `view` (returned to Python: a "dltensor" capsule), keeping `owner`
// (the Python object that owns the memory) alive; `stream` as the protocol's (see above).
nb::ndarray<> dlpack_array(nb::handle owner, const DeviceView& view, nb::handle stream);
nb::tuple dlpack_device(const DeviceView& view);
nb::dict cuda_array_interface(const DeviceView& view);  // GPU memory only (else AttributeError)

// An engine's result left on a GPU (`device_output=True`): device memory owned by the array,
// freed when the last reference (Python's or a consumer's view) goes.
struct DeviceArray {
  std::shared_ptr<void> memory;
  DeviceView view;
  std::size_t elements() const;
};

// Uninitialised device memory for `shape` elements of `dtype` on `device` (CUDA builds; others
// throw NotCompiled). Called without the GIL.
DeviceArray new_device_array(int device, nb::dlpack::dtype dtype, std::vector<std::size_t> shape);

// The GPU that a device_output=True call of `resources` writes to (its first GPU); without one,
// DeviceUnavailable (NotCompiled in a build without CUDA).
int output_device(const Resources& resources);

// Runs `fn` with a GPU worker context for `device` whose kept state (ctx.kept<T>()) lasts from
// call to call, as a Resources' GPU worker keeps its uploads and programs from job to job; its
// per-call state (ctx.local<T>()) is new each call. One call per GPU at a time, the GPU current.
// For device_output calls that drive an engine's CUDA backend directly. Called without the GIL.
void with_kept_gpu_worker(int device, const Resources& resources,
                          const std::function<void(WorkerContext&)>& fn);
// Frees that kept state (from release_resources, while the CUDA runtime is up).
void release_kept_gpu_workers();

void bind_device_array(nb::module_& m);

}  // namespace molaccel::python

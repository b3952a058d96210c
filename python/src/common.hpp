// Shared pieces of the Python bindings: the Resources a call runs on, and the registration
// functions of each engine's bindings (one file per engine).
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "molaccel/runtime.hpp"

namespace molaccel::python {

namespace nb = nanobind;

// The Resources for `device` ("auto", "cpu", "gpu", "gpu:0,2"), `threads` (0 = all cores) and
// `progress`: one handle per distinct request, kept for the life of the process, so a GPU keeps
// its uploads and scratch between calls as it does inside one CLI run. Jobs on one handle run one
// at a time (the worker pool serialises them); calls from several Python threads are safe.
// Called with the GIL held; a request seen before is a map lookup, a new one releases the GIL
// while it parses, queries the GPUs and creates.
Resources resources_for(const std::string& device, int threads, bool progress);

// Memory for a result array and the capsule that owns it (the array's base object).
struct ResultMemory {
  std::byte* data = nullptr;
  nb::capsule owner;
};

// `bytes` of host memory for a result returned to Python, written in place by the engine (the
// array is made over it: no copy). Up to kPooledResultBytes it is a block of the Resources'
// PinnedPool (memory GPUs write by DMA) that goes back to the pool when the array is freed, so
// repeated calls neither page-lock (cudaHostAlloc / cudaFreeHost cost milliseconds per call, more
// than the GPU takes for an orbital grid) nor fault in and unmap fresh pages (about a tenth of a
// millisecond per call for a 5 MB grid). Larger results get memory of their own, freed with the
// array: page-locked with GPUs, ordinary without. Called with the GIL held.
inline constexpr std::size_t kPooledResultBytes = std::size_t(256) << 20;
ResultMemory result_memory(const Resources& resources, std::size_t bytes);

// An uninitialised array of `n` T for a result that the caller fills completely (no zero fill:
// page faults and writes happen once, in the filling threads). Called with the GIL held.
template <class T>
struct NewArray {
  T* data = nullptr;
  nb::capsule owner;
};
template <class T>
NewArray<T> new_array(std::size_t n) {
  T* data = new T[std::max<std::size_t>(n, 1)];
  return {data, nb::capsule(data, [](void* p) noexcept { delete[] static_cast<T*>(p); })};
}

// A NumPy array over `data` of `shape`, kept alive by `owner`.
template <class T>
nb::ndarray<nb::numpy, T> numpy_array(T* data, std::initializer_list<std::size_t> shape, nb::capsule owner) {
  return nb::ndarray<nb::numpy, T>(data, shape.size(), shape.begin(), owner);
}

// A NumPy array that owns `values` (moved to the heap; freed with the array).
template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& values, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

void register_errors(nb::module_& m);
void bind_lingo(nb::module_& m);
void bind_align(nb::module_& m);
void bind_orbital(nb::module_& m);
void bind_linalg(nb::module_& m);
void bind_linalg_expressions(nb::module_& m);

}  // namespace molaccel::python

// Shared pieces of the Python bindings: the Resources a call runs on, and the registration
// functions of each engine's bindings (one file per engine).
#pragma once

#include <cstddef>
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
// Called with the GIL held; releases it while it waits and creates.
Resources resources_for(const std::string& device, int threads, bool progress);

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

// Orbitals on OpenCL (internal): one evaluation's program and buffers on a device, so that the
// kernel can be timed apart from the set-up (bench_orbital_opencl). evaluate_orbitals_opencl
// (molaccel/opencl.hpp) is built on it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital::opencl_backend {

class Evaluation {
 public:
  // Packs the basis, builds the kernel (JIT: options.backend automatic or cuda_jit; generic:
  // cuda_generic) and uploads the basis and the grid.
  Evaluation(int device, const Wavefunction& wavefunction, const GridSpec& grid,
             const std::vector<OrbitalRef>& orbitals, const EvaluateOptions& options);
  ~Evaluation();
  Evaluation(const Evaluation&) = delete;
  Evaluation& operator=(const Evaluation&) = delete;
  void launch(std::size_t orbital);  // orbital's coefficients up, kernel enqueued
  void read(float* out) const;       // the last launch's grid.point_count() values (blocking)
  void finish() const;               // waits for the queue
  std::string describe() const;      // "opencl:0 jit (device name)"

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace molaccel::orbital::opencl_backend

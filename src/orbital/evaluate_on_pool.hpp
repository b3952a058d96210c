// Internal entry points for tests, benchmarks and the Python package (not in the public header):
//  * evaluation on an explicit worker pool instead of Resources (the tests use it to run the
//    multi-device path with two workers on one GPU, which DeviceSpec does not allow);
//  * evaluation with an explicit GPU tuning (tuning.hpp) instead of detail::tuning_for;
//  * the request cache's prepared inputs, for callers that drive cuda_backend themselves.
// Same contract as evaluate_orbitals_into / evaluate_density_into: out holds orbitals x points (or
// points) values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "molaccel/orbital.hpp"
#include "orbital/tuning.hpp"

namespace molaccel::orbital::detail {

void evaluate_orbitals_on_pool(WorkerPool& pool, const Wavefunction& wfn, const GridSpec& grid,
                               const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                               const EvaluateOptions& options = {}, EvaluationInfo* info = nullptr,
                               const Tuning* tuning = nullptr);
void evaluate_density_on_pool(WorkerPool& pool, const Wavefunction& wfn, const GridSpec& grid,
                              DensityKind kind, float* out, std::size_t size,
                              const EvaluateOptions& options = {}, EvaluationInfo* info = nullptr,
                              const Tuning* tuning = nullptr);

void evaluate_orbitals_tuned(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                             const std::vector<OrbitalRef>& orbitals, float* out, std::size_t size,
                             const EvaluateOptions& options, const Tuning& tuning,
                             EvaluationInfo* info = nullptr);
void evaluate_density_tuned(const Resources& resources, const Wavefunction& wfn, const GridSpec& grid,
                            DensityKind kind, float* out, std::size_t size, const EvaluateOptions& options,
                            const Tuning& tuning, EvaluationInfo* info = nullptr);

struct PackedBasis;

// The packed basis and Cartesian coefficients of `orbitals` from the request cache that every
// evaluation uses, with their ids (cuda_backend::GpuJob::basis_id / coefficients_id: a kept GPU
// device state holding them skips its uploads). For the Python package's device_output calls.
struct PreparedRequest {
  std::shared_ptr<const PackedBasis> basis;
  std::shared_ptr<const std::vector<float>> coefficients;
  std::uint64_t basis_id = 0, coefficients_id = 0;
};
PreparedRequest prepare_request(const Wavefunction& wfn, double screening_tolerance,
                                const std::vector<OrbitalRef>& orbitals);

}  // namespace molaccel::orbital::detail

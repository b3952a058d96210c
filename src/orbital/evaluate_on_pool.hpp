// Internal entry points for tests and benchmarks (not in the public header):
//  * evaluation on an explicit worker pool instead of Resources (the tests use it to run the
//    multi-device path with two workers on one GPU, which DeviceSpec does not allow);
//  * evaluation with an explicit GPU tuning (tuning.hpp) instead of detail::tuning_for.
// Same contract as evaluate_orbitals_into / evaluate_density_into: out holds orbitals x points (or
// points) values.
#pragma once

#include <cstddef>
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

}  // namespace molaccel::orbital::detail

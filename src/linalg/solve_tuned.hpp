// The solvers with an explicit tuning: the entry point of tests and benchmarks that compare or
// force a kernel choice (the public solve() uses tuning_for). Not part of the public API.
#pragma once

#include "linalg/tuning.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::linalg {

// As solve(), with `tuning` instead of tuning_for's on a GPU worker (its path automatic: chosen
// as tuning_for chooses it). SolverOptions::launch and batch are not read.
SolverResult solve_tuned(const Resources& resources, const HostCsr<double>& a, std::span<const double> b,
                         const SolverOptions& options, const SolverTuning& tuning);

// The SolveProblem of a system and options (what tuning_for sees).
SolveProblem problem_of(const HostCsr<double>& a, const SolverOptions& options);

}  // namespace molaccel::linalg

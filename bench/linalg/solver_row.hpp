// One solver benchmark's row (bench_linalg, bench_linalg_opencl): the median time per iteration
// against the floor of moving one iteration's bytes at the measured copy bandwidth.
#pragma once

#include <fmt/format.h>

#include <string>

#include "common/harness.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::bench {

// `last`: the final repeat (its iterations, kernels per iteration and backend go in the note);
// `versus`: more of the note after the floor (e.g. the speed-up over ViennaCL).
inline void print_solver_row(std::string benchmark, std::string device, std::size_t n, const Timing& t,
                             double bytes_per_row, double copy_bw, std::string limit_name,
                             const linalg::SolverResult& last, const std::string& versus = {}) {
  const double bytes = bytes_per_row * double(n);
  const double floor_s = bytes / copy_bw;
  print_row({.benchmark = std::move(benchmark),
             .device = std::move(device),
             .size = fmt::format("n={}", n),
             .timing = t,
             .work = bytes,
             .work_unit = "B",
             .bytes = bytes,
             .limit = copy_bw,
             .limit_name = std::move(limit_name),
             .note = fmt::format("{:.2f} us/iter, floor {:.2f} us ({:.2f}x){}, {} iters, {} kernels/iter, {}",
                                 t.median_s * 1e6, floor_s * 1e6, t.median_s / floor_s, versus,
                                 last.iterations, last.kernels_per_iteration, last.backend)});
}

}  // namespace molaccel::bench

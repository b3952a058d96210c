// ViennaCL 1.7.1's BiCGStab (fp64) on bench_linalg's 2-D Poisson system (the 5-point stencil of
// linalg::poisson_2d, b = A * ones), time per iteration: the baseline of bench_linalg_viennacl
// (CUDA backend) and bench_linalg_viennacl_opencl (OpenCL backend). The including file selects the
// backend (VIENNACL_WITH_CUDA or VIENNACL_WITH_OPENCL) before including ViennaCL. C++17 (the CUDA
// translation unit), so the matrix is built here rather than by linalg::poisson_2d.
#pragma once

#include <viennacl/compressed_matrix.hpp>
#include <viennacl/linalg/bicgstab.hpp>
#include <viennacl/vector.hpp>

#include <algorithm>
#include <vector>

#include "common/harness.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::bench {

struct ViennaclRun {
  Timing timing;  // seconds per iteration over 3 timed solves (one untimed solve first)
  std::size_t iterations = 0;
};

// Tolerance 0: every solve runs the iteration cap (no restarts inside it), as bench_linalg does.
inline ViennaclRun viennacl_bicgstab_poisson(std::size_t grid, std::size_t iterations) {
  const std::size_t n = grid * grid;
  std::vector<unsigned int> rows{0}, cols;
  std::vector<double> vals, hb(n);
  for (std::size_t i = 0; i < grid; ++i)
    for (std::size_t j = 0; j < grid; ++j) {
      const std::size_t k = i * grid + j;
      auto put = [&](std::size_t c, double v) {
        cols.push_back(static_cast<unsigned int>(c));
        vals.push_back(v);
        hb[k] += v;  // b = A * ones
      };
      if (i > 0) put(k - grid, -1);
      if (j > 0) put(k - 1, -1);
      put(k, 4);
      if (j + 1 < grid) put(k + 1, -1);
      if (i + 1 < grid) put(k + grid, -1);
      rows.push_back(static_cast<unsigned int>(vals.size()));
    }
  viennacl::compressed_matrix<double> a(n, n);
  a.set(rows.data(), cols.data(), vals.data(), n, n, vals.size());
  viennacl::vector<double> b(n);
  viennacl::copy(hb, b);
  std::vector<double> per_iteration;
  ViennaclRun run;
  for (int rep = 0; rep < 4; ++rep) {
    viennacl::linalg::bicgstab_tag tag(0.0, iterations, iterations);
    viennacl::backend::finish();
    const double t0 = now_seconds();
    viennacl::vector<double> x = viennacl::linalg::solve(a, b, tag);
    viennacl::backend::finish();
    const double t = now_seconds() - t0;
    run.iterations = std::max<std::size_t>(1, tag.iters());
    if (rep > 0) per_iteration.push_back(t / double(run.iterations));  // first run: warm-up (program builds)
  }
  run.timing = summarise(std::move(per_iteration));
  return run;
}

}  // namespace molaccel::bench

// Baseline: ViennaCL 1.7.1's BiCGStab (CUDA backend, fp64) on the same 2-D Poisson systems as
// bench_linalg, time per iteration; rows in the same table format.
#include <viennacl/compressed_matrix.hpp>
#include <viennacl/linalg/bicgstab.hpp>
#include <viennacl/vector.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "molaccel/runtime.hpp"

int main(int argc, char** argv) {
  using namespace molaccel;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const auto gpus = gpu_list();
  if (gpus.empty()) {
    std::printf("bench_linalg_viennacl: no GPU (%s)\n", gpu_absence_reason().c_str());
    return 0;
  }
  bench::print_header();
  for (std::size_t grid : {32, 100, 316, 317, 1000, 3163}) {
    const std::size_t n = grid * grid;
    if (quick && n > 2000000) break;
    // 5-point stencil, as molaccel::linalg::poisson_2d.
    std::vector<unsigned int> rows{0}, cols;
    std::vector<double> vals;
    for (std::size_t i = 0; i < grid; ++i)
      for (std::size_t j = 0; j < grid; ++j) {
        const std::size_t k = i * grid + j;
        auto put = [&](std::size_t c, double v) {
          cols.push_back(static_cast<unsigned int>(c));
          vals.push_back(v);
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
    std::vector<double> hb(n);
    for (std::size_t r = 0; r < n; ++r) {
      double s = 0;
      for (unsigned k = rows[r]; k < rows[r + 1]; ++k) s += vals[k];
      hb[r] = s;  // b = A * ones
    }
    viennacl::vector<double> b(n);
    viennacl::copy(hb, b);
    const std::size_t iterations = n <= 100000 ? 400 : 100;
    std::vector<double> per_iteration;
    std::size_t done = 0;
    for (int rep = 0; rep < 4; ++rep) {
      // Tolerance 0: runs the iteration cap (no restarts inside it), as bench_linalg does.
      viennacl::linalg::bicgstab_tag tag(0.0, iterations, iterations);
      viennacl::backend::finish();
      const double t0 = now_seconds();
      viennacl::vector<double> x = viennacl::linalg::solve(a, b, tag);
      viennacl::backend::finish();
      const double t = now_seconds() - t0;
      done = std::max<std::size_t>(1, tag.iters());
      if (rep > 0) per_iteration.push_back(t / double(done));  // first run: warm-up
    }
    std::sort(per_iteration.begin(), per_iteration.end());
    bench::Timing timing;
    timing.median_s = per_iteration[1];
    timing.min_s = per_iteration.front();
    timing.max_s = per_iteration.back();
    timing.repeats = 3;
    bench::print_row({.benchmark = "linalg/bicgstab-poisson/fp64/viennacl-1.7.1",
                      .device = gpus.front().name,
                      .size = "n=" + std::to_string(n),
                      .timing = timing,
                      .note = fmt::format("{:.2f} us/iter, {} iters", timing.median_s * 1e6, done)});
  }
  return 0;
}

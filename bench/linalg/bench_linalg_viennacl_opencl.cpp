// Baseline: ViennaCL 1.7.1's BiCGStab through its OpenCL backend (fp64) on the same 2-D Poisson
// systems as bench_linalg_opencl, time per iteration, rows in the same table format. Runs on the
// first OpenCL platform with a GPU, or with --cpu on the first platform's CPU device (PoCL);
// without an OpenCL GPU it says so and exits 0.
//   bench_linalg_viennacl_opencl [--cpu] [--quick]
#define VIENNACL_WITH_OPENCL
#include <viennacl/compressed_matrix.hpp>
#include <viennacl/linalg/bicgstab.hpp>
#include <viennacl/ocl/backend.hpp>
#include <viennacl/vector.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "molaccel/runtime.hpp"

int main(int argc, char** argv) {
  using namespace molaccel;
  bool quick = false, cpu = false;
  for (int i = 1; i < argc; ++i) {
    quick = quick || std::strcmp(argv[i], "--quick") == 0;
    cpu = cpu || std::strcmp(argv[i], "--cpu") == 0;
  }
  const cl_device_type type = cpu ? CL_DEVICE_TYPE_CPU : CL_DEVICE_TYPE_GPU;
  long platform = -1;
  try {
    auto platforms = viennacl::ocl::get_platforms();
    for (std::size_t p = 0; p < platforms.size() && platform < 0; ++p) try {
        if (!platforms[p].devices(type).empty()) platform = static_cast<long>(p);
      } catch (const std::exception&) {  // a platform without such a device
      }
  } catch (const std::exception& e) {
    std::printf("bench_linalg_viennacl_opencl: no OpenCL (%s)\n", e.what());
    return 0;
  }
  if (platform < 0) {
    std::printf("bench_linalg_viennacl_opencl: no OpenCL %s device (--cpu: a CPU device)\n",
                cpu ? "CPU" : "GPU");
    return 0;
  }
  viennacl::ocl::set_context_platform_index(0, static_cast<std::size_t>(platform));
  if (cpu)
    viennacl::ocl::set_context_device_type(0, viennacl::ocl::cpu_tag());
  else
    viennacl::ocl::set_context_device_type(0, viennacl::ocl::gpu_tag());
  const std::string device = viennacl::ocl::current_device().name();
  bench::print_header();
  for (std::size_t grid : {32, 100, 316, 1000, 3163}) {
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
      // Tolerance 0: runs the iteration cap (no restarts inside it), as bench_linalg_opencl does.
      viennacl::linalg::bicgstab_tag tag(0.0, iterations, iterations);
      viennacl::backend::finish();
      const double t0 = now_seconds();
      viennacl::vector<double> x = viennacl::linalg::solve(a, b, tag);
      viennacl::backend::finish();
      const double t = now_seconds() - t0;
      done = std::max<std::size_t>(1, tag.iters());
      if (rep > 0) per_iteration.push_back(t / double(done));  // first run: warm-up (program builds)
    }
    std::sort(per_iteration.begin(), per_iteration.end());
    bench::Timing timing;
    timing.median_s = per_iteration[1];
    timing.min_s = per_iteration.front();
    timing.max_s = per_iteration.back();
    timing.repeats = 3;
    bench::print_row({.benchmark = "linalg/bicgstab-poisson/fp64/viennacl-1.7.1-opencl",
                      .device = device,
                      .size = "n=" + std::to_string(n),
                      .timing = timing,
                      .note = fmt::format("{:.2f} us/iter, {} iters", timing.median_s * 1e6, done)});
  }
  return 0;
}

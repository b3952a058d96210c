// Baseline: ViennaCL 1.7.1's BiCGStab through its OpenCL backend (fp64) on the same 2-D Poisson
// systems as bench_linalg_opencl, time per iteration, rows in the same table format. Runs on the
// first OpenCL platform with a GPU, or with --cpu on the first platform's CPU device (PoCL);
// without an OpenCL GPU it says so and exits 0.
//   bench_linalg_viennacl_opencl [--cpu] [--quick]
#define VIENNACL_WITH_OPENCL
#include <viennacl/ocl/backend.hpp>

#include <cstring>
#include <string>

#include "common/harness.hpp"
#include "linalg/viennacl_bicgstab.hpp"
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
    const auto run = bench::viennacl_bicgstab_poisson(grid, n <= 100000 ? 400 : 100);
    bench::print_row(
        {.benchmark = "linalg/bicgstab-poisson/fp64/viennacl-1.7.1-opencl",
         .device = device,
         .size = "n=" + std::to_string(n),
         .timing = run.timing,
         .note = fmt::format("{:.2f} us/iter, {} iters", run.timing.median_s * 1e6, run.iterations)});
  }
  return 0;
}

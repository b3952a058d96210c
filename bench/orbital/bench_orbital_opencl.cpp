// Orbitals through OpenCL: C60 6-31G* one orbital (the HOMO) on bench_orbital_c60's grid (0.075 A
// spacing, 3 A padding), the JIT and the generic kernel; kernel time (clFinish around one launch,
// results left in device memory) and the whole evaluate_orbitals_opencl call. Runs on the first
// OpenCL GPU or on --device N; without an OpenCL GPU and without --device it says so and exits 0.
//   bench_orbital_opencl [--device N] [--quick]
#include <cstring>
#include <string>

#include "c60_wavefunction.hpp"
#include "common/harness.hpp"
#include "molaccel/opencl.hpp"
#include "orbital/opencl/orbital_opencl.hpp"

using namespace molaccel;
using namespace molaccel::orbital;

int main(int argc, char** argv) {
  bool quick = false;
  int device = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc)
      device = std::atoi(argv[++i]);
  }
  device = bench::opencl_device_or_first_gpu(device, "bench_orbital_opencl");
  if (device < 0) return 0;
  std::string device_name = fmt::format("opencl:{}", device);
  for (const auto& d : opencl_devices())
    if (d.index == device) device_name = d.name;
  try {
    const std::size_t n_orbitals = 180;
    const Wavefunction wfn = bench_data::c60_631gs(n_orbitals);
    // --quick: a coarser grid (0.2 A) for slow devices such as PoCL's CPU device.
    const GridSpec grid = automatic_grid(wfn, 3.0, quick ? 0.2 : 0.075);
    const std::vector<OrbitalRef> homo{{Spin::alpha, n_orbitals - 1}};
    const std::size_t points = grid.point_count();
    const std::string size = fmt::format("{}x{}x{}", grid.counts[0], grid.counts[1], grid.counts[2]);
    bench::print_header();
    for (Backend backend : {Backend::cuda_jit, Backend::cuda_generic}) {
      EvaluateOptions options;
      options.backend = backend;
      opencl_backend::Evaluation evaluation(device, wfn, grid, homo, options);
      const auto kernel = bench::measure([&] {
        evaluation.launch(0);
        evaluation.finish();
      });
      const std::string kind = backend == Backend::cuda_jit ? "jit" : "generic";
      bench::print_row({.benchmark = "orbital/c60-631gs/opencl/" + kind + "/kernel",
                        .device = device_name,
                        .size = size,
                        .timing = kernel,
                        .work = double(points),
                        .work_unit = "points",
                        .note = fmt::format("{:.3f} ms per orbital, results in device memory; {}",
                                            kernel.median_s * 1e3, evaluation.describe())});
      const auto whole =
          bench::measure([&] { evaluate_orbitals_opencl(device, wfn, grid, homo, options); }, 1, 3);
      bench::print_row({.benchmark = "orbital/c60-631gs/opencl/" + kind + "/call",
                        .device = device_name,
                        .size = size,
                        .timing = whole,
                        .work = double(points),
                        .work_unit = "points",
                        .note = "evaluate_orbitals_opencl: basis packing, program (from the cache), uploads, "
                                "kernel, read-back"});
    }
  } catch (const std::exception& e) {
    std::printf("bench_orbital_opencl: %s\n", e.what());
    return 1;
  }
  return 0;
}

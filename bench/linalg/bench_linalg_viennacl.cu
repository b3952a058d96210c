// Baseline: ViennaCL 1.7.1's BiCGStab (CUDA backend, fp64) on the same 2-D Poisson systems as
// bench_linalg, time per iteration; rows in the same table format.
#include <cstring>
#include <string>

#include "common/harness.hpp"
#include "linalg/viennacl_bicgstab.hpp"
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
    const auto run = bench::viennacl_bicgstab_poisson(grid, n <= 100000 ? 400 : 100);
    bench::print_row(
        {.benchmark = "linalg/bicgstab-poisson/fp64/viennacl-1.7.1",
         .device = gpus.front().name,
         .size = "n=" + std::to_string(n),
         .timing = run.timing,
         .note = fmt::format("{:.2f} us/iter, {} iters", run.timing.median_s * 1e6, run.iterations)});
  }
  return 0;
}

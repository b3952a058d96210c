// Writing cube files: text formatted per second by write_cube (every core, written in order) into a
// file under the temporary directory, on a grid the size of the C60 density at 0.05 A (257^3 points,
// about 220 MB of text). Target: >= 1 GB/s of text on 16 cores. CPU only.
//
//   bench_orbital_cube_write [--points N (257): N^3 grid]
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/harness.hpp"
#include "molaccel/orbital.hpp"

using namespace molaccel;

int main(int argc, char** argv) {
  std::size_t n = 257;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--points") == 0) n = std::strtoul(argv[i + 1], nullptr, 10);
  orbital::Wavefunction wfn;
  wfn.atoms.push_back({.atomic_number = 6, .label = "C", .position = {0, 0, 0}, .charge = 6});
  orbital::GridSpec grid;
  grid.origin = {-12, -12, -12};
  grid.axes = {{{0.0945, 0, 0}, {0, 0.0945, 0}, {0, 0, 0.0945}}};
  grid.counts = {n, n, n};
  // A smooth field spanning many decades, as a density does.
  std::vector<float> values(grid.point_count());
  for (std::size_t p = 0; p < values.size(); ++p) {
    const double x = static_cast<double>(p % n) / n - 0.5, y = static_cast<double>(p / n % n) / n - 0.5,
                 z = static_cast<double>(p / n / n) / n - 0.5;
    values[p] = static_cast<float>(std::exp(-40 * (x * x + y * y + z * z)) * std::cos(9 * x));
  }
  const auto path = std::filesystem::temp_directory_path() / "molaccel_bench_cube_write.cube";
  // Into a new file each time: replacing one would add the file system's freeing of the old one.
  const auto timing = bench::measure_with(
      [&] {
        std::filesystem::remove(path);
        const auto start = std::chrono::steady_clock::now();
        orbital::write_cube(path, wfn, grid, values.data(), "bench", "cube write");
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      },
      1, 5);
  const double bytes = static_cast<double>(std::filesystem::file_size(path));
  std::filesystem::remove(path);
  bench::print_header();
  bench::print_row({.benchmark = "orbital/cube-write",
                    .device = fmt::format("{} ({} threads)", cpu_info().model, cpu_info().logical_cores),
                    .size = fmt::format("{}^3", n),
                    .timing = timing,
                    .work = bytes,
                    .work_unit = "B",
                    .bytes = bytes,
                    .note = "text formatted and written; target >= 1 GB/s on 16 cores"});
  return 0;
}

// The C++ side of bench_orbital_grid.py: the same orbital grid call as `orbital.grid(wfn, ORBITAL,
// spacing=..., padding=...)` from Python, made from C++ (evaluate_orbitals_into on one Resources
// handle, into a result buffer of the handle's pinned pool that is taken and given back per call,
// as the Python call's result memory is). Prints one JSON object: the median wall time of the
// call ("wall"), the median of the library's own time ("library": EvaluationInfo::seconds, the
// CLI's --json "seconds"), the median of their difference per call ("outside": what the call adds
// around the timed evaluation), the grid and the backend.
//
//   bench_orbital_grid WAVEFUNCTION [--orbital homo] [--spacing 0.1] [--padding 3.0]
//                      [--box A (an A x A x A box at the origin instead of the automatic one)]
//                      [--device auto] [--threads 0] [--repeats 1000]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/harness.hpp"
#include "molaccel/orbital.hpp"

using namespace molaccel;
using namespace molaccel::orbital;

int main(int argc, char** argv) {
  std::string path, orbital = "homo", device = "auto";
  double spacing = 0.1, padding = 3.0, box = 0;
  int threads = 0, repeats = 1000;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--orbital" && has_value)
      orbital = argv[++a];
    else if (arg == "--spacing" && has_value)
      spacing = std::atof(argv[++a]);
    else if (arg == "--padding" && has_value)
      padding = std::atof(argv[++a]);
    else if (arg == "--box" && has_value)
      box = std::atof(argv[++a]);
    else if (arg == "--device" && has_value)
      device = argv[++a];
    else if (arg == "--threads" && has_value)
      threads = std::atoi(argv[++a]);
    else if (arg == "--repeats" && has_value)
      repeats = std::max(1, std::atoi(argv[++a]));
    else if (path.empty() && arg[0] != '-')
      path = arg;
    else {
      std::fprintf(stderr,
                   "usage: bench_orbital_grid WAVEFUNCTION [--orbital NAME] [--spacing A] [--padding A] "
                   "[--box A] [--device D] [--threads N] [--repeats N]\n");
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr,
                 "bench_orbital_grid: give a wavefunction file (data/orbital/threonine_631gs.molden)\n");
    return 2;
  }
  try {
    const Wavefunction wfn = read_wavefunction(path);
    const GridSpec grid =
        box > 0 ? explicit_grid({0, 0, 0}, {box, box, box}, spacing) : automatic_grid(wfn, padding, spacing);
    const std::vector<OrbitalRef> refs{parse_orbital(orbital, wfn)};
    Resources::Options options;
    options.device = DeviceSpec::parse(device);
    options.cpu_threads = threads;
    const Resources resources = Resources::create(options);
    const std::size_t n = grid.point_count();
    EvaluationInfo info;
    std::vector<double> walls, library, outside;
    for (int r = -std::min(repeats, 20); r < repeats; ++r) {  // the first 20 (at most): warm-up
      const double t0 = now_seconds();
      {
        PinnedBlock out = resources.pinned_pool().take(n * sizeof(float));
        evaluate_orbitals_into(resources, wfn, grid, refs, out.as<float>(), n, {}, &info);
      }
      const double wall = now_seconds() - t0;
      if (r < 0) continue;
      walls.push_back(wall);
      library.push_back(info.seconds);
      outside.push_back(wall - info.seconds);
    }
    nlohmann::json j;
    j["wall"] = bench::summarise(walls).median_s;
    j["library"] = bench::summarise(library).median_s;
    j["outside"] = bench::summarise(outside).median_s;
    j["points"] = n;
    j["counts"] = grid.counts;
    j["backend"] = info.backend;
    j["resources"] = resources.describe();
    j["repeats"] = repeats;
    std::printf("%s\n", j.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_orbital_grid: %s\n", e.what());
    return 1;
  }
  return 0;
}

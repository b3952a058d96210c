// Smallest use of the library: pick devices the way `--device auto` does and run a tiled job.
#include <atomic>
#include <cstdio>

#include "molaccel/runtime.hpp"

int main() {
  auto resources = molaccel::Resources::create({});
  std::atomic<long> sum{0};
  molaccel::run_tiles(resources, 100,
                      [&](molaccel::WorkerContext&, std::size_t tile) { sum += static_cast<long>(tile); });
  std::printf("molaccel %s on %s: sum %ld\n", molaccel::build_info().version.c_str(),
              resources.describe().c_str(), sum.load());
  return sum == 4950 ? 0 : 1;
}

// The orbital engine's tuning: every setting of the GPU path that was chosen by measurement, in
// one plain struct, chosen in one place (tuning_for). Tests and benchmarks that need another
// setting pass a Tuning explicitly (detail::evaluate_*_tuned, evaluate_on_pool.hpp); nothing here
// is read from the environment. The measurements behind the defaults are in docs/orbital.md.
#pragma once

#include <cstddef>
#include <string>

#include "orbital/jit_source.hpp"

namespace molaccel::orbital::detail {

// What a request asks for, as far as the tuning cares.
struct Problem {
  std::size_t orbitals = 0;  // orbitals evaluated, or summed into a density
  bool density = false;
};

struct Tuning {
  // Many orbitals (more than 4) and densities take the sparse basis-matrix path (one launch for
  // all orbitals of a chunk); fewer orbitals run one JIT (or generic) launch per orbital. A
  // density always takes the basis-matrix path.
  bool basis_matrix = false;
  // Brick of the JIT kernel: 8 planes x 8 rows x 8 columns, 4 points per thread (the points of a
  // thread, 2 planes apart, share the atom list entry and the shell branches).
  CullLayout jit_brick{8, 8, 8, 4};
  // Chunk pool: chunks per grid to aim at (finer balance over several GPUs than 12, fewer launch
  // tails than 48).
  std::size_t chunks_per_grid = 24;
  // Host copy of ordinary (pageable) output out of the pinned staging buffers: threads per GPU
  // worker (at most the logical cores) and MiB per piece (1 to 64).
  int drain_threads = 4;
  std::size_t drain_piece_mib = 1;
};

// The tuning for a request on `device` (-1: no GPU). No setting depends on the device yet; the
// chunk plan must not, so that values stay bit for bit the same whatever GPUs share a grid.
Tuning tuning_for(int device, const Problem& problem);

// One "key=value" setting, for benchmarks (--tuning) and tests: basis_matrix=0|1,
// jit_brick=BXxBYxBZ[/P], chunks=N, drain_threads=N, drain_piece_mib=N. Throws Error.
void set_tuning(Tuning& tuning, const std::string& setting);

}  // namespace molaccel::orbital::detail

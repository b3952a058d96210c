// Generator of the orbital JIT kernel (CUDA C++ source as text): the basis set's exponents,
// contraction coefficients, screening radii and shell structure become literals, one device
// function per distinct atom basis ("element type"), loops fully unrolled. CUDA-free, so the
// source can be generated and compiled by NVRTC without a GPU (tests do this in CI). Also the
// background compilation of JIT programs (BackgroundCompiles), by which the CUDA backend computes
// with the generic kernel while a new basis set's JIT kernel compiles.
#pragma once

#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "molaccel/runtime.hpp"
#include "orbital/packed_basis.hpp"

namespace molaccel::orbital::detail {

// Thread layout of the JIT kernel: a block of 128 threads covers a brick of
// bx planes x by rows x bz columns, each thread points_per_thread points (planes li, li + bx/ppt,
// ...). Bricks are aligned to the grid (plane index multiple of bx), not to the launch, so a
// point's value does not depend on how the grid is cut into tiles.
struct CullLayout {
  int bx = 2, by = 8, bz = 8;
  int points_per_thread = 1;
  std::string name() const;  // "2x8x8" or "4x8x8/2"
};
// "BXxBYxBZ" or "BXxBYxBZ/P"; throws Error for a shape the generator does not support (128
// threads: (bx / P) * by * bz == 128, bz a multiple of 4 (8 when bx / P == 1), by of 4).
CullLayout parse_cull_layout(const std::string& text);
// Atoms whose every point of the brick is beyond their largest screening radius (brick bounding
// sphere, 1e-3 bohr margin) are left out; the distance and the culling rule are those of the
// sparse density path.

struct JitSource {
  std::string source;
  std::string kernel_name = "molaccel_orbital_jit";
  std::vector<int> atom_type;  // element type index per atom
  int type_count = 0;
  int points_per_thread = 1;
  CullLayout cull;
  // Atoms sorted by element type (atom_order[i] = atom at sorted position i), type_first[t] =
  // first sorted position of type t (type_count + 1 entries).
  std::vector<int> atom_order;
  std::vector<int> type_first;
};

// The kernel (per-block atom lists; see the comment at its generator). Kernel parameters:
// (const double* atom_xyz /* sorted, 3 per atom */, const int* atom_base /* sorted: first
// component */, const float* atom_cut2 /* sorted: largest shell screening radius^2 */,
// const int* type_first, int atoms, const float* coefficients, OrbitalGridArgs g, float* out);
// launch with blocks (ceil(nz / bz), ceil(ny / by), bricks of bx planes touching the launch's
// planes: (plane_begin + planes - 1) / bx - plane_begin / bx + 1) and OrbitalGridArgs::planes set.
JitSource generate_jit_source(const PackedBasis& basis, const CullLayout& layout);

// The same basis set as an OpenCL C kernel (the same per-element-type functions; one point per
// work-item, no brick culling). Parameters: (const COORD* atom_xyz /* sorted, 3 per atom */,
// const int* atom_base /* sorted: first component */, const float* coefficients,
// const COORD* grid /* origin[3], axes[3][3] */, int nx, int ny, int nz, float* out); COORD is
// double when `fp64_coordinates`, else float. Launch: global (nz, ny, nx).
JitSource generate_opencl_jit_source(const PackedBasis& basis, bool fp64_coordinates);

// JIT programs compiled on background threads, one compile per key (the JIT cache key). The CUDA
// backend asks with wait = false while it may compute with the generic kernel instead (the
// program's compile starts on the first ask; nullopt until it has finished), with wait = true when
// it needs the program (an in-flight compile is waited for, else the program is compiled on the
// calling thread). A compile that failed: wait = true rethrows its error; wait = false logs it
// once as a warning and returns nullopt from then on (the generic kernel computes the same values).
// The process-wide instance's compiles are waited for by finish_background_work() (runtime.hpp),
// which the CLI, the Python module and the tests call before the process ends: a compile that
// started finishes and lands in the JIT cache (whose entries are written to a temporary file and
// renamed, never seen half written). Its destructor joins what is left, the last resort of a
// program that did not call it (a compile still running in exit() can crash there).
class BackgroundCompiles {
 public:
  using Compile = std::function<JitProgram()>;
  BackgroundCompiles() = default;
  BackgroundCompiles(const BackgroundCompiles&) = delete;
  BackgroundCompiles& operator=(const BackgroundCompiles&) = delete;
  ~BackgroundCompiles();

  std::optional<JitProgram> get(const std::string& key, const Compile& compile, bool wait);
  bool started(const std::string& key) const;  // a background compile of `key` was started
  void wait_all();                             // until every compile started has finished
  // Tests: while held, a background compile waits on its thread before it begins (it counts as in
  // flight), so "the generic kernel computes while the JIT kernel compiles" does not depend on
  // how fast NVRTC is. Release before wait_all(), a waiting get() or the destructor.
  void hold();
  void release();

 private:
  struct Entry {
    std::shared_future<JitProgram> program;
    bool failure_logged = false;
  };
  bool held_ = false;
  std::condition_variable released_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  std::vector<std::thread> threads_;
};

// The process-wide instance (created after the default JIT cache, so destroyed before it).
BackgroundCompiles& background_jit_compiles();

}  // namespace molaccel::orbital::detail

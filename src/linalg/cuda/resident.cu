// The resident and fused paths' dispatch (ResidentSolver): the kernel configuration for the
// device and the system (scope, rows per thread, form, tiles, grid size, shared memory) from the
// SolverTuning, the launches, the records read back, the description and the opt-in trace
// (MOLACCEL_TRACE=linalg). The kernels: resident_kernels.cu.
#include <algorithm>
#include <cstring>

#include "linalg/cuda/resident_kernels.hpp"
#include "linalg/cuda/stream.hpp"
#include "linalg/resident.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::linalg::gpu {
namespace {

using namespace resident;

// Automatic BiCGStab form (SolverTuning::form 0), measured side by side (docs/linalg.md): two
// barriers in one block (faster than four or three there), three in a cluster ((r0, A M p)
// summed as (M A^T r0, p) with (r, r): faster than two and four there), one on a grid where the
// matrix is stored by diagonals and the halo windows fit shared memory, else two (the fallback
// for general sparse matrices and for bands too wide for the windows). On grids of 4 rows per
// thread the two-barrier form keeps the short matrix rows in shared memory (faster than L2).
constexpr int kAutomaticFormBlock = 2;
constexpr int kAutomaticFormCluster = 3;
// Automatic grid geometry of the two-barrier form: 2 rows per thread up to this many rows (80
// blocks of 512), 4 above (the matrix in shared memory): the crossing point measured on Poisson
// between 67,600 and 100,489 rows (docs/linalg.md).
constexpr long long kGridFourRowsAbove = 80LL * 2 * 512;
// Form 4 on a grid, choosing the tiles: the cost of one block more, in rows handled per
// iteration (an arrival at the grid barrier and its block sums in every gather). Tiles at least
// as wide as they are tall are preferred (longer memory segments of the published vectors and
// the halo loads; measured faster than taller tiles of the same count, docs/linalg.md).
constexpr double kTileBlockCost = 4.0;

// Lets `kernel` take `bytes` of dynamic shared memory: above 48 KB with its static shared memory
// (the default limit of the two together) the kernel must opt in.
template <class K>
void allow_shared(K kernel, std::size_t bytes) {
  cudaFuncAttributes fa{};
  MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(kernel)));
  if (bytes + fa.sharedSizeBytes > 48 * 1024)
    MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

void copy_and_wait(int device, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  const cudaStream_t s = linalg_stream(device);
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, s));
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s));
}
void download(int device, void* dst, const void* src, std::size_t bytes) {
  copy_and_wait(device, dst, src, bytes, cudaMemcpyDeviceToHost);
}
void upload(int device, void* dst, const void* src, std::size_t bytes) {
  copy_and_wait(device, dst, src, bytes, cudaMemcpyHostToDevice);
}

// Opt-in trace summary (MOLACCEL_TRACE=linalg): for each barrier of an iteration that
// ends a sum (position q of `period` barriers per iteration), medians over the traced iterations
// of: the time between block 0's previous and this sum's end (the phase), block 0's work (from
// the previous sum's end to its block sum; clock64, converted with block 0's clock rate measured
// against globaltimer), the slowest block's work, block 0's own reduction up to the barrier
// entry, block 0's wait in the barrier and the last arriver's (the barrier's own latency), the
// spread of the arrivals (globaltimer), and the gather of the block sums after the barrier.
void print_trace(const std::vector<unsigned long long>& t, int blocks, int cap, int period,
                 const std::string& what) {
  auto gt = [&](int b, int i) { return double(t[2 * (std::size_t(b) * std::size_t(cap) + std::size_t(i))]); };
  auto ck = [&](int b, int i) {
    return double(t[2 * (std::size_t(b) * std::size_t(cap) + std::size_t(i)) + 1]);
  };
  const int slots = cap / 4;
  int first = -1, last = -1;  // first and last barrier slot with block 0's sum-done stamp
  for (int j = 0; j < slots; ++j)
    if (gt(0, 4 * j + 3) != 0) {
      if (first < 0) first = j;
      last = j;
    }
  if (first < 0 || last - first < period) {
    trace_message("linalg", fmt::format(fmt::runtime("{}: too few barriers recorded"), what));
    return;
  }
  const int whole = (last - first) / period;
  const int end = first + whole * period;
  const double ns_per_clock =
      (gt(0, 4 * end + 3) - gt(0, 4 * first + 3)) / std::max(1.0, ck(0, 4 * end + 3) - ck(0, 4 * first + 3));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::string line =
      fmt::format(fmt::runtime("{}: clock {:.3f} GHz, iteration {:.2f} us"), what, 1.0 / ns_per_clock,
                  1e-3 * (gt(0, 4 * end + 3) - gt(0, 4 * first + 3)) / double(whole));
  for (int q = 0; q < period; ++q) {
    std::vector<double> phase, work0, workmax, reduce0, spread, wait0, waitlast, gather0;
    for (int j = 1; j < slots; ++j) {
      if (j % period != q) continue;
      const int W = 4 * j, A = W + 1, X = W + 2, E = W + 3, Ep = W - 1;
      bool full = true;
      for (int b = 0; b < blocks && full; ++b)
        full = gt(b, W) != 0 && gt(b, A) != 0 && gt(b, X) != 0 && gt(b, E) != 0 && gt(b, Ep) != 0;
      if (!full) continue;
      phase.push_back(gt(0, E) - gt(0, Ep));
      work0.push_back((ck(0, W) - ck(0, Ep)) * ns_per_clock);
      double wmax = 0, amin = 1e300, amax = -1e300;
      int lastb = 0;
      for (int b = 0; b < blocks; ++b) {
        wmax = std::max(wmax, (ck(b, W) - ck(b, Ep)) * ns_per_clock);
        amin = std::min(amin, gt(b, A));
        if (gt(b, A) > amax) {
          amax = gt(b, A);
          lastb = b;
        }
      }
      workmax.push_back(wmax);
      reduce0.push_back((ck(0, A) - ck(0, W)) * ns_per_clock);
      spread.push_back(amax - amin);
      wait0.push_back((ck(0, X) - ck(0, A)) * ns_per_clock);
      waitlast.push_back((ck(lastb, X) - ck(lastb, A)) * ns_per_clock);
      gather0.push_back((ck(0, E) - ck(0, X)) * ns_per_clock);
    }
    if (phase.empty()) continue;
    line += fmt::format(
        fmt::runtime(" | barrier {}: {:.2f} us = work {:.2f} (slowest block {:.2f}) + reduce {:.2f} + "
                     "wait {:.2f} (last arriver {:.2f}, arrivals spread {:.2f}) + gather {:.2f}"),
        q, 1e-3 * median(phase), 1e-3 * median(work0), 1e-3 * median(workmax), 1e-3 * median(reduce0),
        1e-3 * median(wait0), 1e-3 * median(waitlast), 1e-3 * median(spread), 1e-3 * median(gather0));
  }
  trace_message("linalg", line);
}

int log2_exact(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

}  // namespace

struct ResidentSolver::impl {
  int device = -1;
  ResidentSetup setup;
  int sync = sync_grid;
  int form = 1;  // 1: CG; BiCGStab 2: two barriers per iteration, 3: three (resident_kernel, THREE), 4: one
  // Form 4 (resident_kernel_1): BiCGStab with the matrix by diagonals and M A^T r0.
  bool one_barrier_applies() const {
    return !setup.cg && setup.dia_values != nullptr && setup.dia_count >= 1 && setup.r0hat != nullptr;
  }
  bool matrix_smem = false;
  unsigned matrix_offset = 0;
  int rpt = 1, blocks = 1, threads = kMaxThreads;
  std::size_t smem_bytes = 0;
  cuda::DeviceBuffer<char> exchange;
  cuda::DeviceBuffer<double> partials, out;
  cuda::DeviceBuffer<unsigned long long> counter;
  cuda::DeviceBuffer<double> aux;  // streaming kernel: sigma, buffer index
  bool streaming = false;
  std::vector<double> host_out;
  int loads = 1;  // fused BiCGStab: vload<LD>
  // Form 4 with at most 5 diagonals: the kernel unrolled for 5 (shorter products; docs/linalg.md).
  bool five() const { return setup.dia_count <= 5; }
  // Form 4: the blocks' rows (resident_kernel_1, one_tiles): tiles of the matrix's grid, or bands
  // of rows (a grid of one row) where the matrix is not a stencil on a 2-D grid; tiles_i x tiles_j
  // of SolverTuning when set.
  int forced_i = 0, forced_j = 0;
  int tiles_i = 1, tiles_j = 1;
  one_tiles tiles{};
  bool on_grid() const { return setup.grid_width > 0 && setup.grid_height > 0; }
  // Form 4 on tiles of a constant stencil: the coefficients, not the values (kernel_params::constant).
  // Not on bands: there a neighbour outside the 2-D grid is another row of the band's window, not a zero.
  bool constant_stencil() const { return setup.dia_constant && on_grid() && form == 4 && !streaming; }
  int grid_w() const { return on_grid() ? setup.grid_width : int(setup.n); }
  int grid_h() const { return on_grid() ? setup.grid_height : 1; }
  int dia_a(int k) const { return on_grid() ? setup.dia_a[k] : 0; }
  int dia_b(int k) const { return on_grid() ? setup.dia_b[k] : setup.dia_offsets[k]; }
  // The tiles for blocks of `cells` rows (rows per thread x threads): max_blocks of them when
  // exact (the count given), else bands of `cells` rows or at most max_blocks tiles, minimising the rows a
  // block handles per iteration (its own, W1 and W2) plus kTileBlockCost per block (the barrier's arrivals
  // and the gather), among the tiles at least as wide as tall where there are such. False when none fits.
  bool choose_tiles(long long cells, int max_blocks, bool exact) {
    const int gw = grid_w(), gh = grid_h();
    int h[4] = {0, 0, 0, 0};
    for (int k = 0; k < setup.dia_count; ++k) {
      h[0] = std::max(h[0], -dia_a(k));
      h[1] = std::max(h[1], dia_a(k));
      h[2] = std::max(h[2], -dia_b(k));
      h[3] = std::max(h[3], dia_b(k));
    }
    auto tile = [&](int ni, int nj) {
      one_tiles t{(gh + ni - 1) / ni, (gw + nj - 1) / nj, {h[0], h[1], h[2], h[3]}};
      return t;
    };
    auto take = [&](int ni, int nj) {
      tiles_i = ni;
      tiles_j = nj;
      tiles = tile(ni, nj);
      return true;
    };
    if (!on_grid()) {  // bands: ceil(n / cells) blocks unless given (co-residency checked by the caller)
      const long long nb = exact ? max_blocks : ((long long)setup.n + cells - 1) / cells;
      if (nb < 1 || nb > (1 << 20) || (long long)tile(1, int(nb)).tj > cells ||
          tile(1, int(nb)).w2() >= 65536)
        return false;
      return take(1, int(nb));
    }
    double best = 0;
    bool best_wide = false;
    int bi = 0, bj = 0;
    for (int ni = 1; ni <= std::min(gh, max_blocks); ++ni)
      for (int nj = 1; nj <= std::min(gw, max_blocks / ni); ++nj) {
        if ((exact && ni * nj != max_blocks) || (forced_i > 0 && (ni != forced_i || nj != forced_j)))
          continue;
        const one_tiles t = tile(ni, nj);
        if ((long long)t.ti * t.tj > cells || t.w2() >= 65536) continue;
        const double cost = double(t.ti) * t.tj + double(t.w1()) + double(t.w2()) + kTileBlockCost * ni * nj;
        const bool wide = t.ti <= t.tj;
        if (bi == 0 || (wide && !best_wide) || (wide == best_wide && cost < best)) {
          best_wide = wide;
          best = cost;
          bi = ni;
          bj = nj;
        }
      }
    return bi > 0 && take(bi, bj);
  }
  int grid_rpt = 0;  // grid: rows per thread (SolverTuning::rows_per_thread; 0 by kGridFourRowsAbove)
  // Opt-in trace (MOLACCEL_TRACE=linalg): stamps per block, the stamps skipped (warm-up) and the
  // sums per iteration (to group the phases).
  cuda::DeviceBuffer<unsigned long long> trace;
  int trace_cap = 0, trace_skip = 0, trace_period = 1;

  template <class T>
  void launch(int iterations, int init) {
    kernel_params<T> kp;
    kp.n = int(setup.n);
    kp.rb_shift = log2_exact(rpt * threads);
    kp.row_ptr = static_cast<const int*>(setup.row_ptr);
    kp.col_idx = static_cast<const int*>(setup.col_idx);
    kp.values = static_cast<const T*>(setup.values);
    kp.b = static_cast<const T*>(setup.b);
    kp.d = static_cast<const T*>(setup.d);
    kp.x = static_cast<T*>(setup.x);
    kp.r = static_cast<T*>(setup.r);
    kp.p = static_cast<T*>(setup.p);
    kp.xp = reinterpret_cast<T*>(exchange.data());
    kp.partials = partials.data();
    kp.counter = counter.data();
    kp.out = out.data();
    kp.iterations = iterations;
    kp.init = init;
    kp.threshold = setup.threshold;
    kp.matrix_smem = matrix_smem ? 1 : 0;
    kp.matrix_offset = matrix_offset;
    kp.aux = aux.data();
    kp.scatter = !streaming && form == 4 ? 1 : 0;
    if (!streaming && !setup.cg && (form == 3 || form == 4)) kp.r0hat = static_cast<const T*>(setup.r0hat);
    if (diagonals()) {
      kp.dia = static_cast<const T*>(setup.dia_values);
      kp.dia_count = setup.dia_count;
      for (int k = 0; k < kDiaMax; ++k) kp.dia_off[k] = setup.dia_offsets[k];
    }
    if (!streaming && form == 4) {
      kp.grid_w = grid_w();
      kp.grid_h = grid_h();
      kp.tiles_i = tiles_i;
      kp.tiles_j = tiles_j;
      for (int k = 0; k < 4; ++k) kp.halo[k] = tiles.halo[k];
      for (int k = 0; k < setup.dia_count; ++k) {
        kp.dia_a[k] = dia_a(k);
        kp.dia_b[k] = dia_b(k);
        kp.coef[k] = T(setup.dia_coef[k]);
      }
      kp.constant = constant_stencil() ? 1 : 0;
    }
    if (trace_cap > 0) {
      trace.fill_zero(linalg_stream(device));
      kp.trace = trace.data();
      kp.trace_cap = trace_cap;
      kp.trace_skip = trace_skip;
    }
    auto kernel =
        streaming ? fused_pick<T>() : pick_kernel<T>(setup.cg, rpt, sync, form, diagonals(), five());
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(blocks));
    config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = smem_bytes;
    config.stream = linalg_stream(device);
    cudaLaunchAttribute attr{};
    if (sync == sync_cluster) {
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(blocks);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
    } else if (sync == sync_grid) {
      attr.id = cudaLaunchAttributeCooperative;  // every block resident, or the launch fails
      attr.val.cooperative = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
    }
    MOLACCEL_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, kp));
    cuda::check_launch("linalg resident solver", __FILE__, __LINE__);
  }

  // Dynamic shared memory: the exchanged vectors (CG and form 3 in a block or cluster: 2 x RB;
  // form 2: the block's own entries, RB), then the matrix rows when they are kept there (grid, 4
  // rows per thread: kSmemNnz x RB values and column indices).
  bool matrix_in_shared(int r, int s) const {
    return s == sync_grid && r == 4 && form != 4;  // form 4: its own windows
  }
  template <class T>
  std::size_t vector_bytes(int r, int s) const {
    const std::size_t rb = std::size_t(r) * std::size_t(threads);
    const std::size_t bytes = form == 2 ? rb * sizeof(T) : s == sync_grid ? 0 : 2 * rb * sizeof(T);
    return (bytes + 15) / 16 * 16;
  }
  // Form 4: the band's reach (errors and the description).
  int band_left() const { return std::max(0, -setup.dia_offsets[0]); }
  int band_right() const { return std::max(0, setup.dia_offsets[std::max(0, setup.dia_count - 1)]); }
  // Form 4: the windows of the tiles chosen last (choose_tiles).
  template <class T>
  std::size_t shared_bytes(int r, int s) const {
    const std::size_t rb = std::size_t(r) * std::size_t(threads);
    if (form == 4) return std::size_t(tiles.bytes(setup.dia_count, setup.d != nullptr, int(sizeof(T))));
    return vector_bytes<T>(r, s) +
           (matrix_in_shared(r, s) ? std::size_t(kSmemNnz) * rb * (sizeof(T) + sizeof(int)) : 0);
  }

  // The matrix by diagonals (given by the caller): fused BiCGStab; resident BiCGStab in the one-
  // barrier form and in the two-barrier form where the values fit (form resolved by configure();
  // the three-barrier form in a cluster keeps CSR).
  bool diagonals() const {
    if (setup.cg || setup.dia_values == nullptr) return false;
    if (!streaming && form == 4) return true;
    return streaming || diagonals_at(rpt, sync);
  }
  // Resident: the values of dia_count diagonals fit the cached slots at r rows per thread (1: 8,
  // 2: 5; 4: shared or global memory, any count).
  bool dia_fits(int r) const { return r == 4 || setup.dia_count <= (r == 1 ? kCached : 5); }
  // Resident kernel at r rows per thread with barrier kind s: by diagonals (form 4; form 2 in a
  // block or on a grid where the values fit).
  bool diagonals_at(int r, int s) const {
    if (setup.cg || setup.dia_values == nullptr || streaming) return false;
    if (form == 4) return true;
    return form == 2 && s != sync_cluster && dia_fits(r);
  }
  template <class T>
  kernel_ptr<T> fused_pick() const {
    return fused_kernel_for<T>(setup.cg, diagonals(), loads);
  }
  // Streaming kernel: a cooperative grid of co-resident blocks (automatic: as many as the
  // occupancy allows, at most one thread per row), grid-stride over rows.
  template <class T>
  void configure_streaming() {
    cudaDeviceProp prop{};
    MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    threads = setup.tuning.threads > 0 ? setup.tuning.threads : kStreamThreads;
    if (threads != 128 && threads != 256 && threads != 512)
      throw Error(fmt::format(fmt::runtime("linalg: fused block size {} (128, 256 or 512)"), threads),
                  __FILE__, __LINE__);
    int resident = 0;
    MOLACCEL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &resident, reinterpret_cast<const void*>(fused_pick<T>()), threads, 0));
    const long long cap = (long long)resident * prop.multiProcessorCount;
    const long long need = ((long long)setup.n + threads - 1) / threads;
    const int given = setup.tuning.blocks;
    if (given > 0 && given > cap)
      throw Error(fmt::format(fmt::runtime("linalg: fused grid of {} blocks of {} (at most {} co-resident)"),
                              given, threads, cap),
                  __FILE__, __LINE__);
    if (cap < 1) throw Error("linalg: the fused kernel cannot run on this GPU", __FILE__, __LINE__);
    blocks = given > 0 ? given : int(std::max<long long>(1, std::min(cap, need)));
    rpt = 0;
    sync = sync_grid;
    form = 2;
    smem_bytes = 0;
    matrix_smem = false;
    exchange.resize(std::size_t(sv_count) * setup.n * sizeof(T));
    partials.resize(std::size_t(kSlots) * std::size_t(blocks));
    counter.resize(1);
    counter.fill_zero(linalg_stream(device));
    aux.resize(3);
    aux.fill_zero(linalg_stream(device));
  }

  template <class T>
  void configure() {
    if (streaming) return configure_streaming<T>();
    cudaDeviceProp prop{};
    MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    const long long n = static_cast<long long>(setup.n);
    const SolverTuning& tune = setup.tuning;
    const int given = tune.blocks;  // 0: from n
    threads = tune.threads > 0 ? tune.threads : kMaxThreads;
    if (threads != 128 && threads != 256 && threads != 512)
      throw Error(fmt::format(fmt::runtime("linalg: resident block size {} (128, 256 or 512)"), threads),
                  __FILE__, __LINE__);
    // The smallest rows-per-thread (1, 2, 4) whose grid fits; blocks from n unless given.
    auto fits = [&](int r, int max_blocks) {
      const long long need = (n + (long long)r * threads - 1) / ((long long)r * threads);
      return given > 0 ? (long long)given * r * threads >= n && given <= max_blocks : need <= max_blocks;
    };
    auto choose = [&](int max_blocks) {
      for (int r : {1, 2, 4})
        if (fits(r, max_blocks)) {
          rpt = r;
          blocks =
              given > 0
                  ? given
                  : int(std::max<long long>(1, (n + (long long)r * threads - 1) / ((long long)r * threads)));
          return true;
        }
      return false;
    };
    // Scope, automatic: one block when it holds the system, one cluster of up to 16 blocks next,
    // then the cooperative grid. BiCGStab by diagonals (form 4 applies) goes from one block
    // straight to the grid: one grid barrier per iteration was measured faster than the
    // cluster's three at 1e4, and up to one block of 256 per SM the grid takes blocks of 256
    // (faster than 512 there; docs/linalg.md).
    // kind: -1 one block, 1 one cluster, 2 a grid (SolverTuning::scope 1, 2, 3), 0 automatic.
    int kind = tune.scope == 1 ? -1 : tune.scope == 2 ? 1 : tune.scope == 3 ? 2 : 0;
    if (given == 1) kind = -1;
    const bool clusters = prop.major >= 9;  // thread-block clusters: sm_90 and later
    const bool automatic_grid_one = form == 0 && one_barrier_applies();
    if (kind == 0) {
      if (n <= 4LL * threads)
        kind = -1;
      else if (automatic_grid_one)
        kind = 2;
      else if (n <= 16LL * 2 * threads && clusters)
        kind = 1;
      else
        kind = 2;
    }
    // Form 4 chosen automatically (on a grid): form 2 where its windows do not fit.
    const bool automatic_one = automatic_grid_one && kind >= 2;
    if (tune.threads == 0 && automatic_one && n <= 256LL * prop.multiProcessorCount) threads = 256;
    if (form == 0)
      form = kind == -1 ? kAutomaticFormBlock : kind == 1 ? kAutomaticFormCluster : automatic_one ? 4 : 2;
    if (form == 4 && (kind == -1 || kind == 1))
      throw Error("linalg: the one-barrier BiCGStab form runs on a grid, not in one block or one cluster",
                  __FILE__, __LINE__);
    if (form == 4 && !one_barrier_applies())
      throw Error("linalg: the one-barrier BiCGStab form needs the matrix by diagonals and M A^T r0",
                  __FILE__, __LINE__);
    if (form == 3 && kind != 1)
      throw Error("linalg: the three-barrier BiCGStab form runs in one cluster", __FILE__, __LINE__);
    if (form == 2 && kind == 1)
      throw Error("linalg: the two-barrier BiCGStab form runs in one block or on a grid, not in a cluster",
                  __FILE__, __LINE__);
    if (form == 3 && setup.r0hat == nullptr)
      throw Error("linalg: the three-barrier BiCGStab form needs M A^T r0", __FILE__, __LINE__);
    if (kind == 1 && !clusters)
      throw Error(fmt::format(fmt::runtime("linalg: resident mode in a cluster needs compute capability 9.0 "
                                           "(this GPU has {}.{})"),
                              prop.major, prop.minor),
                  __FILE__, __LINE__);
    if (kind == -1) {
      sync = sync_block;
      if (!choose(1))
        throw Error(
            fmt::format(fmt::runtime("linalg: resident mode in one block holds at most {} rows ({} given)"),
                        4 * threads, n),
            __FILE__, __LINE__);
    } else if (kind == 1) {
      sync = sync_cluster;
      if (!choose(16))
        throw Error(
            fmt::format(fmt::runtime("linalg: resident mode in one cluster holds at most {} rows ({} given)"),
                        16 * 4 * threads, n),
            __FILE__, __LINE__);
    } else {
      sync = sync_grid;
      // Rows per thread whose grid is co-resident (each variant's own occupancy): with the block
      // count given, the smallest that holds n; otherwise 2 rows per thread (the matrix rows in
      // registers) up to kGridFourRowsAbove rows, then 4 (the matrix in shared memory), each
      // falling back to the other where it does not fit (by diagonals, 4 rows are faster from
      // about 1e5 rows on: kGridFourRowsAbove).
      // Form 4 keeps the band's halo windows in shared memory: a shape whose windows do not fit
      // is skipped (automatic form 4: then form 2).
      bool ok = false;
      int cap = 0;
      const int order_given[3] = {1, 2, 4}, order_two[3] = {2, 4, 1}, order_four[3] = {4, 2, 1};
      auto try_shapes = [&] {
        // Form 4: the fewest rows per thread that fit (measured faster: docs/linalg.md).
        const bool four = grid_rpt == 4 || (grid_rpt == 0 && n > kGridFourRowsAbove);
        const int* order = given > 0 || grid_rpt == 1 || (form == 4 && grid_rpt == 0) ? order_given
                           : four                                                     ? order_four
                                                                                      : order_two;
        for (int i = 0; i < 3 && !ok; ++i) {
          const int r = order[i];
          int resident = 0;
          // Form 4 at 4 rows per thread: measured slower than form 2 (docs/linalg.md).
          if (form == 4 && r == 4) continue;
          // Form 4: tiles (or bands) for blocks of r x threads rows, one block per SM and one
          // gather chunk at most unless the count is given (then exactly that many).
          if (form == 4 &&
              !choose_tiles((long long)r * threads,
                            given > 0 ? given : std::min(prop.multiProcessorCount, kGatherChunk), given > 0))
            continue;
          const std::size_t bytes = shared_bytes<T>(r, sync_grid);
          auto kernel = pick_kernel<T>(setup.cg, r, sync_grid, form, diagonals_at(r, sync_grid), five());
          if (form == 4) {
            cudaFuncAttributes fa{};
            MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(kernel)));
            if (bytes + fa.sharedSizeBytes > prop.sharedMemPerBlockOptin) continue;
          }
          allow_shared(kernel, bytes);
          MOLACCEL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &resident, reinterpret_cast<const void*>(kernel), threads, bytes));
          cap = resident * prop.multiProcessorCount;
          if (form == 4 && cap >= tiles_i * tiles_j) {
            rpt = r;
            blocks = tiles_i * tiles_j;
            ok = true;
          } else if (form != 4 && cap > 0 && fits(r, cap)) {
            rpt = r;
            blocks = given > 0 ? given : int((n + (long long)r * threads - 1) / ((long long)r * threads));
            ok = true;
          }
        }
      };
      try_shapes();
      if (!ok && automatic_one) {  // the band's windows do not fit: two barriers
        form = 2;
        try_shapes();
      }
      if (!ok && form == 4)
        throw Error(
            fmt::format(fmt::runtime("linalg: the one-barrier BiCGStab form does not fit this GPU for {} "
                                     "rows (band -{} .. +{}: the halo windows exceed shared memory)"),
                        n, band_left(), band_right()),
            __FILE__, __LINE__);
      if (!ok)
        throw Error(
            fmt::format(fmt::runtime("linalg: the resident mode holds at most {} rows on this GPU "
                                     "(4 rows per thread, {} blocks of {}, form {}, {} bytes of shared "
                                     "memory per block); {} given"),
                        (long long)cap * 4 * threads, cap, threads, form, shared_bytes<T>(4, sync_grid), n),
            __FILE__, __LINE__);
    }
    smem_bytes = shared_bytes<T>(rpt, sync);
    matrix_smem = matrix_in_shared(rpt, sync);
    matrix_offset = unsigned(vector_bytes<T>(rpt, sync));
    allow_shared(pick_kernel<T>(setup.cg, rpt, sync, form, diagonals(), five()), smem_bytes);
    if (sync == sync_cluster) {
      auto kernel = pick_kernel<T>(setup.cg, rpt, sync_cluster, form, diagonals(), five());
      if (blocks > 8)
        MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(unsigned(blocks));
      config.blockDim = dim3(unsigned(threads));
      config.dynamicSmemBytes = smem_bytes;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(blocks);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
      int clusters = 0;
      const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
      if (e != cudaSuccess || clusters < 1) {
        cudaGetLastError();
        throw Error(
            fmt::format(fmt::runtime("linalg: a cluster of {} blocks of {} threads cannot run on this GPU"),
                        blocks, threads),
            __FILE__, __LINE__);
      }
    }
    if (sync == sync_grid) {
      exchange.resize(std::max<std::size_t>(1, std::size_t(form == 2   ? 7
                                                           : form == 4 ? 2 * ov_count
                                                                       : 2) *
                                                   setup.n * sizeof(T)));
      if (form == 4) aux.resize(1);
      partials.resize(std::size_t(kSlots) * std::size_t(blocks));
      counter.resize(1);
      counter.fill_zero(linalg_stream(device));
    }
  }
};

ResidentSolver::ResidentSolver(int device, const ResidentSetup& setup) : impl_(std::make_unique<impl>()) {
  cuda::DeviceGuard guard(device);
  impl_->device = device;
  impl_->setup = setup;
  const SolverTuning& tune = setup.tuning;
  // Automatic (0): see kAutomaticForm* (resolved in configure()).
  if (tune.form != 0 && tune.form != 2 && tune.form != 3 && tune.form != 4)
    throw Error(fmt::format(fmt::runtime("linalg: resident form {} (2, 3 or 4)"), tune.form), __FILE__,
                __LINE__);
  impl_->form = setup.cg ? 1 : tune.form;
  if (tune.scope < 0 || tune.scope > 3)
    throw Error(fmt::format(fmt::runtime("linalg: resident scope {} (0-3)"), tune.scope), __FILE__, __LINE__);
  if (tune.fused_loads < 0 || tune.fused_loads > 2)
    throw Error(fmt::format(fmt::runtime("linalg: fused loads {} (0-2)"), tune.fused_loads), __FILE__,
                __LINE__);
  impl_->loads = tune.fused_loads != 0 ? tune.fused_loads : setup.n <= fused_l1_max_rows ? 2 : 1;
  if (tune.rows_per_thread != 0 && tune.rows_per_thread != 1 && tune.rows_per_thread != 2 &&
      tune.rows_per_thread != 4)
    throw Error(
        fmt::format(fmt::runtime("linalg: resident rows per thread {} (1, 2 or 4)"), tune.rows_per_thread),
        __FILE__, __LINE__);
  impl_->grid_rpt = tune.rows_per_thread;
  impl_->forced_i = tune.tiles_i;
  impl_->forced_j = tune.tiles_j;
  if (setup.dia_values != nullptr && (setup.dia_count < 1 || setup.dia_count > kDiaMax))
    throw Error(fmt::format(fmt::runtime("linalg: {} diagonals (1-{})"), setup.dia_count, kDiaMax), __FILE__,
                __LINE__);
  if (setup.n == 0 || setup.n > std::size_t(1) << 30)
    throw Error(fmt::format(fmt::runtime("linalg: resident mode for {} rows"), setup.n), __FILE__, __LINE__);
  impl_->streaming = setup.streaming;
  if (!setup.fp64)
    impl_->configure<float>();
  else
    impl_->configure<double>();
  impl_->out.resize(kStateWords);
  if (trace_enabled("linalg") && impl_->sync != sync_block) {
    // Barriers per iteration, and barriers before the first iteration of a launch that continues a
    // solve (a plain barrier; the two-barrier form's first product and its sum).
    const int period = impl_->streaming   ? (setup.cg ? 1 : 2)
                       : setup.cg         ? 3
                       : impl_->form == 2 ? 2
                       : impl_->form == 3 ? 3
                                          : 1;
    const int before = impl_->streaming ? 0 : !setup.cg && impl_->form == 2 ? 2 : impl_->form == 4 ? 0 : 1;
    impl_->trace_period = period;
    impl_->trace_skip = 4 * (before + 4 * period);  // 4 stamps per barrier; 4 iterations of warm-up
    impl_->trace_cap = 4 * 8 * period;              // 8 iterations
    impl_->trace.resize(std::size_t(2) * std::size_t(impl_->blocks) * std::size_t(impl_->trace_cap));
  }
}

ResidentSolver::~ResidentSolver() = default;

std::pair<double, bool> ResidentSolver::initialise() {
  cuda::DeviceGuard guard(impl_->device);
  if (!impl_->setup.fp64)
    impl_->launch<float>(0, 1);
  else
    impl_->launch<double>(0, 1);
  double state[kStateWords];
  download(impl_->device, state, impl_->out.data(), sizeof(state));
  return {state[2], state[1] != 0.0};
}

std::vector<double> ResidentSolver::run(int iterations) {
  cuda::DeviceGuard guard(impl_->device);
  const std::size_t words = std::size_t(kStateWords) + std::size_t(kRecordWords) * std::size_t(iterations);
  if (impl_->out.size() < words) {
    // Keep the state words across the reallocation.
    double state[kStateWords];
    download(impl_->device, state, impl_->out.data(), sizeof(state));
    impl_->out.resize(words);
    upload(impl_->device, impl_->out.data(), state, sizeof(state));
  }
  if (!impl_->setup.fp64)
    impl_->launch<float>(iterations, 0);
  else
    impl_->launch<double>(iterations, 0);
  impl_->host_out.resize(words);
  download(impl_->device, impl_->host_out.data(), impl_->out.data(), words * sizeof(double));
  const int done = int(impl_->host_out[3]);
  if (impl_->trace_cap > 0) {
    std::vector<unsigned long long> stamps(impl_->trace.size());
    download(impl_->device, stamps.data(), impl_->trace.data(), stamps.size() * sizeof(unsigned long long));
    print_trace(stamps, impl_->blocks, impl_->trace_cap, impl_->trace_period, describe());
  }
  return std::vector<double>(
      impl_->host_out.begin() + kStateWords,
      impl_->host_out.begin() + kStateWords + std::size_t(kRecordWords) * std::size_t(done));
}

std::string ResidentSolver::describe() const {
  if (impl_->streaming)
    return fmt::format(fmt::runtime("streaming, {} blocks of {}, {}, {}, {} barrier{}/iteration"),
                       impl_->blocks, impl_->threads,
                       !impl_->setup.cg && impl_->loads == 2 ? "vectors via L1" : "vectors via L2",
                       impl_->diagonals() ? fmt::format(fmt::runtime("{} diagonals"), impl_->setup.dia_count)
                                          : std::string("CSR"),
                       impl_->setup.cg ? 1 : 2, impl_->setup.cg ? "" : "s");
  const char* kind = impl_->sync == sync_block ? "block" : impl_->sync == sync_cluster ? "cluster" : "grid";
  if (!impl_->setup.cg && impl_->form == 4) {
    const auto& t = impl_->tiles;
    const std::string rows =
        impl_->on_grid()
            ? fmt::format(fmt::runtime("tiles {} x {} of <= {} x {} on the {} x {} grid"), impl_->tiles_i,
                          impl_->tiles_j, t.ti, t.tj, impl_->grid_h(), impl_->grid_w())
            : fmt::format(fmt::runtime("band -{} .. +{}"), impl_->band_left(), impl_->band_right());
    return fmt::format(
        fmt::runtime("{} blocks of {}, {} rows/thread, {}, 1 barrier/iteration (halo recomputed, "
                     "{}), {}, {} diagonals"),
        impl_->blocks, impl_->threads, impl_->rpt, kind, rows,
        impl_->constant_stencil() ? "constant stencil (no matrix values read)" : "matrix in shared memory",
        impl_->setup.dia_count);
  }
  return fmt::format(fmt::runtime("{} blocks of {}, {} rows/thread, {}, {} barriers/iteration{}{}"),
                     impl_->blocks, impl_->threads, impl_->rpt, kind,
                     impl_->setup.cg    ? 3
                     : impl_->form == 2 ? 2
                                        : 3,
                     impl_->matrix_smem ? ", matrix in shared memory" : "",
                     impl_->diagonals() ? fmt::format(fmt::runtime(", {} diagonals"), impl_->setup.dia_count)
                                        : std::string(", CSR"));
}

int ResidentSolver::blocks() const {
  return impl_->blocks;
}

}  // namespace molaccel::linalg::gpu

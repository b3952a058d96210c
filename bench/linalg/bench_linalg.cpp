// linalg benchmarks: the paper's BLAS-1 example as one generated kernel vs four separate
// kernels, the paper's BLAS-2 example vs cuBLAS separate calls, and fp64 BiCGStab on 2-D
// Poisson (time per iteration, graph vs stream launches) against the memory-bandwidth floor.
// ViennaCL's BiCGStab runs in bench_linalg_viennacl (same table format) when it is installed.
//
//   bench_linalg [--quick] [--cpu]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/harness.hpp"
#include "linalg/backend.hpp"
#include "molaccel/linalg.hpp"

namespace molaccel::bench {
// bench_linalg_gpu.cu (CUDA builds only)
double measured_copy_bandwidth(int device);  // bytes/s, read + write
void blas2_cublas_baseline(int device, std::size_t n, const std::string& device_name);
}  // namespace molaccel::bench

namespace {

using namespace molaccel;
using namespace molaccel::linalg;
using molaccel::bench::measure;
using molaccel::bench::print_row;

MOLACCEL_EW_MODIFIER(F, "1/(1+X)");
MOLACCEL_EW_MODIFIER(G, "X*X");

void wait(const placement& where) {
#ifdef MOLACCEL_HAVE_CUDA
  if (where.on_gpu()) gpu::synchronize(where.device);
#else
  (void)where;
#endif
}

// x += (alpha + beta) * x - (y - F(G(z))): fused, and as the paper's reference (three BLAS-1
// calls and one element-wise kernel, with a temporary).
void bench_blas1(const placement& where, const std::string& device, double copy_bw, bool quick) {
  symbolic_vector<double, 0> x;
  gpu_symbolic_scalar<double, 1> alpha;
  gpu_symbolic_scalar<double, 2> beta;
  symbolic_vector<double, 3> y;
  symbolic_vector<double, 4> z;
  custom_operation fused(x += (alpha + beta) * x - (y - F(G(z))));
  // The paper's reference: one element-wise kernel and three BLAS-1 calls, with a temporary:
  // t = F(G(z)); t = y - t; x += (alpha + beta) * x; x -= t.
  symbolic_vector<double, 0> t;
  symbolic_vector<double, 1> u;
  gpu_symbolic_scalar<double, 1> s1;
  gpu_symbolic_scalar<double, 2> s2;
  custom_operation k_modify(t = F(G(u)));
  custom_operation k_axpy_neg(t = u - t);
  custom_operation k_scale(t += (s1 + s2) * t);
  custom_operation k_sub(t = t - u);
  const std::size_t max_n = where.on_gpu() ? (quick ? 10000000 : 100000000) : 10000000;
  for (std::size_t n = 1000; n <= max_n; n *= 10) {
    // Consecutive calls rotate over enough sets of x, y, z (24n bytes each) to exceed 150 MB, so
    // at n = 1e5..1e6 the operands do not stay in the 50 MB L2 between calls (the copy-bandwidth
    // comparison assumes DRAM traffic). Launch-bound sizes use the same sets.
    const std::size_t sets = std::clamp<std::size_t>((150000000 + 24 * n - 1) / (24 * n), 1, 8);
    std::vector<vector<double>> xs, ys, zs;
    for (std::size_t k = 0; k < sets; ++k) {
      xs.emplace_back(where, n);
      ys.emplace_back(where, n);
      zs.emplace_back(where, n);
    }
    vector<double> tmp(where, n);
    scalar<double> a(where, 0.25), b(where, 0.5);
    const int reps = n <= 100000 ? 200 : n <= 10000000 ? 20 : 5;
    auto tf = measure(
        [&] {
          for (int i = 0; i < reps; ++i) {
            const std::size_t k = std::size_t(i) % sets;
            fused(xs[k], a, b, ys[k], zs[k]);
          }
          wait(where);
        },
        1, 5);
    tf.median_s /= reps;
    tf.min_s /= reps;
    tf.max_s /= reps;
    const double bytes = 4.0 * 8.0 * double(n);  // read x, y, z; write x
    print_row({.benchmark = "linalg/blas1-paper/fused",
               .device = device,
               .size = fmt::format("n={:.0e}", double(n)),
               .timing = tf,
               .work = bytes,
               .work_unit = "B",
               .bytes = bytes,
               .limit = copy_bw,
               .limit_name = "measured copy bandwidth",
               .note = fmt::format("{:.1f}% of copy bw, 1 kernel, {} operand sets rotated",
                                   100.0 * bytes / tf.median_s / copy_bw, sets)});
    auto tu = measure(
        [&] {
          for (int i = 0; i < reps; ++i) {
            const std::size_t k = std::size_t(i) % sets;
            k_modify(tmp, zs[k]);
            k_axpy_neg(tmp, ys[k]);
            k_scale(xs[k], a, b);
            k_sub(xs[k], tmp);
          }
          wait(where);
        },
        1, 5);
    tu.median_s /= reps;
    tu.min_s /= reps;
    tu.max_s /= reps;
    print_row(
        {.benchmark = "linalg/blas1-paper/separate",
         .device = device,
         .size = fmt::format("n={:.0e}", double(n)),
         .timing = tu,
         .work = bytes,
         .work_unit = "B",
         .bytes = 10.0 * 8.0 * double(n),
         .limit = copy_bw,
         .limit_name = "measured copy bandwidth",
         .note = fmt::format("4 kernels + temporary; fused is {:.2f}x faster", tu.median_s / tf.median_s)});
  }
}

void bench_blas2(const placement& where, const std::string& device, bool quick) {
  symbolic_vector<double, 0> x;
  symbolic_matrix<double, 1> a;
  symbolic_vector<double, 2> y;
  symbolic_vector<double, 3> z;
  custom_operation op(x = prod(a, inner_prod(y, y + z) * y + z));
  for (std::size_t n : {100, 300, 1000, 3000, 10000}) {
    if (quick && n > 3000) break;
    if (!where.on_gpu() && n > 3000) break;
    matrix<double> m(where, n, n);
    std::vector<double> hm(n * n, 1.0 / double(n));
    m.copy_from_host(hm);
    vector<double> vx(where, n), vy(where, n), vz(where, n);
    vy.copy_from_host(std::vector<double>(n, 0.5));
    vz.copy_from_host(std::vector<double>(n, 0.25));
    const int reps = n <= 1000 ? 200 : 20;
    auto t = measure(
        [&] {
          for (int i = 0; i < reps; ++i) op(vx, m, vy, vz);
          wait(where);
        },
        1, 5);
    t.median_s /= reps;
    t.min_s /= reps;
    t.max_s /= reps;
    print_row({.benchmark = "linalg/blas2-paper/generated",
               .device = device,
               .size = fmt::format("{}x{}", n, n),
               .timing = t,
               .work = 8.0 * double(n) * double(n),
               .work_unit = "B",
               .bytes = 8.0 * double(n) * double(n),
               .note = fmt::format("{} kernels", op.kernels_per_run())});
#ifdef MOLACCEL_HAVE_CUDA
    if (where.on_gpu()) molaccel::bench::blas2_cublas_baseline(where.device, n, device);
#endif
  }
}

struct bicgstab_selection {
  std::size_t min_n = 0, max_n = 0;  // 0: no bound
  // Poisson grid sides (n = side^2); 316: n = 99,856, the largest square grid within the issue's
  // n <= 1e5 (317: 100,489, the former "1e5" row); 447: n = 2e5, the resident mode's range.
  // --grids= replaces them.
  std::vector<std::size_t> grids{32, 100, 316, 317, 447, 1000, 3163};
  int iterations = 0;  // per solve (--iterations=); 0: 400 up to n = 1e5, 100 above
  bool graph = true, stream = true, persistent = true, resident = true;
  // Persistent geometries "BLOCKSxTHREADS" (0x0 = one block of 256 per SM), compared side by side.
  std::vector<std::pair<int, int>> persistent_geometries = {{0, 0}};
  // Resident geometries "BLOCKSxTHREADS[c|g|o|a|e][+]" (0x0 = automatic; c cluster, g grid with the
  // flag barrier, o grid with cooperative groups' grid.sync(), a grid with one arrival counter,
  // e the counter with a non-returning red arrival, n the counter with a generation word, q the
  // counter whose last arrival does not poll; +: the two-barrier BiCGStab form, - the four,
  // t the three, i the one (grid, by diagonals);
  // s / l: matrix rows in shared memory / read from L2 (grid, 4 rows per thread; default s);
  // r / d: the matrix as CSR / by diagonals (solver_options::resident_matrix 1 / 2).
  struct resident_geometry {
    int blocks = 0, threads = 0, barrier = 0, form = 0, matrix_shared = 0, gather = 0, matrix = 0;
    std::string label = "resident";
  };
  std::vector<resident_geometry> resident_geometries = {{}};
  // Fused (streaming two-barrier BiCGStab) geometries "BLOCKSxTHREADS[1|2]" (0x0 = automatic;
  // 1 / 2: registers for 1 / 2 blocks of 512 per SM); only when --modes names fused.
  bool fused = false;
  struct fused_geometry {
    int blocks = 0, threads = 0, per_sm = 0, barrier = 0, gather = 0;
    int loads = 0, rows = 0;  // solver_options::fused_loads / fused_rows (0 automatic)
    int matrix = 0;           // solver_options::fused_matrix (0 automatic, 1 CSR, 2 diagonals)
    std::string label = "fused";
  };
  std::vector<fused_geometry> fused_geometries = {{}};
};

void bench_bicgstab(const Resources& resources, const std::string& device, double copy_bw, bool quick,
                    const bicgstab_selection& sel) {
  // Minimal traffic of one iteration per row: two CSR products (5 values, 5 column indices,
  // a row pointer, the input and output vector: 80 B) and 20 vector reads/writes of the
  // fused vector updates and inner products (160 B).
  const double bytes_per_row = 2 * 80.0 + 160.0;
  for (std::size_t grid : sel.grids) {
    const std::size_t n = grid * grid;
    if (sel.max_n ? n > sel.max_n : quick && n > 2000000) break;
    if (n < sel.min_n) continue;
    if (!resources.uses_gpu() && n > 200000) break;
    const auto a = poisson_2d(grid);
    const auto b = multiply(a, std::vector<double>(n, 1.0));
    struct run {
      launch_mode mode;
      std::pair<int, int> geometry;
      bicgstab_selection::resident_geometry resident;
      bicgstab_selection::fused_geometry fused{};
    };
    std::vector<run> runs;
    if (sel.graph) runs.push_back({launch_mode::graph, {0, 0}, {}});
    if (sel.stream) runs.push_back({launch_mode::stream, {0, 0}, {}});
    if (sel.persistent)
      for (auto g : sel.persistent_geometries) runs.push_back({launch_mode::persistent, g, {}});
    if (sel.resident)
      for (const auto& g : sel.resident_geometries) runs.push_back({launch_mode::resident, {0, 0}, g});
    if (sel.fused && resources.uses_gpu())
      for (const auto& g : sel.fused_geometries) runs.push_back({launch_mode::fused, {0, 0}, {}, g});
    for (const auto& [mode, geometry, resident, fused] : runs) {
      if (mode == launch_mode::resident && n > 300000) {
        std::printf("linalg/bicgstab-poisson n=%zu: %s: not run (rows do not fit the GPU's threads)\n", n,
                    resident.label.c_str());
        continue;
      }
      if (!resources.uses_gpu() && mode != launch_mode::graph) continue;
      if (mode == launch_mode::persistent && n > 1100000)
        continue;  // one block per SM: for latency-bound sizes
      if (mode == launch_mode::persistent && geometry.first > 0 && geometry.first < 16 && n > 200000)
        continue;  // a few blocks: only for small systems
      solver_options o;
      o.persistent_blocks = geometry.first;
      o.persistent_threads = geometry.second;
      o.resident_blocks = resident.blocks;
      o.resident_threads = resident.threads;
      o.resident_barrier = resident.barrier;
      o.resident_form = resident.form;
      o.resident_matrix_shared = resident.matrix_shared;
      o.resident_matrix = resident.matrix;
      o.resident_gather = mode == launch_mode::fused ? fused.gather : resident.gather;
      if (mode == launch_mode::fused) o.resident_barrier = fused.barrier;
      o.fused_blocks = fused.blocks;
      o.fused_threads = fused.threads;
      o.fused_blocks_per_sm = fused.per_sm;
      o.fused_loads = fused.loads;
      o.fused_rows = fused.rows;
      o.fused_matrix = fused.matrix;
      o.solver = solver_kind::bicgstab;
      o.tolerance = 0;  // fixed iteration count: the iteration stops only on the cap or a breakdown
      o.max_iterations = sel.iterations > 0 ? sel.iterations : n <= 100000 ? 400 : 100;
      o.launch = mode;
      std::vector<double> per_iteration;
      solver_result last;
      try {
        for (int rep = 0; rep < 3; ++rep) {
          last = solve(resources, a, b, o);
          per_iteration.push_back(last.seconds_per_iteration);
        }
      } catch (const std::exception& e) {
        std::printf("linalg/bicgstab-poisson n=%zu: launch mode %d failed: %s\n", n, int(mode), e.what());
        continue;
      }
      std::sort(per_iteration.begin(), per_iteration.end());
      molaccel::bench::Timing t;
      t.median_s = per_iteration[1];
      t.min_s = per_iteration[0];
      t.max_s = per_iteration[2];
      t.repeats = 3;
      const double floor_s = bytes_per_row * double(n) / copy_bw;
      print_row(
          {.benchmark = fmt::format("linalg/bicgstab-poisson/fp64/{}",
                                    resources.uses_gpu() ? (mode == launch_mode::graph      ? "graph"
                                                            : mode == launch_mode::stream   ? "stream"
                                                            : mode == launch_mode::resident ? resident.label
                                                            : mode == launch_mode::fused    ? fused.label
                                                                                            : "persistent")
                                                         : "cpu"),
           .device = device,
           .size = fmt::format("n={}", n),
           .timing = t,
           .work = bytes_per_row * double(n),
           .work_unit = "B",
           .bytes = bytes_per_row * double(n),
           .limit = copy_bw,
           .limit_name = "measured copy bandwidth",
           .note = fmt::format("{:.2f} us/iter, floor {:.2f} us ({:.2f}x), {} iters, {} kernels/iter, {}",
                               t.median_s * 1e6, floor_s * 1e6, t.median_s / floor_s, last.iterations,
                               last.kernels_per_iteration, last.backend)});
    }
  }
}

// Calls fn(item) for each non-empty item of a comma list.
template <class Fn>
void for_each_item(const std::string& list, Fn fn) {
  for (std::size_t pos = 0; pos < list.size();) {
    const std::size_t end = std::min(list.find(',', pos), list.size());
    if (end > pos) fn(list.substr(pos, end - pos));
    pos = end + 1;
  }
}

// Calls fn(item, position of 'x') for each BLOCKSxTHREADS[suffix] item of a comma list (the
// --persistent=, --resident= and --fused= geometries); items without an 'x' are ignored.
template <class Fn>
void for_each_geometry(const std::string& list, Fn fn) {
  for_each_item(list, [&](const std::string& item) {
    const std::size_t x = item.find('x');
    if (x != std::string::npos) fn(item, x);
  });
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, cpu_only = false, bicgstab_only = false;
  bicgstab_selection sel;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* prefix) -> const char* {
      return arg.rfind(prefix, 0) == 0 ? argv[i] + std::strlen(prefix) : nullptr;
    };
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--cpu") {
      cpu_only = true;
    } else if (arg == "--bicgstab-only") {
      bicgstab_only = true;
    } else if (auto v = value("--min-n=")) {
      sel.min_n = std::size_t(std::atof(v));
    } else if (auto v = value("--grids=")) {  // e.g. 150,224,317
      sel.grids.clear();
      for_each_item(v, [&](const std::string& item) { sel.grids.push_back(std::size_t(std::atoll(item.c_str()))); });
    } else if (auto v = value("--max-n=")) {
      sel.max_n = std::size_t(std::atof(v));
    } else if (auto v = value("--iterations=")) {
      sel.iterations = std::atoi(v);
    } else if (auto v = value("--modes=")) {  // e.g. graph,persistent
      const std::string m = v;
      sel.graph = m.find("graph") != std::string::npos;
      sel.stream = m.find("stream") != std::string::npos;
      sel.persistent = m.find("persistent") != std::string::npos;
      sel.resident = m.find("resident") != std::string::npos;
      sel.fused = m.find("fused") != std::string::npos;
    } else if (auto v = value("--persistent=")) {  // e.g. 0x0,1x1024,4x1024
      sel.persistent_geometries.clear();
      for_each_geometry(v, [&](const std::string& item, std::size_t x) {
        sel.persistent_geometries.push_back({std::atoi(item.substr(0, x).c_str()), std::atoi(item.c_str() + x + 1)});
      });
    } else if (auto v = value("--fused=")) {  // e.g. 0x0,132x5121,264x512
      sel.fused_geometries.clear();
      for_each_geometry(v, [&](const std::string& item, std::size_t x) {
        bicgstab_selection::fused_geometry g;
        g.blocks = std::atoi(item.substr(0, x).c_str());
        std::string threads = item.substr(x + 1);
        // Trailing A / Z: every warp / warp 0 gathers the block sums; n: barrier 6; c / a: vector
        // loads through L2 / L1 (fused_loads 1 / 2); s / b: grid-stride / balanced rows (fused_rows 1 / 2);
        // r / d: the matrix as CSR / by diagonals (fused_matrix 1 / 2).
        while (!threads.empty() && std::string_view("AZncasbrd").find(threads.back()) != std::string_view::npos) {
          const char t = threads.back();
          if (t == 'r' || t == 'd')
            g.matrix = t == 'r' ? 1 : 2;
          else if (t == 'c' || t == 'a')
            g.loads = t == 'c' ? 1 : 2;
          else if (t == 's' || t == 'b')
            g.rows = t == 's' ? 1 : 2;
          else if (t == 'n')
            g.barrier = 6;
          else
            g.gather = threads.back() == 'A' ? 1 : 2;
          threads.pop_back();
        }
        // A trailing 1 or 2 after a block size of 128/256/512 is the blocks-per-SM bound.
        if (threads.size() == 4 && (threads.back() == '1' || threads.back() == '2')) {
          g.per_sm = threads.back() - '0';
          threads.pop_back();
        }
        g.threads = std::atoi(threads.c_str());
        g.label = item == "0x0" ? "fused" : "fused-" + item;
        sel.fused_geometries.push_back(g);
      });
    } else if (auto v = value("--resident=")) {  // e.g. 0x0,1x512,16x512c,132x512g,132x512o
      sel.resident_geometries.clear();
      for_each_geometry(v, [&](const std::string& item, std::size_t x) {
        bicgstab_selection::resident_geometry g;
        g.blocks = std::atoi(item.substr(0, x).c_str());
        g.threads = std::atoi(item.c_str() + x + 1);
        std::string shape = item;
        // Trailing + / - / t / i: BiCGStab with two / four / three / one barrier(s) (resident_form 2 / 1 / 3 / 4);
        // s / l: matrix in shared memory / from L2; A / Z: every warp / one read per block gathers;
        // r / d: the matrix as CSR / by diagonals.
        while (shape.back() == '+' || shape.back() == '-' || shape.back() == 't' || shape.back() == 'i' || shape.back() == 's' ||
               shape.back() == 'l' || shape.back() == 'A' || shape.back() == 'Z' || shape.back() == 'r' ||
               shape.back() == 'd') {
          if (shape.back() == 'r' || shape.back() == 'd')
            g.matrix = shape.back() == 'r' ? 1 : 2;
          else if (shape.back() == 'A' || shape.back() == 'Z')
            g.gather = shape.back() == 'A' ? 1 : 2;
          else if (shape.back() == 's' || shape.back() == 'l')
            g.matrix_shared = shape.back() == 's' ? 2 : 1;
          else
            g.form = shape.back() == '+' ? 2 : shape.back() == 't' ? 3 : shape.back() == 'i' ? 4 : 1;
          shape.pop_back();
        }
        const char last = shape.back();
        g.barrier = last == 'c'   ? 1
                    : last == 'g' ? 2
                    : last == 'o' ? 3
                    : last == 'a' ? 4
                    : last == 'e' ? 5
                    : last == 'n' ? 6
                    : last == 'q' ? 7
                                  : 0;
        g.label = item == "0x0" ? "resident" : "resident-" + item;
        sel.resident_geometries.push_back(g);
      });
    } else {
      std::fprintf(stderr,
                   "usage: bench_linalg [--quick] [--cpu] [--bicgstab-only] [--min-n=N] [--max-n=N] [--grids=S,...] [--iterations=N] "
                   "[--modes=graph,stream,persistent,resident,fused] [--persistent=BxT,...] "
                   "[--resident=BxT[c|g|o|a|e|n|q][+|-|t][s|l][A|Z][r|d],...] [--fused=BxT[1|2][n][A|Z][c|a][s|b][r|d],...]\n");
      return 1;
    }
  }
  Resources::Options ro;
  ro.device = DeviceSpec::parse(cpu_only ? "cpu" : "auto");
  const Resources resources = Resources::create(ro);
  const placement where = placement_of(resources);
  std::string device = cpu_info().model;
  double copy_bw = 20e9;  // CPU: a nominal stream bandwidth; GPU: measured below
  molaccel::bench::print_header();
#ifdef MOLACCEL_HAVE_CUDA
  if (where.on_gpu()) {
    device = gpu_list().at(static_cast<std::size_t>(where.device)).name;
    copy_bw = molaccel::bench::measured_copy_bandwidth(where.device);
  }
#endif
  if (!where.on_gpu()) std::printf("(CPU: rows are compared with a nominal 20 GB/s)\n");
  if (!bicgstab_only) {
    bench_blas1(where, device, copy_bw, quick);
    bench_blas2(where, device, quick);
  }
  bench_bicgstab(resources, device, copy_bw, quick, sel);
  return 0;
}

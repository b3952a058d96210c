// linalg benchmarks: the paper's BLAS-1 example as one generated kernel vs four separate
// kernels, the paper's BLAS-2 example vs cuBLAS separate calls, and fp64 BiCGStab and CG on 2-D
// Poisson (time per iteration per launch mode) against the memory-bandwidth floor. ViennaCL's
// BiCGStab runs in bench_linalg_viennacl (same table format) when it is installed.
//
//   bench_linalg [--quick] [--cpu] [--bicgstab-only] [--grids=32,100,316] [--solvers=bicgstab,cg]
//                [--modes=auto,graph,generated]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/harness.hpp"
#include "linalg/backend.hpp"
#include "linalg/solver_row.hpp"
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

void wait(const Placement& where) {
#ifdef MOLACCEL_HAVE_CUDA
  if (where.on_gpu()) gpu::synchronize(where.device);
#else
  (void)where;
#endif
}

// x += (alpha + beta) * x - (y - F(G(z))): fused, and as the paper's reference (three BLAS-1
// calls and one element-wise kernel, with a temporary).
void bench_blas1(const Placement& where, const std::string& device, double copy_bw, bool quick) {
  SymbolicVector<double, 0> x;
  GpuSymbolicScalar<double, 1> alpha;
  GpuSymbolicScalar<double, 2> beta;
  SymbolicVector<double, 3> y;
  SymbolicVector<double, 4> z;
  CustomOperation fused(x += (alpha + beta) * x - (y - F(G(z))));
  // The paper's reference: one element-wise kernel and three BLAS-1 calls, with a temporary:
  // t = F(G(z)); t = y - t; x += (alpha + beta) * x; x -= t.
  SymbolicVector<double, 0> t;
  SymbolicVector<double, 1> u;
  GpuSymbolicScalar<double, 1> s1;
  GpuSymbolicScalar<double, 2> s2;
  CustomOperation k_modify(t = F(G(u)));
  CustomOperation k_axpy_neg(t = u - t);
  CustomOperation k_scale(t += (s1 + s2) * t);
  CustomOperation k_sub(t = t - u);
  const std::size_t max_n = where.on_gpu() ? (quick ? 10000000 : 100000000) : 10000000;
  for (std::size_t n = 1000; n <= max_n; n *= 10) {
    // Consecutive calls rotate over enough sets of x, y, z (24n bytes each) to exceed 150 MB, so
    // at n = 1e5..1e6 the operands do not stay in the 50 MB L2 between calls (the copy-bandwidth
    // comparison assumes DRAM traffic). Launch-bound sizes use the same sets.
    const std::size_t sets = std::clamp<std::size_t>((150000000 + 24 * n - 1) / (24 * n), 1, 8);
    std::vector<Vector<double>> xs, ys, zs;
    for (std::size_t k = 0; k < sets; ++k) {
      xs.emplace_back(where, n);
      ys.emplace_back(where, n);
      zs.emplace_back(where, n);
    }
    Vector<double> tmp(where, n);
    Scalar<double> a(where, 0.25), b(where, 0.5);
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

void bench_blas2(const Placement& where, const std::string& device, bool quick) {
  SymbolicVector<double, 0> x;
  SymbolicMatrix<double, 1> a;
  SymbolicVector<double, 2> y;
  SymbolicVector<double, 3> z;
  CustomOperation op(x = prod(a, inner_prod(y, y + z) * y + z));
  for (std::size_t n : {100, 300, 1000, 3000, 10000}) {
    if (quick && n > 3000) break;
    if (!where.on_gpu() && n > 3000) break;
    Matrix<double> m(where, n, n);
    std::vector<double> hm(n * n, 1.0 / double(n));
    m.copy_from_host(hm);
    Vector<double> vx(where, n), vy(where, n), vz(where, n);
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

struct BicgstabSelection {
  std::size_t min_n = 0, max_n = 0;  // 0: no bound
  // Poisson grid sides (n = side^2); 316: n = 99,856, the largest square grid within n <= 1e5;
  // 447: n = 2e5, one-barrier BiCGStab's largest tiles. --grids= replaces them.
  std::vector<std::size_t> grids{32, 100, 316, 447, 1000, 3163};
  int iterations = 0;  // per solve (--iterations=); 0: 400 up to n = 1e5, 100 above
  // Launch modes compared side by side (--modes=auto,graph,generated).
  std::vector<Launch> modes{Launch::automatic, Launch::graph};
  std::vector<Solver> solvers{Solver::bicgstab, Solver::cg};  // --solvers=bicgstab,cg
};

void bench_bicgstab(const Resources& resources, const std::string& device, double copy_bw, bool quick,
                    const BicgstabSelection& sel) {
  for (std::size_t grid : sel.grids) {
    const std::size_t n = grid * grid;
    if (sel.max_n ? n > sel.max_n : quick && n > 2000000) break;
    if (n < sel.min_n) continue;
    if (!resources.uses_gpu() && n > 200000) break;
    const auto a = poisson_2d(grid);
    const auto b = multiply(a, std::vector<double>(n, 1.0));
    for (const Solver solver : sel.solvers)
      for (const Launch mode : sel.modes) {
        // Minimal traffic of one iteration per row: a CSR product (5 values, 5 column indices, a
        // row pointer, the input and output vector: 80 B) per product, and the vector reads and
        // writes of the fused updates and inner products: BiCGStab two products and 20 vectors
        // (320 B), CG one product and 10 vectors (160 B).
        const bool cg = solver == Solver::cg;
        const double bytes_per_row = cg ? 80.0 + 80.0 : 2 * 80.0 + 160.0;
        if (!resources.uses_gpu() && mode != Launch::automatic) continue;
        SolverOptions o;
        o.solver = solver;
        o.tolerance = 0;  // fixed iteration count: the iteration stops only on the cap or a breakdown
        o.max_iterations = sel.iterations > 0 ? sel.iterations : n <= 100000 ? 400 : 100;
        o.launch = mode;
        std::vector<double> per_iteration;
        SolverResult last;
        try {
          for (int rep = 0; rep < 3; ++rep) {
            last = solve(resources, a, b, o);
            per_iteration.push_back(last.seconds_per_iteration);
          }
        } catch (const std::exception& e) {
          std::printf("linalg/%s-poisson n=%zu: launch %s failed: %s\n",
                      std::string(to_string(solver)).c_str(), n, std::string(to_string(mode)).c_str(),
                      e.what());
          continue;
        }
        const std::string label = resources.uses_gpu() ? std::string(to_string(mode)) : std::string("cpu");
        molaccel::bench::print_solver_row(fmt::format("linalg/{}-poisson/fp64/{}", to_string(solver), label),
                                          device, n, molaccel::bench::summarise(per_iteration), bytes_per_row,
                                          copy_bw, "measured copy bandwidth", last);
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

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, cpu_only = false, bicgstab_only = false;
  BicgstabSelection sel;
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
      for_each_item(
          v, [&](const std::string& item) { sel.grids.push_back(std::size_t(std::atoll(item.c_str()))); });
    } else if (auto v = value("--max-n=")) {
      sel.max_n = std::size_t(std::atof(v));
    } else if (auto v = value("--iterations=")) {
      sel.iterations = std::atoi(v);
    } else if (auto v = value("--modes=")) {  // e.g. auto,graph,generated
      sel.modes.clear();
      bool known = true;
      for_each_item(v, [&](const std::string& m) {
        const auto launch = launch_from_string(m);
        known = known && launch.has_value();
        if (launch) sel.modes.push_back(*launch);
      });
      if (!known) {
        std::fprintf(stderr, "bench_linalg: --modes=%s: auto, graph or generated\n", v);
        return 1;
      }
    } else if (auto v = value("--solvers=")) {  // e.g. cg or bicgstab,cg
      sel.solvers.clear();
      for_each_item(
          v, [&](const std::string& m) { sel.solvers.push_back(m == "cg" ? Solver::cg : Solver::bicgstab); });
    } else {
      std::fprintf(
          stderr,
          "usage: bench_linalg [--quick] [--cpu] [--bicgstab-only] [--min-n=N] [--max-n=N] [--grids=S,...] "
          "[--iterations=N] [--solvers=bicgstab,cg] [--modes=auto,graph,generated]\n");
      return 1;
    }
  }
  Resources::Options ro;
  ro.device = DeviceSpec::parse(cpu_only ? "cpu" : "auto");
  const Resources resources = Resources::create(ro);
  const Placement where = placement_of(resources);
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

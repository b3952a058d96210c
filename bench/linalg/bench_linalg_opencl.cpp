// linalg through OpenCL: BiCGStab (fp64) per iteration on 2-D Poisson n = 1e3 .. 1e7 against the
// memory-bandwidth floor: the host loop over the generated kernels at every size, the persistent
// kernel (one launch per solve) at n <= 1e5, and ViennaCL 1.7.1's OpenCL backend on the same
// device type in the same process where the build found it; and the paper's BLAS-1 example fused
// into one kernel at n = 1e7 against the device's copy bandwidth (clEnqueueCopyBuffer). Runs on
// the first OpenCL GPU, or on --device N (any OpenCL device, e.g. PoCL's CPU device, where the
// persistent kernel runs as one work-group); without an OpenCL GPU and without --device it says
// so and exits 0.
//   bench_linalg_opencl [--device N] [--quick]
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "linalg/opencl/executor.hpp"
#include "linalg/solver_row.hpp"
#include "molaccel/opencl.hpp"

using namespace molaccel;
using namespace molaccel::linalg;
namespace rt = molaccel::opencl;

#ifdef MOLACCEL_BENCH_VIENNACL_OPENCL
namespace molaccel::bench {
std::string viennacl_opencl_select(bool gpu);  // bench_linalg_opencl_viennacl.cpp
Timing viennacl_opencl_bicgstab(std::size_t grid, std::size_t iterations);  // seconds per iteration
}  // namespace molaccel::bench
#endif

namespace {

void finish(rt::Device& d) {
  MOLACCEL_CL_TRY(rt::api()->Finish(d.queue), "clFinish");
}

// Copy bandwidth (read + write bytes per second) of clEnqueueCopyBuffer over `bytes`.
double copy_bandwidth(rt::Device& d, std::size_t bytes) {
  rt::Buffer a(d, bytes), b(d, bytes);
  const auto t = bench::measure([&] {
    MOLACCEL_CL_TRY(rt::api()->EnqueueCopyBuffer(d.queue, a.get(), b.get(), 0, 0, bytes, 0, nullptr, nullptr),
                    "clEnqueueCopyBuffer");
    finish(d);
  });
  return 2.0 * double(bytes) / t.median_s;
}

void bench_blas1(rt::Device& d, std::size_t n, double copy_bw) {
  MOLACCEL_EW_MODIFIER(F, "1/(1+X)");
  MOLACCEL_EW_MODIFIER(G, "X*X");
  SymbolicVector<double, 0> x;
  GpuSymbolicScalar<double, 1> alpha;
  GpuSymbolicScalar<double, 2> beta;
  SymbolicVector<double, 3> y;
  SymbolicVector<double, 4> z;
  CustomOperation op(x += (alpha + beta) * x - (y - F(G(z))));
  cl::Executor exec(op.plan(), d);
  rt::Buffer bx(d, n * 8), by(d, n * 8), bz(d, n * 8), scalars(d, 16);
  const double ab[2] = {1e-9, -1e-9};
  scalars.write(ab, sizeof ab);
  auto vec = [&](const rt::Buffer& b) {
    cl::Operand o;
    o.data = b.get();
    o.rows = n;
    o.cols = 1;
    return o;
  };
  auto scalar = [&](std::size_t i) {
    cl::Operand o;
    o.kind = NodeKind::device_scalar;
    o.data = scalars.get();
    o.offset = i;
    o.rows = 1;
    return o;
  };
  const std::vector<cl::Operand> args{vec(bx), scalar(0), scalar(1), vec(by), vec(bz)};
  const auto t = bench::measure([&] {
    exec.run(args);
    finish(d);
  });
  const double bytes = 4.0 * 8.0 * double(n);  // read x, y, z; write x
  bench::print_row({.benchmark = "linalg/opencl/blas1-paper-fused/fp64",
                    .device = d.info.name,
                    .size = fmt::format("n={}", n),
                    .timing = t,
                    .work = bytes,
                    .work_unit = "B",
                    .bytes = bytes,
                    .limit = copy_bw,
                    .limit_name = "clEnqueueCopyBuffer bandwidth",
                    .note = fmt::format("{:.0f}% of copy bandwidth, {} kernel(s)",
                                        100.0 * bytes / t.median_s / copy_bw, op.plan().stages.size())});
}

void bench_bicgstab(int device, rt::Device& d, double copy_bw, bool quick) {
  // Minimal traffic of one iteration per row, as bench_linalg: two CSR products (80 B) and 20
  // vector reads/writes (160 B).
  const double bytes_per_row = 2 * 80.0 + 160.0;
#ifdef MOLACCEL_BENCH_VIENNACL_OPENCL
  const std::string viennacl_device = bench::viennacl_opencl_select(d.info.gpu);
#else
  const std::string viennacl_device;
#endif
  for (std::size_t grid : {32, 100, 316, 1000, 3163}) {
    const std::size_t n = grid * grid;
    if (quick && n > 2000000) break;
    const auto a = poisson_2d(grid);
    const auto b = multiply(a, std::vector<double>(n, 1.0));
    const int iterations = n <= 100000 ? 400 : 100;
    double viennacl_s = 0;
#ifdef MOLACCEL_BENCH_VIENNACL_OPENCL
    if (!viennacl_device.empty()) {
      const double floor_s = bytes_per_row * double(n) / copy_bw;
      const bench::Timing t = bench::viennacl_opencl_bicgstab(grid, std::size_t(iterations));
      viennacl_s = t.median_s;
      bench::print_row({.benchmark = "linalg/opencl/bicgstab-poisson/fp64/viennacl-1.7.1",
                        .device = viennacl_device,
                        .size = fmt::format("n={}", n),
                        .timing = t,
                        .note = fmt::format("{:.2f} us/iter, floor {:.2f} us ({:.2f}x)", t.median_s * 1e6,
                                            floor_s * 1e6, t.median_s / floor_s)});
    }
#endif
    // The host loop at every size; the persistent kernel where the problem fits the resident
    // work-groups' rule size (n <= 1e5 here).
    for (const Launch launch : {Launch::graph, Launch::generated}) {
      if (launch == Launch::generated && n > 100000) continue;
      SolverOptions o;
      o.solver = Solver::bicgstab;
      o.tolerance = 0;  // fixed iteration count
      o.max_iterations = iterations;
      o.launch = launch;
      std::vector<double> per_iteration;
      SolverResult last;
      for (int rep = 0; rep < 4; ++rep) {
        last = linalg::opencl::solve(device, a, b, o);
        if (rep > 0) per_iteration.push_back(last.seconds_per_iteration);  // first: program builds
      }
      const bench::Timing t = bench::summarise(per_iteration);
      const std::string versus =
          viennacl_s > 0 ? fmt::format(", speed-up over ViennaCL {:.2f}x", viennacl_s / t.median_s) : "";
      bench::print_solver_row(launch == Launch::generated ? "linalg/opencl/bicgstab-poisson/fp64/persistent"
                                                          : "linalg/opencl/bicgstab-poisson/fp64/host-loop",
                              d.info.name, n, t, bytes_per_row, copy_bw, "clEnqueueCopyBuffer bandwidth",
                              last, versus);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int device = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc)
      device = std::atoi(argv[++i]);
  }
  device = bench::opencl_device_or_first_gpu(device, "bench_linalg_opencl");
  if (device < 0) return 0;
  try {
    rt::Device& d = rt::device(device);
    const std::size_t big = quick ? 1000000 : 10000000;
    const double copy_bw = copy_bandwidth(d, big * 8);
    std::printf("OpenCL device %d: %s (%s), copy bandwidth %.1f GB/s\n", device, d.info.name.c_str(),
                d.info.platform.c_str(), copy_bw / 1e9);
    bench::print_header();
    bench_blas1(d, big, copy_bw);
    bench_bicgstab(device, d, copy_bw, quick);
  } catch (const std::exception& e) {
    std::printf("bench_linalg_opencl: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Generated solvers (linalg programs: one persistent kernel per solve) against the hand-written
// solve() (Launch::resident and Launch::fused), per iteration, fp64, in the same run: 2-D
// Poisson at the given grid sizes and 1138_bus. A fixed iteration count (tolerance 0: every
// solve runs to the cap), one warm-up, then the median of the repeats. The generated time is the
// kernel's (events), setup included (one or two segments, under 1 % of 100 iterations).
//
//   bench_program [--grids=32,100,316,1000,3163] [--iterations=N] [--repeats=5] [--matrix=FILE]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"

using namespace molaccel;
using namespace molaccel::linalg;

namespace {

struct Options {
  std::vector<std::size_t> grids{32, 100, 316, 1000, 3163};
  int iterations = 0;  // 0: 400 up to n = 1e5, 100 above
  int repeats = 5;
  std::string matrix = std::string(MOLACCEL_SOURCE_DIR) + "/data/linalg/1138_bus.mtx";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds per iteration of `run` (which returns seconds and iterations), after a warm-up.
template <class Run>
void row(const std::string& problem, std::size_t n, const std::string& method, int repeats, Run run) {
  std::vector<double> per_iteration;
  int iterations = 0;
  std::string note;
  try {
    run(iterations, note);  // warm-up (compilation, allocation)
    for (int r = 0; r < repeats; ++r) {
      const double s = run(iterations, note);
      per_iteration.push_back(iterations > 0 ? s / iterations : 0);
    }
  } catch (const std::exception& e) {
    std::printf("%-14s %10zu  %-28s  not run: %s\n", problem.c_str(), n, method.c_str(), e.what());
    return;
  }
  std::printf("%-14s %10zu  %-28s  %10.2f us/iter  %6d iters  %s\n", problem.c_str(), n, method.c_str(),
              median(per_iteration) * 1e6, iterations, note.c_str());
  std::fflush(stdout);
}

void bench_problem(const std::string& problem, const HostCsr<double>& a, const Resources& gpu, int iterations,
                   int repeats) {
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  const struct {
    const char* name;
    Program program;
  } generated[] = {
      {"cg", cg_program()}, {"bicgstab", bicgstab_program()}, {"pipelined_cg", pipelined_cg_program()}};
  for (const auto& g : generated) {
    ProgramInputs in;
    in.matrix = &a;
    in.vectors["b"] = b;
    in.scalars["bound"] = 0;  // no convergence: the cap
    in.max_iterations = iterations;
    row(problem, a.rows, std::string("generated ") + g.name, repeats, [&](int& its, std::string& note) {
      const auto r = run_program_on_gpu(g.program, in);
      its = r.iterations;
      note = fmt::format("{} barriers/iter, {} blocks, {}", r.barriers_per_iteration, r.blocks, r.status);
      return r.seconds;
    });
  }
  for (const Solver solver : {Solver::cg, Solver::bicgstab})
    for (const Launch launch : {Launch::resident, Launch::fused}) {
      SolverOptions o;
      o.solver = solver;
      o.tolerance = 0;
      o.max_iterations = iterations;
      o.launch = launch;
      row(problem, a.rows, fmt::format("hand-written {} {}", to_string(solver), to_string(launch)), repeats,
          [&](int& its, std::string& note) {
            const auto r = solve(gpu, a, b, o);
            its = r.iterations;
            note = r.backend;
            return r.seconds;
          });
    }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* prefix) -> const char* {
      return arg.rfind(prefix, 0) == 0 ? argv[i] + std::strlen(prefix) : nullptr;
    };
    if (auto v = value("--grids=")) {
      opt.grids.clear();
      for (std::string list = v; !list.empty();) {
        const std::size_t comma = std::min(list.find(','), list.size());
        opt.grids.push_back(std::size_t(std::atoll(list.substr(0, comma).c_str())));
        list = comma < list.size() ? list.substr(comma + 1) : "";
      }
    } else if (auto v = value("--iterations=")) {
      opt.iterations = std::atoi(v);
    } else if (auto v = value("--repeats=")) {
      opt.repeats = std::max(1, std::atoi(v));
    } else if (auto v = value("--matrix=")) {
      opt.matrix = v;
    } else {
      std::fprintf(
          stderr,
          "usage: bench_program [--grids=S,...] [--iterations=N] [--repeats=R] [--matrix=FILE.mtx]\n");
      return 1;
    }
  }
  Resources::Options ro;
  ro.device = DeviceSpec::parse("gpu");
  std::unique_ptr<Resources> gpu;
  try {
    gpu = std::make_unique<Resources>(Resources::create(ro));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_program: needs a GPU (%s)\n", e.what());
    return 1;
  }
  std::printf("%-14s %10s  %-28s  %18s  %12s  %s\n", "problem", "rows", "method", "per iteration",
              "iterations", "note");
  for (std::size_t grid : opt.grids) {
    const std::size_t n = grid * grid;
    const int its = opt.iterations > 0 ? opt.iterations : n <= 100000 ? 400 : 100;
    bench_problem(fmt::format("poisson {}^2", grid), poisson_2d(grid), *gpu, its, opt.repeats);
  }
  if (!opt.matrix.empty()) bench_problem("1138_bus", read_matrix_market(opt.matrix), *gpu, 400, opt.repeats);
  return 0;
}

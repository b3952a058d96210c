// Generated solvers (linalg programs: one persistent kernel per solve), and solve() as it picks
// one against its graph path (the generator's kernels per step), per iteration, fp64: 2-D
// Poisson at the given grid sizes (1e3 ... 1e7 rows) and 1138_bus. A fixed iteration count
// (tolerance 0: every solve runs to the cap), one warm-up, then the median of the repeats. The
// generated time is the kernel's (events), setup included (one or two segments, under 1 % of 100
// iterations). Each generated method runs in the form run_program_on_gpu picks and, with
// --forms, in every other form that holds the rows; ratio lines compare the graph path with the
// generated kernel, one-barrier with 3-barrier BiCGStab and pipelined CG with CG.
//
//   bench_program [--grids=32,100,316,1000,3163] [--iterations=N] [--repeats=5] [--matrix=FILE] [--forms]
//                 [--tiles] [--clusters]   (the tile forms only, or the cluster forms and the grids
//                 of rows in registers only, beside the automatic one)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "linalg/diagonal.hpp"
#include "linalg/program/program_cuda.hpp"
#include "molaccel/linalg.hpp"
#include "molaccel/linalg_program.hpp"

using namespace molaccel;
using namespace molaccel::linalg;

namespace {

struct Options {
  std::vector<std::size_t> grids{32, 100, 316, 1000, 3163};
  int iterations = 0;  // 0: 400 up to n = 1e5, 100 above
  int repeats = 5;
  bool forms = false;
  bool tiles = false;     // --tiles: the tile forms only, beside the automatic one
  bool clusters = false;  // --clusters: the cluster forms and the grids of rows in registers only
  std::string matrix = std::string(MOLACCEL_SOURCE_DIR) + "/data/linalg/1138_bus.mtx";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds per iteration of `run` (which returns seconds and iterations), after a warm-up;
// 0 where it did not run.
template <class Run>
double row(const std::string& problem, std::size_t n, const std::string& method, int repeats, Run run) {
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
    std::printf("%-14s %10zu  %-34s  not run: %s\n", problem.c_str(), n, method.c_str(), e.what());
    return 0;
  }
  const double t = median(per_iteration);
  std::printf("%-14s %10zu  %-34s  %10.2f us/iter  %6d iters  %s\n", problem.c_str(), n, method.c_str(),
              t * 1e6, iterations, note.c_str());
  std::fflush(stdout);
  return t;
}

// A form reading the matrix as its constant stencil where it is one.
constexpr program::KernelShape kStencil(bool block, int rows) {
  program::KernelShape s{block, rows, 1};
  s.grid_width = 1;
  return s;
}

// The kernel forms a generated program can take (program_cuda.hpp); each is timed where it holds
// the rows, next to the automatic choice (CG, BiCGStab and pipelined BiCGStab); diagonals = 1:
// the matrix by diagonals where it qualifies, else that form is skipped.
// Rows per thread in one block: the fewest that hold the rows (as run_program_on_gpu picks).
constexpr program::KernelShape shared(program::KernelShape s) {
  s.shared_exchange = true;
  return s;
}
// The tile form, its tiles as run_program_on_gpu picks them (tile_w = 0).
constexpr program::KernelShape tiled(program::KernelShape s) {
  s.tile_h = 1;
  return s;
}
// The cluster form, its blocks as the rows need.
constexpr program::KernelShape clustered(program::KernelShape s) {
  s.cluster_blocks = 1;
  return s;
}
constexpr program::KernelShape kShapes[] = {tiled(kStencil(true, 0)),
                                            clustered({false, 1}),
                                            clustered({false, 2}),
                                            clustered({false, 2, 1}),
                                            clustered(kStencil(false, 1)),
                                            clustered(kStencil(false, 2)),
                                            clustered(kStencil(false, 4)),
                                            tiled(kStencil(false, 1)),
                                            {true, 0},
                                            {true, 0, 1},
                                            kStencil(true, 0),
                                            shared({true, 0}),
                                            shared({true, 0, 1}),
                                            shared(kStencil(true, 0)),
                                            {false, 1},
                                            {false, 1, 1},
                                            kStencil(false, 1),
                                            {false, 2},
                                            kStencil(false, 2),
                                            kStencil(false, 4),
                                            {false, 0},
                                            {false, 0, 1},
                                            kStencil(false, 0)};

std::string shape_name(program::KernelShape s) {
  return fmt::format("{}{}, {}, {}",
                     s.block            ? "block"
                     : s.cluster_blocks ? "cluster"
                                        : "grid",
                     s.tile_h ? " of tiles" : "",
                     s.block             ? std::string(s.shared_exchange ? "registers, shared" : "registers")
                     : s.rows_per_thread ? fmt::format("{} rows/thread", s.rows_per_thread)
                                         : std::string("streamed"),
                     s.grid_width  ? "constant stencil"
                     : s.diagonals ? "diagonals"
                                   : "CSR");
}

void bench_problem(const std::string& problem, const HostCsr<double>& a, const Resources& gpu, int iterations,
                   int repeats, const Options& options) {
  const bool forms = options.forms, tiles = options.tiles, clusters = options.clusters;
  const std::vector<double> b = multiply(a, std::vector<double>(a.rows, 1.0));
  const struct {
    const char* name;
    Program program;
  } generated[] = {{"cg", cg_program()},
                   {"bicgstab", bicgstab_program()},
                   {"pipelined_cg", pipelined_cg_program()},
                   {"pipelined_bicgstab", pipelined_bicgstab_program()},
                   {"one_barrier_bicgstab", one_barrier_bicgstab_program()}};
  std::map<std::string, double> automatic;
  const auto layout = diagonal_storage(a);
  const auto grid = layout ? diagonal_grid_of(*layout, a.rows) : std::nullopt;
  const bool by_diagonals = layout.has_value(),
             stencil = grid && diagonal_constant_of(*layout, *grid, a.rows);
  for (const auto& g : generated) {
    ProgramInputs in;
    in.matrix = &a;
    in.vectors["b"] = b;
    in.scalars["bound"] = 0;  // no convergence: the cap
    in.max_iterations = iterations;
    auto timed = [&](const ProgramResult& r, int& its, std::string& note) {
      its = r.iterations;
      note = fmt::format("{} barriers/iter, {}, {}", r.barriers_per_iteration, r.kernel, r.status);
      return r.seconds;
    };
    automatic[g.name] =
        row(problem, a.rows, std::string("generated ") + g.name, repeats,
            [&](int& its, std::string& note) { return timed(run_program_on_gpu(g.program, in), its, note); });
    if (!(forms || tiles || clusters) || g.name == std::string("pipelined_cg")) continue;
    for (const auto& shape : kShapes) {
      if (tiles && shape.tile_h == 0) continue;
      if (clusters && (shape.block || shape.tile_h > 0 || shape.rows_per_thread == 0)) continue;
      if (shape.block && a.rows > 2048) continue;
      if (shape.cluster_blocks && a.rows > 16 * 512 * std::size_t(shape.rows_per_thread)) continue;
      if ((shape.diagonals && !by_diagonals) || (shape.grid_width && !stencil)) continue;
      row(problem, a.rows, fmt::format("  {} ({})", g.name, shape_name(shape)), repeats,
          [&](int& its, std::string& note) {
            program::KernelShape s = shape;
            if (s.block) s.rows_per_thread = int((a.rows + 511) / 512);
            return timed(program::run_shaped_on_gpu(g.program, in, s), its, note);
          });
    }
  }
  // solve() as a user calls it (Launch::automatic: the generated kernel it picks) and through the
  // generator's kernels of each step replayed as a CUDA graph (Launch::graph, 8 iterations per
  // host check): the same iterations, one kernel per solve against 3-5 per iteration.
  for (const Solver solver : {Solver::cg, Solver::bicgstab})
    for (const Launch launch : {Launch::automatic, Launch::graph}) {
      SolverOptions o;
      o.solver = solver;
      o.tolerance = 0;
      o.max_iterations = iterations;
      o.launch = launch;
      const double t =
          row(problem, a.rows, fmt::format("solve() {} {}", to_string(solver), to_string(launch)), repeats,
              [&](int& its, std::string& note) {
                const auto r = solve(gpu, a, b, o);
                its = r.iterations;
                note = r.backend;
                return r.seconds;
              });
      if (launch == Launch::graph && t > 0 && automatic[std::string(to_string(solver))] > 0)
        std::printf("%-14s %10zu  %-34s  %10.2f x\n", problem.c_str(), a.rows,
                    fmt::format("ratio graph / generated {}", to_string(solver)).c_str(),
                    t / automatic[std::string(to_string(solver))]);
    }
  if (automatic["one_barrier_bicgstab"] > 0 && automatic["bicgstab"] > 0)
    std::printf("%-14s %10zu  %-34s  %10.2f x\n", problem.c_str(), a.rows,
                "ratio one_barrier_bicgstab / bicgstab",
                automatic["one_barrier_bicgstab"] / automatic["bicgstab"]);
  if (automatic["pipelined_cg"] > 0 && automatic["cg"] > 0)
    std::printf("%-14s %10zu  %-34s  %10.2f x\n", problem.c_str(), a.rows,
                "ratio pipelined_cg / cg (generated)", automatic["pipelined_cg"] / automatic["cg"]);
  std::fflush(stdout);
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
    } else if (arg == "--forms") {
      opt.forms = true;
    } else if (arg == "--tiles") {
      opt.tiles = true;
    } else if (arg == "--clusters") {
      opt.clusters = true;
    } else {
      std::fprintf(stderr,
                   "usage: bench_program [--grids=S,...] [--iterations=N] [--repeats=R] [--matrix=FILE.mtx] "
                   "[--forms] [--tiles] [--clusters]\n");
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
  std::printf("%-14s %10s  %-34s  %18s  %12s  %s\n", "problem", "rows", "method", "per iteration",
              "iterations", "note");
  for (std::size_t grid : opt.grids) {
    const std::size_t n = grid * grid;
    const int its = opt.iterations > 0 ? opt.iterations : n <= 100000 ? 400 : 100;
    bench_problem(fmt::format("poisson {}^2", grid), poisson_2d(grid), *gpu, its, opt.repeats, opt);
  }
  if (!opt.matrix.empty())
    bench_problem("1138_bus", read_matrix_market(opt.matrix), *gpu, 400, opt.repeats, opt);
  return 0;
}

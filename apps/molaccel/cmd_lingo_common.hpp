// The lingo commands' shared layer: their input options, reading the molecule files (alone or
// across MPI ranks), starting the devices beside the reading (or keeping a small job on the CPU),
// and the parts of the --json report that every lingo command writes.
#pragma once

#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "command.hpp"
#include "molaccel/lingo.hpp"

namespace molaccel::cli::lingo_cli {

namespace lg = molaccel::lingo;

struct LingoInputOptions {
  int q = 4;
  std::string metric = "tanimoto";
  std::string digits = "paper";
  bool halogens = false;
  std::string smiles_column;
  std::string delimiter = ",";
  bool skip_invalid = false;
  std::string backend = "auto";

  lg::LingoOptions lingo() const {
    lg::LingoOptions o;
    o.q = q;
    o.preprocessing.digits = digits == "all" ? lg::DigitMode::all : lg::DigitMode::paper;
    o.preprocessing.halogens = halogens;
    return o;
  }
  lg::ComputeOptions compute() const {
    lg::ComputeOptions o;
    o.metric = lg::parse_metric(metric);
    o.backend = parse_compute_backend(backend);
    return o;
  }
};

// --q, --metric, --digits, --halogens, the CSV options, --skip-invalid, --backend, the device
// options and the conventions in the footer of --help.
void add_lingo_options(CLI::App& app, LingoInputOptions& o, CommonOptions& common);

// A molecule file; under MPI each rank parses a slice and all receive the whole set (a collective:
// call it outside on_every_rank).
lg::MoleculeSet load(RunContext& ctx, const std::string& path, const LingoInputOptions& o, const char* role);
// Under MPI: only this rank's slice of the file (a collective).
lg::MoleculeSlice load_slice(RunContext& ctx, const std::string& path, const LingoInputOptions& o,
                             const char* role);

// The run's devices looked up (`make`: on a GPU machine the CUDA driver starts) and their GPU
// contexts created (100s of ms each) on a thread of its own, so that this overlaps reading and
// encoding the inputs; resources() waits for the lookup (and rethrows its error), the job's first
// look at a GPU waits for its context.
class DeviceStartup {
 public:
  DeviceStartup(std::function<Resources()> make, const LingoInputOptions& o);
  ~DeviceStartup() {
    if (thread_.joinable()) thread_.join();
  }
  DeviceStartup(const DeviceStartup&) = delete;
  DeviceStartup& operator=(const DeviceStartup&) = delete;
  Resources resources() { return result_.get(); }

 private:
  std::promise<Resources> found_;
  std::future<Resources> result_ = found_.get_future();
  std::thread thread_;  // declared last: starts once the promise exists
};

// Under MPI: `step` on every rank, a failure anywhere stopping all of them with one message
// (run_step); alone: just `step`.
void on_every_rank(RunContext& ctx, const std::function<void()>& step);
// The output: written by rank 0 only, the other ranks learning whether that worked.
void on_root(RunContext& ctx, const std::function<void()>& write);

// For --device auto, before the inputs are read: a CPU run's seconds for `pairs` similarities;
// infinite with --backend other than auto (the backend asked for decides).
double cpu_seconds_for_pairs(const RunContext& ctx, const LingoInputOptions& o, double pairs);
// The molecules of a SMILES file, estimated from its text's size.
double molecules_estimate(const std::string& path);
// Starts the devices of a run: alone, looked up on DeviceStartup's thread while the caller reads
// (only the CPU's where ctx.small_job, on this thread, finds `cpu_seconds`, the job's estimate
// there, small); under MPI, looked up on every rank first (a collective), then their contexts on
// the thread.
std::unique_ptr<DeviceStartup> start_devices(RunContext& ctx, const LingoInputOptions& o, double cpu_seconds);

// The run's backend, pairs, seconds and tiles into the report.
void report_run(nlohmann::json& report, const lg::RunInfo& info);
// Seconds `step` takes.
double timed(const std::function<void()>& step);
// The --json report's "stages": reading and parsing the inputs, encoding them for the kernels, the
// tiles, and writing the output (0 where the output streams out during the tiles: matrix).
void report_stages(nlohmann::json& report, double read_seconds, const lg::RunInfo& info,
                   double write_seconds);
// Refuses --threshold 0 on an input whose pairs cannot be held.
void require_all_pairs_memory(std::size_t molecules, float threshold, const char* command);

}  // namespace molaccel::cli::lingo_cli

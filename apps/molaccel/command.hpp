// The CLI is a table over the library: each subcommand registers a name, a one-line purpose, an
// example, and a function that declares its typed options on a CLI11 sub-app and returns the
// action to run. Files apps/molaccel/cmd_*.cpp register themselves at start-up:
//
//   static const bool registered = molaccel::cli::register_command({
//       .group = "lingo", .name = "search", .purpose = "...", .example = "molaccel lingo search q.smi db.smi
//       -k 10", .setup = [](CLI::App& app, molaccel::cli::CommonOptions& common) -> molaccel::cli::Action {
//         auto opts = std::make_shared<MyOptions>();
//         app.add_option("QUERIES", opts->queries)->required()->check(CLI::ExistingFile);
//         common.add_device_options(app);   // --device, --threads
//         return [opts](molaccel::cli::RunContext& ctx) { ...; return 0; };
//       }});
//
// group "" makes a top-level command (`molaccel info`); otherwise `molaccel <group> <name>`.
// A demo step registers with register_demo(); `molaccel demo` runs every step in order.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "molaccel/distributed.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::cli {

// Options every compute subcommand shares; filled by CLI11 before the action runs.
struct CommonOptions {
  std::string device = "auto";
  int threads = 0;
  bool quiet = false;
  int verbosity = 0;
  std::string json_path;               // --json FILE ('-' = stdout)
  bool no_mpi = false;                 // --no-mpi: under mpirun, every process runs alone
  int local_rank = 0, local_size = 1;  // this MPI rank among the ranks of its host (GPU and core share)

  // Adds --device and --threads to a subcommand.
  void add_device_options(CLI::App& app);
  // Resolves --device/--threads into Resources (errors for unavailable devices). Under MPI, `auto`
  // and `gpu` give this rank its share of the host's GPUs and cores (options_for_rank).
  Resources make_resources() const;
  // The CPU threads a CPU run of this command gets (--threads, else the usable cores).
  int cpu_threads() const;
};

// Starting the CUDA driver and a GPU context takes about 0.2 s and tearing them down at exit about
// 0.1 s, whatever the job (measured on an H200 host with persistence mode on: docs/PERFORMANCE.md).
// `--device auto` runs a job that the CPU would finish in less on the CPU, without touching the
// driver: every engine's backends give the same results (to the engine's stated tolerance).
constexpr double kGpuStartAndExitSeconds = 0.3;

// What an action gets when it runs.
struct RunContext {
  CommonOptions& common;
  nlohmann::json& report;        // filled by the action; written when --json is given
  Communicator* comm = nullptr;  // the MPI ranks of this run (size 1 without mpirun or with --no-mpi)
  // Launched as several MPI ranks: a command that supports it splits its work (Command::distributed).
  bool distributed() const { return comm && comm->size() > 1; }
  Resources resources() const { return common.make_resources(); }
  // Whether a job whose CPU run is estimated at `cpu_seconds` runs on the CPU alone: with `--device
  // auto` in one process, under kGpuStartAndExitSeconds. Puts the estimate and the choice into the
  // report (call it on the command's thread).
  bool small_job(double cpu_seconds) const;
  // --threads on the CPU alone.
  Resources cpu_resources() const;
  // small_job(cpu_seconds) ? cpu_resources() : resources().
  Resources resources_for(double cpu_seconds) const;
  // Where a command's human-readable summary goes: nowhere with -q, standard error when the
  // result itself goes to standard output (`output` is "-" or /dev/stdout), else standard output.
  std::FILE* summary(const std::string& output = {}) const {
    if (common.quiet) return nullptr;
    return output == "-" || output == "/dev/stdout" ? stderr : stdout;
  }
};

using Action = std::function<int(RunContext&)>;

struct Command {
  std::string group;  // "" for top-level, else "lingo", "align", "orbital", "linalg"
  std::string name;
  std::string purpose;  // one line
  std::string example;  // one command line
  std::function<Action(CLI::App&, CommonOptions&)> setup;
  int order = 100;           // position within its group in --help
  bool distributed = false;  // runs across MPI ranks (RunContext::comm); others refuse several ranks
};

bool register_command(Command command);
const std::vector<Command>& commands();

struct DemoContext {
  Resources resources;
  std::filesystem::path data_dir;    // the bundled data/ folder
  std::filesystem::path output_dir;  // where the demo writes its files
  nlohmann::json& report;
};
struct DemoStep {
  std::string name;  // engine name
  int order = 100;
  std::function<void(DemoContext&)> run;  // prints a short report to stdout
};
bool register_demo(DemoStep step);
const std::vector<DemoStep>& demo_steps();

// Finds the bundled data/ folder: $MOLACCEL_DATA_DIR, the source tree, or the install prefix.
std::filesystem::path find_data_dir();

}  // namespace molaccel::cli

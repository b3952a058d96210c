// molaccel: the command-line tool. Subcommands come from the table in command.hpp; this file
// builds the CLI11 tree from it, handles the global options and turns errors into exit codes.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"

namespace {

const std::map<std::string, std::string>& group_purposes() {
  static const std::map<std::string, std::string> purposes = {
      {"lingo", "LINGO similarity of SMILES strings: matrices, top-k search, neighbours, clustering"},
      {"align", "Smith-Waterman protein database search with affine gaps"},
      {"orbital", "Orbital and density grids (Molden, fchk -> cube), isosurface meshes and images"},
      {"linalg", "Fused-kernel linear algebra"},
  };
  return purposes;
}

// With `--json -` the report owns standard output: everything else a command prints goes to
// stderr, so that `molaccel ... --json - | jq` always reads valid JSON.
int json_stdout_fd = -1;

void reserve_stdout_for_json() {
  std::fflush(stdout);
  json_stdout_fd = ::dup(STDOUT_FILENO);
  if (json_stdout_fd >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
}

int write_report(const molaccel::cli::CommonOptions& common, const nlohmann::json& report) {
  if (common.json_path.empty()) return 0;
  const std::string text = report.dump(2) + "\n";
  if (common.json_path == "-") {
    std::fflush(stdout);
    if (json_stdout_fd < 0) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(json_stdout_fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    return 0;
  }
  molaccel::write_file_atomically(common.json_path,
                                  [&](std::FILE* f) { std::fwrite(text.data(), 1, text.size(), f); });
  return 0;
}

// Exit codes (README): 0 success, 1 bad input, 2 usage, 3 device or feature not available, 4 the
// run failed (out of space or another system failure while writing, GPU and internal errors),
// 5 a solve that did not converge, 128 + signal when interrupted. A failure of the system while
// writing an output is 4 in every command, whichever layer reports it: the runtime reports it as
// an error about the output file (an InputError), an engine as an Error; both carry the reason.
bool is_system_write_failure(std::string_view what) {
  for (const int err : {ENOSPC, EDQUOT, EFBIG, EIO})
    if (what.find(std::strerror(err)) != std::string_view::npos) return true;
  return false;
}

// The exit code and message of the exception being handled.
int handle_current_error(std::string* message = nullptr) {
  const auto say = [&](const char* what) {
    std::fprintf(stderr, "molaccel: error: %s\n", what);
    if (message) *message = what;
  };
  try {
    throw;
  } catch (const molaccel::InputError& e) {
    say(e.what());
    return is_system_write_failure(e.what()) ? 4 : 1;
  } catch (const molaccel::NotCompiled& e) {
    say(e.what());
    return 3;
  } catch (const molaccel::DeviceUnavailable& e) {
    say(e.what());
    return 3;
  } catch (const molaccel::Error& e) {
    say(e.what());
    if (molaccel::log_level() >= molaccel::LogLevel::debug)
      std::fprintf(stderr, "  (raised at %s:%d)\n", e.source_file(), e.source_line());
    return 4;
  } catch (const std::exception& e) {
    say(e.what());
    return 4;
  }
}

// --json after a failure: the report says so (exit code and message), so an old report is never
// taken for this run's. A report that cannot be written adds nothing to the failure.
void write_failure_report(const molaccel::cli::CommonOptions& common, nlohmann::json report, int exit_code,
                          const std::string& message) {
  report["status"] = "error";
  report["exit_code"] = exit_code;
  report["error"] = message;
  try {
    write_report(common, report);
  } catch (const std::exception&) {
  }
}

// An output (-o/--output, --json) whose directory does not exist or cannot be written: found
// before the run, not after it. Returns the message, empty when every output can be created.
// The values given to the command's options (its own and its groups'), as outputs (-o/--output,
// --json) and inputs (everything else: positional files, --grid-like, ...).
struct OptionValues {
  std::vector<std::string> outputs, inputs;
};
OptionValues option_values(const CLI::App* leaf) {
  OptionValues values;
  for (const CLI::App* app = leaf; app != nullptr; app = app->get_parent())
    for (const CLI::Option* option : app->get_options()) {
      bool output = false;
      for (const std::string& name : option->get_lnames())
        output = output || name == "output" || name == "json";
      for (const std::string& value : option->results())
        (output ? values.outputs : values.inputs).push_back(value);
    }
  return values;
}

std::string unwritable_output(const CLI::App* leaf) {
  for (const std::string& value : option_values(leaf).outputs) {
    if (value.empty() || value == "-" || value.rfind("/dev/", 0) == 0) continue;
    std::filesystem::path path(value);
    if (!path.has_filename()) path = path.parent_path();  // a folder to be made ("frames/")
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      return value + ": cannot write here: the directory " + dir.string() + " does not exist";
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      return value + ": cannot write here: the directory " + dir.string() + " is not writable (" +
             std::strerror(errno) + ")";
  }
  return {};
}

// An output (-o/--output, --json) that names an existing file which is also an input of the
// command: writing it would replace the input before (or while) it is read. Returns the message,
// empty when there is no such clash.
std::string output_over_input(const CLI::App* leaf) {
  const auto [outputs, inputs] = option_values(leaf);
  std::error_code ec;
  for (const std::string& out : outputs) {
    if (out.empty() || out == "-" || !std::filesystem::is_regular_file(out, ec)) continue;
    for (const std::string& in : inputs)
      if (std::filesystem::is_regular_file(in, ec) && std::filesystem::equivalent(out, in, ec))
        return "the output " + out + " is also an input (" + in +
               "): writing it would replace the input; choose another output name";
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace molaccel::cli;
  // Ctrl-C, kill or a closed terminal during a long write: no hidden temporary file is left.
  molaccel::remove_temporaries_on_signals();
  // On every return: a kernel still compiling in the background (orbital's JIT kernel, bound for
  // the disk cache) finishes before exit() destroys the compiler's statics under it.
  struct FinishBackgroundWork {
    ~FinishBackgroundWork() { molaccel::finish_background_work(); }
  } finish_background_work;
  CLI::App app{
      "molaccel: GPU toolkit for molecular computing (LINGO similarity, Smith-Waterman search, "
      "molecular orbitals, fused linear algebra)",
      "molaccel"};
  app.require_subcommand(1);
  app.set_version_flag("--version", molaccel::build_info().version);
  app.footer(
      "Run `molaccel <command> --help` for the options of a command. Start with `molaccel info` and "
      "`molaccel demo`.");

  CommonOptions common;
  app.add_flag("-q,--quiet", common.quiet, "No progress bars or informational messages");
  app.add_flag("-v,--verbose", common.verbosity, "More log output (-v info, -vv debug)");
  app.add_option("--json", common.json_path,
                 "Also write a machine-readable report (JSON) to FILE ('-' = stdout)");
  app.add_flag("--no-mpi", common.no_mpi,
               "Under mpirun, run every process on its own instead of splitting the work across ranks");

  std::map<std::string, CLI::App*> groups;
  Action chosen;
  CLI::App* chosen_app = nullptr;
  std::vector<std::pair<CLI::App*, Action>> actions;
  actions.reserve(commands().size());
  for (const auto& cmd : commands()) {
    CLI::App* parent = &app;
    if (!cmd.group.empty()) {
      auto it = groups.find(cmd.group);
      if (it == groups.end()) {
        auto purpose =
            group_purposes().count(cmd.group) ? group_purposes().at(cmd.group) : cmd.group + " commands";
        CLI::App* g = app.add_subcommand(cmd.group, purpose);
        g->require_subcommand(1);
        g->fallthrough();
        it = groups.emplace(cmd.group, g).first;
      }
      parent = it->second;
    }
    CLI::App* sub = parent->add_subcommand(cmd.name, cmd.purpose);
    sub->fallthrough();
    sub->footer("Example:\n  " + cmd.example);
    actions.emplace_back(sub, cmd.setup(*sub, common));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // Usage errors carry the same prefix as every other error; an input file that does not exist
    // (CLI::ExistingFile and friends) is bad input, exit 1, like an input that cannot be read.
    const std::string what = e.what();
    std::fprintf(stderr, "molaccel: error: %s\n", what.c_str());
    if (what.find("does not exist") != std::string::npos) return 1;
    std::fprintf(stderr, "Run with --help for more information.\n");
    return 2;
  }

  // Under mpirun, the ranks of this run (one process otherwise, or with --no-mpi).
  std::unique_ptr<molaccel::Communicator> comm;
  try {
    comm = molaccel::connect(!common.no_mpi);
  } catch (const molaccel::Error& e) {
    // Every process of the launch fails the same way: the first of each host says why.
    if (molaccel::detect_launcher().local_rank == 0) std::fprintf(stderr, "molaccel: error: %s\n", e.what());
    return 3;
  }
  const bool root = comm->is_root();
  common.local_rank = comm->local_rank();
  common.local_size = comm->local_size();
  if (!root) common.quiet = true;  // one summary, one progress bar: rank 0's

  molaccel::set_log_level(common.verbosity >= 2   ? molaccel::LogLevel::debug
                          : common.verbosity == 1 ? molaccel::LogLevel::info
                          : common.quiet          ? molaccel::LogLevel::error
                                                  : molaccel::LogLevel::warn);
  molaccel::set_progress_enabled(!common.quiet);

  bool chosen_distributed = false;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].first->parsed()) {
      chosen = actions[i].second;
      chosen_app = actions[i].first;
      chosen_distributed = commands()[i].distributed;
    }
  }
  if (!chosen) {
    std::cerr << app.help();
    return 2;
  }
  if (comm->size() > 1 && !chosen_distributed) {
    if (root)
      std::fprintf(
          stderr,
          "molaccel: error: '%s' does not split its work across MPI ranks (started as %d ranks); run "
          "it as one process, or pass --no-mpi to let every process run it alone\n",
          chosen_app->get_name().c_str(), comm->size());
    return 2;
  }
  nlohmann::json report;
  report["command"] = chosen_app->get_name();
  report["version"] = molaccel::build_info().version;
  if (const std::string clash = output_over_input(chosen_app); !clash.empty()) {
    if (root) std::fprintf(stderr, "molaccel: error: %s\n", clash.c_str());
    return 2;
  }
  if (const std::string why = unwritable_output(chosen_app); !why.empty()) {
    if (root) std::fprintf(stderr, "molaccel: error: %s\n", why.c_str());
    return 1;
  }
  if (comm->size() > 1) report["mpi_ranks"] = comm->size();
  RunContext ctx{common, report};
  ctx.comm = comm.get();
  if (!root) common.json_path.clear();  // rank 0 writes the report
  if (common.json_path == "-") reserve_stdout_for_json();
  try {
    const int rc = chosen(ctx);
    write_report(common, report);
    return rc;
  } catch (const molaccel::RankFailure& e) {
    // Every rank threw the same failure from the same step: one message, every rank non-zero.
    if (root) std::fprintf(stderr, "molaccel: error: %s\n", e.what());
    using Cause = molaccel::RankFailure::Cause;
    const int rc = e.cause() == Cause::input && !is_system_write_failure(e.what()) ? 1
                   : e.cause() == Cause::unavailable                               ? 3
                                                                                   : 4;
    write_failure_report(common, report, rc, e.what());
    return rc;
  } catch (const std::exception& e) {
    // A failure on this rank alone, outside a step the ranks agree on: the others may be waiting
    // in a collective, so stop them all.
    if (comm->size() > 1) comm->abort_all(4, e.what());
    std::string message;
    const int rc = handle_current_error(&message);
    write_failure_report(common, report, rc, message);
    return rc;
  }
}

// molaccel: the command-line tool. Subcommands come from the table in command.hpp; this file
// builds the CLI11 tree from it, handles the global options and turns errors into exit codes.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

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

}  // namespace

int main(int argc, char** argv) {
  using namespace molaccel::cli;
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
    const int rc = app.exit(e);  // prints help, version or the usage error
    return rc == 0 ? 0 : 2;
  }

  molaccel::set_log_level(common.verbosity >= 2   ? molaccel::LogLevel::debug
                          : common.verbosity == 1 ? molaccel::LogLevel::info
                          : common.quiet          ? molaccel::LogLevel::error
                                                  : molaccel::LogLevel::warn);
  molaccel::set_progress_enabled(!common.quiet);

  for (auto& [sub, action] : actions) {
    if (sub->parsed()) {
      chosen = action;
      chosen_app = sub;
    }
  }
  if (!chosen) {
    std::cerr << app.help();
    return 2;
  }
  nlohmann::json report;
  report["command"] = chosen_app->get_name();
  report["version"] = molaccel::build_info().version;
  RunContext ctx{common, report};
  if (common.json_path == "-") reserve_stdout_for_json();
  try {
    const int rc = chosen(ctx);
    write_report(common, report);
    return rc;
  } catch (const molaccel::InputError& e) {
    std::fprintf(stderr, "molaccel: error: %s\n", e.what());
    return 1;
  } catch (const molaccel::NotCompiled& e) {
    std::fprintf(stderr, "molaccel: error: %s\n", e.what());
    return 3;
  } catch (const molaccel::DeviceUnavailable& e) {
    std::fprintf(stderr, "molaccel: error: %s\n", e.what());
    return 3;
  } catch (const molaccel::Error& e) {
    std::fprintf(stderr, "molaccel: error: %s\n", e.what());
    if (molaccel::log_level() >= molaccel::LogLevel::debug)
      std::fprintf(stderr, "  (raised at %s:%d)\n", e.source_file(), e.source_line());
    return 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "molaccel: error: %s\n", e.what());
    return 4;
  }
}

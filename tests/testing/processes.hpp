// Commands run as processes by the CLI tests: a path quoted for the shell, a shell command's exit
// code (its output discarded), and the CLI under a file-size limit (a full disk without one).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace molaccel::testing {

inline std::string quoted(const std::filesystem::path& p) {
  return "'" + p.string() + "'";
}

// The exit code of `command` run by the shell with its output discarded; -1 if it did not exit.
inline int exit_code(const std::string& command) {
  const int status = std::system((command + " > /dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `cli -q arguments` with files limited to `kib` KiB (0: no limit). SIGXFSZ is ignored, so a
// write past the limit fails with EFBIG as on a full disk.
inline int exit_code_with_file_limit(const std::string& cli, const std::string& arguments, int kib) {
  const std::string limit = kib > 0 ? "trap '' XFSZ; ulimit -f " + std::to_string(kib) + "; " : "";
  return exit_code("bash -c \"" + limit + "exec " + cli + " -q " + arguments + "\"");
}

}  // namespace molaccel::testing

// An interrupted write leaves no temporary file: a child process writes an output, gets SIGINT,
// SIGTERM or SIGHUP while the temporary file is open, and must exit 128 + the signal with nothing
// left in its directory (neither the temporary nor the output). Its own binary: fork() in a
// process without other threads.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "molaccel/runtime.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

namespace fs = std::filesystem;

std::size_t entries_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// The child's exit status after writing `files` outputs normally and then one that `signal`
// interrupts; -1 when it did not exit normally.
int interrupted_write(const fs::path& dir, int signal, int files) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    remove_temporaries_on_signals();
    for (int i = 0; i < files; ++i)  // registrations are freed again: more files than slots
      write_file_atomically(dir / ("done" + std::to_string(i)), [](std::FILE* f) { std::fputs("ok", f); });
    for (int i = 0; i < files; ++i) fs::remove(dir / ("done" + std::to_string(i)));
    write_file_atomically(dir / "out.npy", [&](std::FILE* f) {
      std::fputs("partial", f);
      std::fflush(f);
      ::raise(signal);
    });
    ::_exit(0);  // not reached
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(SignalCleanup, InterruptedWritesLeaveNoTemporaryAndExitWith128PlusTheSignal) {
  for (const auto& [signal, code] :
       {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}, std::pair{SIGHUP, 129}}) {
    const testing::TempDir dir;
    EXPECT_EQ(interrupted_write(dir.path(), signal, signal == SIGTERM ? 300 : 0), code)
        << "signal " << signal;
    EXPECT_EQ(entries_in(dir.path()), 0u) << "signal " << signal << ": a file was left";
  }
}

}  // namespace
}  // namespace molaccel

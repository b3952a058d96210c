// File creation rules for output files, the JIT cache and kernel dumps (internal; exposed for tests).
//
// Nothing molaccel writes follows a symbolic link that someone else could have planted: new files
// are created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW) with owner-only permissions under a
// random name in the target's directory, given their final permissions and renamed into place
// (rename replaces a link at the target name; it never writes through it). Outputs the user
// names explicitly are the exception: a link the user gave is resolved and the file it points to is
// replaced; devices, pipes, "-" and /dev/stdout are written through.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace molaccel::detail {

// How write_file_atomically writes a path.
struct OutputTarget {
  enum class Kind {
    standard_output,  // "-" or /dev/stdout (the process's stdout stream)
    standard_error,   // /dev/stderr
    write_through,    // a character or block device, a FIFO, a socket or /dev/fd/N: opened and written
    replace,          // a regular file (or none yet): temporary file + rename
  };
  Kind kind = Kind::replace;
  std::filesystem::path path;     // the target after resolving symbolic links
  std::optional<struct stat> st;  // the existing regular file's status (replace only)
};
// Resolves `path` (following symbolic links one by one, also dangling ones); throws InputError for a
// directory or a loop of links.
OutputTarget resolve_output_target(const std::filesystem::path& path);

// The process's umask, read without changing it (/proc/self/status; umask(2) as the fallback).
mode_t current_umask();

// Opens a new file exclusively (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, `mode`);
// returns the descriptor or -1 with errno set (EEXIST also when a link or anything is there).
int create_exclusively(const std::filesystem::path& path, mode_t mode = 0600);

// Creates a temporary file exclusively, owner-only (0600), in `dir` under the names `next_name`
// proposes, trying the next one while a name is taken (up to 100 names). Throws InputError naming
// `display` when none could be created.
struct TemporaryFile {
  int fd = -1;
  std::filesystem::path path;
};
TemporaryFile create_temporary_file(const std::filesystem::path& dir,
                                    const std::function<std::string()>& next_name,
                                    const std::string& display);
// While it lives, `path` is removed if the process gets SIGINT, SIGTERM or SIGHUP and
// remove_temporaries_on_signals() installed the handlers (signal_cleanup.cpp).
class CleanupOnSignal {
 public:
  explicit CleanupOnSignal(const std::filesystem::path& path);
  ~CleanupOnSignal();
  CleanupOnSignal(const CleanupOnSignal&) = delete;
  CleanupOnSignal& operator=(const CleanupOnSignal&) = delete;

 private:
  int slot_ = -1;
};

// ".NAME.tmp.PID.RANDOM" for a target named NAME (shortened to fit a file name).
std::string temporary_name_for(const std::filesystem::path& target);

// Writes through `write` into a fresh temporary file beside `target`, gives it `mode` (and, where
// permitted, the owner `owner`), then renames it over `target` (a link at `target` is replaced, not
// followed). Nothing is left behind on failure. Errors are InputErrors naming `display`.
struct FileOwner {
  uid_t uid;
  gid_t gid;
};
void replace_file(const std::filesystem::path& target, mode_t mode, std::optional<FileOwner> owner,
                  const std::function<void(std::FILE*)>& write, const std::string& display);
// replace_file in two steps: stage_file does all but the rename (the temporary file is removed on
// SIGINT, SIGTERM and SIGHUP while `cleanup` lives), commit_staged renames it over the target.
struct StagedFile {
  std::filesystem::path temporary, target;
  std::string display;
  std::unique_ptr<CleanupOnSignal> cleanup;
};
StagedFile stage_file(const std::filesystem::path& target, mode_t mode, std::optional<FileOwner> owner,
                      const std::function<void(std::FILE*)>& write, const std::string& display);
void commit_staged(StagedFile& staged);

// Whether `dir` (following a link) is a directory owned by this user and writable by nobody else;
// `why` says what is wrong when not.
bool directory_is_private(const std::filesystem::path& dir, std::string& why);

// Whether the open file `fd` is a regular file owned by this user and writable by nobody else.
bool file_is_private(int fd, std::string& why);

}  // namespace molaccel::detail

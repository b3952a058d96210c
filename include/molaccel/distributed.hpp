// Many processes on many nodes: the communicator that engines use to split work across MPI ranks
// and merge the results. No MPI type appears here: a build without MPI has the one-process
// communicator only, and engines compile the same either way. The runtime knows no engine: this is
// ranks, bytes and records, nothing more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel {

// A rank failed: every rank throws this from the same collective step, with the same message
// ("rank R: cause"), so each can clean up and exit non-zero without waiting on the others.
class RankFailure : public Error {
 public:
  // What kind of error the failed rank raised (the CLI's exit code follows it).
  enum class Cause : char { input = 'I', unavailable = 'U', other = 'O' };
  RankFailure(int failed_rank, Cause cause, const std::string& message, const char* file = "", int line = 0)
      : Error(message, file, line), failed_rank_(failed_rank), cause_(cause) {}
  int failed_rank() const noexcept { return failed_rank_; }
  Cause cause() const noexcept { return cause_; }

 private:
  int failed_rank_;
  Cause cause_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the ranks of this host
  virtual int local_size() const = 0;
  virtual std::string_view kind() const = 0;  // "mpi" or "single"

  // Every rank's bytes, concatenated in rank order, on every rank; `counts` (optional) gets the
  // byte count of each rank.
  virtual std::vector<std::byte> allgather(std::span<const std::byte> mine,
                                           std::vector<std::size_t>* counts = nullptr) = 0;
  // The same, on `root` only (other ranks get an empty vector).
  virtual std::vector<std::byte> gather(std::span<const std::byte> mine, int root,
                                        std::vector<std::size_t>* counts = nullptr) = 0;
  // All to all: `send` holds this rank's bytes for rank 0, 1, ... back to back (`send_counts[d]`
  // bytes for rank d); returns the bytes every rank sent this one, concatenated in rank order, and
  // their counts in `counts` (optional). MPI: MPI_Alltoallv (each rank's total below 2 GiB);
  // the default, for other communicators, is one gather per rank.
  virtual std::vector<std::byte> alltoall(std::span<const std::byte> send,
                                          const std::vector<std::size_t>& send_counts,
                                          std::vector<std::size_t>* counts = nullptr);
  // `data` of `root` on every rank.
  virtual void broadcast(std::vector<std::byte>& data, int root) = 0;
  // Point to point: `bytes` to rank `to`; the next message from rank `from` (in send order).
  virtual void send(std::span<const std::byte> bytes, int to) = 0;
  virtual std::vector<std::byte> receive(int from) = 0;
  virtual void barrier() = 0;
  // Last resort when ranks can no longer agree (a rank is stuck or gone): prints `message` on
  // standard error and ends every rank with `code`.
  [[noreturn]] virtual void abort_all(int code, std::string_view message) = 0;

  bool is_root() const { return rank() == 0; }
};

// One process: rank 0 of 1.
std::unique_ptr<Communicator> make_single_process_communicator();

// The launcher that started this process, read from its environment: Open MPI's mpirun
// (OMPI_COMM_WORLD_*), PMIx (PMIX_RANK) or PMI (PMI_SIZE, Slurm's srun, MPICH's hydra).
struct LaunchInfo {
  bool under_launcher = false;
  int size = 1;        // processes in the job, where the launcher says (else 1)
  int local_rank = 0;  // Open MPI only (else 0)
  std::string launcher;
};
LaunchInfo detect_launcher();

// Whether this build has MPI (MOLACCEL_MPI at configure time).
bool mpi_compiled();

// Under a launcher, an MPI build initialises MPI once and returns the world communicator; anything
// else returns the one-process communicator. Throws NotCompiled when a launcher started several
// processes and this build has no MPI (each process would repeat the whole job). MPI is finalised
// at process exit.
std::unique_ptr<Communicator> connect(bool allow_mpi = true);

// ---- records ----------------------------------------------------------------------------------
// Fixed-size, trivially copyable records of every rank: result[r] holds rank r's records (every
// rank for allgather, root only for gather).
namespace detail {
// The ranks' byte runs (`counts[r]` bytes each, back to back) as records of T.
template <class T>
std::vector<std::vector<T>> split_records(const std::vector<std::byte>& bytes,
                                          const std::vector<std::size_t>& counts) {
  std::vector<std::vector<T>> out(counts.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    out[r].resize(counts[r] / sizeof(T));
    if (counts[r]) std::memcpy(out[r].data(), bytes.data() + at, counts[r]);
    at += counts[r];
  }
  return out;
}
}  // namespace detail
template <class T>
std::vector<std::vector<T>> allgather_records(Communicator& comm, std::span<const T> mine) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<std::size_t> counts;
  const auto bytes = comm.allgather(std::as_bytes(mine), &counts);
  return detail::split_records<T>(bytes, counts);
}
template <class T>
std::vector<std::vector<T>> gather_records(Communicator& comm, std::span<const T> mine, int root) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<std::size_t> counts;
  const auto bytes = comm.gather(std::as_bytes(mine), root, &counts);
  return detail::split_records<T>(bytes, counts);
}
// Strings of every rank on `root` (result[r] = rank r's strings; empty elsewhere).
std::vector<std::vector<std::string>> gather_strings(Communicator& comm, const std::vector<std::string>& mine,
                                                     int root);

// Every rank's bytes combined up a binary tree: in round s = 1, 2, 4, ... rank r (a multiple of
// 2s) receives the result of ranks [r+s, r+2s) and keeps combine(its own, received), so rank 0
// returns the combination of all ranks in rank order (the others an empty vector). Each rank sends
// at most once; log2(N) rounds; rank 0's memory stays that of one combined result (unlike a
// gather, which holds every rank's part at once).
using Combine =
    std::function<std::vector<std::byte>(std::vector<std::byte> lower, std::vector<std::byte> upper)>;
std::vector<std::byte> reduce_to_root(Communicator& comm, std::vector<std::byte> mine,
                                      const Combine& combine);

// `path` written atomically (write_file_atomically) by rank 0: `header`, then every rank's `mine`
// in rank order. Rank 0 writes the header into its temporary file and gives the file its final
// size; every rank that can open that same file (same host, or a filesystem shared with rank 0's:
// the path, inode and size agree) writes its own part at its offset, all at once, rank 0 too; the
// parts of the ranks that cannot (or all, where the output is not a regular file: standard output,
// a pipe) travel to rank 0 one rank and one piece (at most 256 MiB) at a time, so rank 0 holds its
// own part and one piece. Only then is the file renamed into place. If any part cannot be written,
// every rank throws RankFailure after the exchange and no file is left. Returns the bytes rank 0
// received (0 on the other ranks, and where every rank wrote its own part). A collective: every
// rank calls it. A rank's part may come in pieces (written one after the other, never joined).
std::uint64_t write_in_rank_order(Communicator& comm, const std::filesystem::path& path,
                                  std::string_view header, std::span<const std::byte> mine);
std::uint64_t write_in_rank_order(Communicator& comm, const std::filesystem::path& path,
                                  std::string_view header, std::span<const std::span<const std::byte>> mine);

// ---- agreeing on failure ------------------------------------------------------------------------
// Runs `step` on this rank, then every rank learns whether any rank's step threw. If one did, every
// rank throws RankFailure naming the lowest failed rank and its error; otherwise all go on. Every
// rank must call it the same number of times (it is a collective), which is what keeps a failure
// on one rank from leaving the others waiting in a later collective.
void run_step(Communicator& comm, const std::function<void()>& step);

// The GPUs and CPU threads one rank of `local_size` on a host should use: GPUs dealt round-robin by
// local rank (a rank gets at least one; ranks share GPUs when there are more ranks than GPUs), and
// an equal share of the host's cores. An explicit `gpu:LIST` or `cpu` is left as the user wrote it.
Resources::Options options_for_rank(Resources::Options options, int local_rank, int local_size);

}  // namespace molaccel

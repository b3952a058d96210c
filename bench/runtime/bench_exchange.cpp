// What the transport between MPI ranks gives molaccel's merges: the Communicator calls that the
// engines use across ranks, timed at message sizes up to 256 MiB, next to a memcpy of the same
// bytes in one process (for ranks on one host a message costs at least that one copy). Run it
// under the launcher of the real runs, with their options:
//   mpirun -np 2 bench_exchange [--max-mib 256]
// Rows, printed by rank 0 (each a median over repeats, every rank between two barriers):
//   ring shift    every rank sends one message to rank r - 1 (lingo's ring steps and its hits on
//                 their way to their home rank; align's merge records): bytes per rank / time
//   to rank 0     every other rank's message received by rank 0 one rank at a time (the output
//                 written in rank order): bytes rank 0 receives / time
//   allgather     every rank's message on every rank: bytes a rank receives / time
// Without a launcher (one process) only the memcpy rows run.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "molaccel/distributed.hpp"
#include "molaccel/runtime.hpp"

int main(int argc, char** argv) {
  using namespace molaccel;
  using namespace molaccel::bench;
  std::size_t max_mib = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--max-mib" && i + 1 < argc) {
      max_mib = std::stoul(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_exchange [--max-mib N] (under mpirun for the exchange rows)\n");
      return 2;
    }
  }
  const auto comm = connect();
  const int ranks = comm->size(), rank = comm->rank();
  const bool root = comm->is_root();
  const std::string where = ranks == 1 ? cpu_info().model
                                       : fmt::format("{} ranks ({} on rank 0's host), {}", ranks,
                                                     comm->local_size(), cpu_info().model);
  if (root) print_header();
  // Seconds of `op` on the slowest rank: barriers on both sides, rank 0's clock.
  auto timed = [&](const std::function<void()>& op) {
    return [&comm, op] {
      comm->barrier();
      const double t0 = now_seconds();
      op();
      comm->barrier();
      return now_seconds() - t0;
    };
  };
  for (std::size_t mib = 1; mib <= max_mib; mib *= 16) {
    const std::size_t n = mib << 20;
    std::vector<std::byte> bytes(n, std::byte{static_cast<unsigned char>(rank + 1)}), copy(n);
    const std::string size = fmt::format("{} MiB", mib);
    const int repeats = mib >= 256 ? 3 : 7;
    if (root) {
      const Timing t = measure([&] { std::memcpy(copy.data(), bytes.data(), n); }, 2, repeats);
      print_row({.benchmark = "exchange/memcpy (one process)",
                 .device = cpu_info().model,
                 .size = size,
                 .timing = t,
                 .work = double(n),
                 .work_unit = "B",
                 .note = "one thread: what a message between ranks of one host costs at least"});
    }
    if (ranks == 1) continue;
    std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), 0);
    counts[static_cast<std::size_t>((rank + ranks - 1) % ranks)] = n;
    const Timing ring = measure_with(timed([&] { (void)comm->alltoall(bytes, counts); }), 1, repeats);
    const Timing gather = measure_with(timed([&] {
                                         if (!root) {
                                           comm->send(bytes, 0);
                                           return;
                                         }
                                         for (int r = 1; r < ranks; ++r) (void)comm->receive(r);
                                       }),
                                       1, repeats);
    const Timing all = measure_with(timed([&] { (void)comm->allgather(bytes); }), 1, repeats);
    if (!root) continue;
    const double others = double(n) * (ranks - 1);
    print_row({.benchmark = "exchange/ring shift",
               .device = where,
               .size = size,
               .timing = ring,
               .work = double(n),
               .work_unit = "B",
               .note = "per rank: one message to rank r - 1 (MPI_Alltoallv)"});
    print_row({.benchmark = "exchange/to rank 0",
               .device = where,
               .size = size,
               .timing = gather,
               .work = others,
               .work_unit = "B",
               .note = "received by rank 0, one rank at a time (MPI_Send / MPI_Recv)"});
    print_row({.benchmark = "exchange/allgather",
               .device = where,
               .size = size,
               .timing = all,
               .work = others,
               .work_unit = "B",
               .note = "received per rank (MPI_Allgatherv)"});
  }
  return 0;
}

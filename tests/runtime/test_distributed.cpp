// The engine-free distributed pieces: records and strings through the collectives, failure
// agreement (run_step), a rank's share of the host, launcher detection. Ranks are threads here
// (testing/thread_ranks.hpp); tests/mpi runs the same code under mpirun.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/stat.h>

#include "molaccel/distributed.hpp"
#include "runtime/host_resources.hpp"
#include "testing/testing.hpp"
#include "testing/thread_ranks.hpp"

namespace molaccel {
namespace {

struct Record {
  std::uint32_t a;
  float b;
};

TEST(Distributed, SingleProcessCommunicator) {
  auto comm = make_single_process_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  const std::vector<Record> mine{{1, 0.5f}, {2, 0.25f}};
  const auto all = allgather_records<Record>(*comm, mine);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].size(), 2u);
  EXPECT_EQ(all[0][1].a, 2u);
  // One process: the step's own exception, not a RankFailure.
  EXPECT_THROW(run_step(*comm, [] { throw InputError("x.smi", 3, "bad"); }), InputError);
}

TEST(Distributed, RecordsAndStringsReachEveryRankInRankOrder) {
  testing::run_ranks(3, [](Communicator& comm) {
    std::vector<Record> mine(static_cast<std::size_t>(comm.rank()) + 1,
                             Record{static_cast<std::uint32_t>(comm.rank()), 1.0f});
    const auto all = allgather_records<Record>(comm, mine);
    ASSERT_EQ(all.size(), 3u);
    for (std::size_t r = 0; r < 3; ++r) {
      ASSERT_EQ(all[r].size(), r + 1);
      for (const auto& rec : all[r]) EXPECT_EQ(rec.a, r);
    }
    const auto at_root = gather_records<Record>(comm, mine, 0);
    EXPECT_EQ(at_root.size(), comm.is_root() ? 3u : 0u);
    const std::vector<std::string> names{"r" + std::to_string(comm.rank()), ""};
    const auto strings = gather_strings(comm, names, 0);
    if (comm.is_root()) {
      ASSERT_EQ(strings.size(), 3u);
      EXPECT_EQ(strings[2][0], "r2");
      EXPECT_EQ(strings[2][1], "");
    }
    std::vector<std::byte> data;
    if (comm.is_root()) data.assign(5, std::byte{7});
    comm.broadcast(data, 0);
    EXPECT_EQ(data.size(), 5u);
  });
}

// Rank r sends d + 1 bytes of value 10 r + d to rank d (none to itself when r = 1): rank d gets
// every rank's part in rank order.
TEST(Distributed, AllToAllDeliversEachRanksPartInRankOrder) {
  for (int ranks : {1, 2, 3, 5}) {
    testing::run_ranks(ranks, [&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<std::byte> send;
      std::vector<std::size_t> send_counts;
      for (int d = 0; d < ranks; ++d) {
        const std::size_t n = r == 1 && d == 1 ? 0 : static_cast<std::size_t>(d) + 1;
        send.insert(send.end(), n, static_cast<std::byte>(10 * r + d));
        send_counts.push_back(n);
      }
      std::vector<std::size_t> counts;
      const auto got = comm.alltoall(send, send_counts, &counts);
      ASSERT_EQ(counts.size(), static_cast<std::size_t>(ranks));
      std::size_t at = 0;
      for (int from = 0; from < ranks; ++from) {
        const std::size_t n = from == 1 && r == 1 ? 0 : static_cast<std::size_t>(r) + 1;
        ASSERT_EQ(counts[static_cast<std::size_t>(from)], n);
        for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(got[at + i], static_cast<std::byte>(10 * from + r));
        at += n;
      }
      EXPECT_EQ(got.size(), at);
    });
  }
}

// What `ranks` ranks write with `write` through a FIFO made at `fifo` (read by a thread meanwhile);
// `received`: rank 0's count of bytes received from the others.
std::string through_fifo(
    const std::filesystem::path& fifo, int ranks,
    const std::function<std::uint64_t(Communicator&, const std::filesystem::path&)>& write,
    std::uint64_t& received) {
  if (::mkfifo(fifo.c_str(), 0600) != 0) {
    ADD_FAILURE() << "mkfifo " << fifo;
    return {};
  }
  std::string piped;
  std::thread reader([&] {
    std::FILE* f = std::fopen(fifo.c_str(), "rb");
    for (int c; f && (c = std::fgetc(f)) != EOF;) piped += static_cast<char>(c);
    if (f) std::fclose(f);
  });
  try {
    testing::run_ranks(ranks, [&](Communicator& comm) {
      const auto got = write(comm, fifo);
      if (comm.is_root()) received = got;
    });
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  reader.join();
  return piped;
}

// Rank 0 writes the header and every rank's part in rank order (empty parts included); into a
// regular file the other ranks write their parts themselves (nothing received), into a pipe they
// send them to rank 0; a file it cannot write makes every rank fail, and leaves nothing.
TEST(Distributed, WriteInRankOrder) {
  testing::TempDir dir;
  for (int ranks : {1, 3, 4}) {
    const auto path = dir.path() / ("out" + std::to_string(ranks));
    testing::run_ranks(ranks, [&](Communicator& comm) {
      const std::string mine = comm.rank() == 1 ? ""
                                                : std::string(static_cast<std::size_t>(comm.rank()) + 1,
                                                              'a' + static_cast<char>(comm.rank()));
      const auto received = write_in_rank_order(comm, path, comm.is_root() ? "head:" : "",
                                                std::as_bytes(std::span<const char>(mine)));
      EXPECT_EQ(received, 0u);
    });
    EXPECT_EQ(testing::read_file(path), ranks == 1 ? "head:a" : ranks == 3 ? "head:accc" : "head:acccdddd");
  }
  // A FIFO: written through, not a file the others can write into.
  std::uint64_t received = 0;
  EXPECT_EQ(through_fifo(
                dir.path() / "fifo", 4,
                [](Communicator& comm, const std::filesystem::path& fifo) {
                  const std::string mine(static_cast<std::size_t>(comm.rank()) + 1,
                                         'a' + static_cast<char>(comm.rank()));
                  return write_in_rank_order(comm, fifo, comm.is_root() ? "head:" : "",
                                             std::as_bytes(std::span<const char>(mine)));
                },
                received),
            "head:abbcccdddd");
  EXPECT_EQ(received, 9u);
  testing::run_ranks(3, [&](Communicator& comm) {
    const std::string mine = "xyz";
    EXPECT_THROW(write_in_rank_order(comm, dir.path() / "missing" / "out", "",
                                     std::as_bytes(std::span<const char>(mine))),
                 RankFailure);
  });
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "missing"));
}

// A rank's part in pieces (empty ones among them) lands as if joined: into a regular file (every
// rank writing its pieces at its offset) and through a FIFO (the pieces gathered on rank 0).
TEST(Distributed, WriteInRankOrderInPieces) {
  testing::TempDir dir;
  auto write = [](Communicator& comm, const std::filesystem::path& path) {
    const std::string r(1, static_cast<char>('a' + comm.rank()));
    const std::vector<std::string> texts = {r, "", r + r + "-", comm.rank() == 2 ? "" : "|"};
    std::vector<std::span<const std::byte>> pieces;
    for (const auto& t : texts) pieces.push_back(std::as_bytes(std::span<const char>(t)));
    return write_in_rank_order(comm, path, comm.is_root() ? "head:" : "", pieces);
  };
  const auto path = dir.path() / "out";
  testing::run_ranks(3, [&](Communicator& comm) { EXPECT_EQ(write(comm, path), 0u); });
  EXPECT_EQ(testing::read_file(path), "head:aaa-|bbb-|ccc-");
  std::uint64_t received = 0;
  EXPECT_EQ(through_fifo(dir.path() / "fifo", 3, write, received), "head:aaa-|bbb-|ccc-");
  EXPECT_EQ(received, 9u);
}

TEST(Distributed, ReduceToRootCombinesEveryRankInRankOrder) {
  for (int ranks : {1, 2, 3, 5, 8}) {
    testing::run_ranks(ranks, [&](Communicator& comm) {
      std::vector<std::byte> mine{static_cast<std::byte>(comm.rank())};
      const auto all =
          reduce_to_root(comm, mine, [](std::vector<std::byte> lower, std::vector<std::byte> upper) {
            lower.insert(lower.end(), upper.begin(), upper.end());
            return lower;
          });
      if (!comm.is_root()) {
        EXPECT_TRUE(all.empty());
        return;
      }
      ASSERT_EQ(all.size(), static_cast<std::size_t>(ranks));
      for (int r = 0; r < ranks; ++r) EXPECT_EQ(all[static_cast<std::size_t>(r)], static_cast<std::byte>(r));
    });
  }
}

TEST(Distributed, AFailureOnOneRankStopsEveryRankWithTheLowestFailedRank) {
  std::atomic<int> failures{0}, later_steps{0};
  testing::run_ranks(4, [&](Communicator& comm) {
    try {
      run_step(comm, [&] {
        if (comm.rank() == 2) throw InputError("db/residues.bin", 0, "contains codes outside the alphabet");
        if (comm.rank() == 3) throw Error("out of memory");
      });
      ++later_steps;
    } catch (const RankFailure& e) {
      ++failures;
      EXPECT_EQ(e.failed_rank(), 2);
      EXPECT_EQ(e.cause(), RankFailure::Cause::input);
      EXPECT_STREQ(e.what(), "rank 2 of 4: db/residues.bin: contains codes outside the alphabet");
    }
    // Every rank left the failed step: a later collective still matches up.
    run_step(comm, [] {});
  });
  EXPECT_EQ(failures.load(), 4);
  EXPECT_EQ(later_steps.load(), 0);
}

TEST(Distributed, EachRankGetsItsShareOfTheCores) {
  Resources::Options o;
  o.device = DeviceSpec::parse("cpu");
  const auto one = options_for_rank(o, 0, 1);
  EXPECT_EQ(one.cpu_threads, 0);  // alone: unchanged (all cores)
  const auto shared = options_for_rank(o, 1, 2);
  EXPECT_EQ(shared.cpu_threads, std::max(1, cpu_info().logical_cores / 2));
  EXPECT_EQ(shared.device.kind, DeviceSpec::Kind::cpu);
  o.cpu_threads = 3;
  EXPECT_EQ(options_for_rank(o, 1, 2).cpu_threads, 3);  // what the user asked for
  o.device = DeviceSpec::parse("gpu:1");
  EXPECT_EQ(options_for_rank(o, 1, 2).device.gpu_ids, std::vector<int>{1});
}

TEST(Distributed, AProcessBoundToOneCoreByItsLauncherTakesItsShareOfTheHost) {
  const int online = detail::online_cpus();
  if (online < 2) GTEST_SKIP() << "one CPU online";
  cpu_set_t saved;
  CPU_ZERO(&saved);
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  if (CPU_COUNT(&saved) < online) GTEST_SKIP() << "this process may not use every online CPU (a cpuset)";
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // what `mpirun -np 1` does by default
  EXPECT_EQ(detail::usable_cpus(), 1);
  const std::string said = detail::claim_cpu_share(0, 1);
  EXPECT_EQ(detail::usable_cpus(), online);
  EXPECT_NE(said.find("bound this process to 1 CPU"), std::string::npos) << said;
  EXPECT_TRUE(detail::claim_cpu_share(0, 1).empty());  // wide enough already: left alone
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
}

// Faulting in pages changes no byte, whether the memory was written already, is fresh, or does
// not start on a page boundary.
TEST(HostMemory, PopulatingPagesKeepsTheContents) {
  const std::size_t bytes = (std::size_t{80} << 20) + 12345;
  std::vector<std::uint8_t> written(bytes);
  for (std::size_t i = 0; i < bytes; ++i) written[i] = static_cast<std::uint8_t>(i * 2654435761u >> 24);
  const std::vector<std::uint8_t> copy = written;
  detail::populate_pages(written.data() + 3, bytes - 3);
  EXPECT_TRUE(written == copy);
  std::vector<std::uint32_t> fresh;
  fresh.reserve(bytes / 4);
  detail::populate_pages(fresh.data(), bytes / 4 * 4);
  fresh.resize(bytes / 4);
  EXPECT_EQ(std::count(fresh.begin(), fresh.end(), 0u), static_cast<std::ptrdiff_t>(fresh.size()));
  detail::populate_pages(nullptr, bytes);  // nothing to do
  detail::populate_pages(written.data(), 100);
}

TEST(Distributed, OutsideALauncherThereIsOneProcess) {
  if (detect_launcher().under_launcher) GTEST_SKIP() << "running under an MPI launcher";
  auto comm = connect();
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->kind(), "single");
}

}  // namespace
}  // namespace molaccel

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "testing/testing.hpp"

namespace molaccel {
namespace {

// CPU workers stand in for devices of different speeds.
std::vector<WorkerInfo> fake_workers(int n) {
  std::vector<WorkerInfo> w(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) w[static_cast<std::size_t>(i)].index = i;
  return w;
}

TEST(Scheduler, EveryTileRunsExactlyOnce) {
  WorkerPool pool(fake_workers(4));
  constexpr std::size_t n = 1000;
  std::vector<std::atomic<int>> runs(n);
  auto stats = pool.run(n, [&](WorkerContext&, std::size_t tile) { runs[tile].fetch_add(1); });
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "tile " << i;
  EXPECT_EQ(stats.tiles, n);
  EXPECT_EQ(stats.retries, 0u);
  std::size_t sum = 0;
  for (auto t : stats.tiles_per_worker) sum += t;
  EXPECT_EQ(sum, n);
}

TEST(Scheduler, FastWorkerTakesMoreTilesThanSlowOne) {
  WorkerPool pool(fake_workers(2));
  auto stats = pool.run(60, [&](WorkerContext& ctx, std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ctx.worker().index == 0 ? 1 : 8));
  });
  // Dynamic hand-out: the 8x faster worker should do clearly more than half (static split: 30/30).
  EXPECT_GT(stats.tiles_per_worker[0], 40u)
      << stats.tiles_per_worker[0] << " vs " << stats.tiles_per_worker[1];
  EXPECT_EQ(stats.tiles_per_worker[0] + stats.tiles_per_worker[1], 60u);
}

TEST(Scheduler, FailedTileIsRetriedOnAnotherWorker) {
  WorkerPool pool(fake_workers(3));
  std::mutex m;
  std::map<std::size_t, std::set<int>> done_by;
  JobOptions options;
  // Worker 0 fails every tile divisible by 5 (think: out of memory on a smaller GPU).
  options.inject_fault = [](const WorkerInfo& w, std::size_t tile, int) {
    return w.index == 0 && tile % 5 == 0;
  };
  auto stats = pool.run(
      100,
      [&](WorkerContext& ctx, std::size_t tile) {
        std::lock_guard lock(m);
        done_by[tile].insert(ctx.worker().index);
      },
      options);
  ASSERT_EQ(done_by.size(), 100u);
  for (auto& [tile, workers] : done_by) {
    EXPECT_EQ(workers.size(), 1u);
    if (tile % 5 == 0) {
      EXPECT_EQ(workers.count(0), 0u) << "tile " << tile << " completed on the failing worker";
    }
  }
  EXPECT_EQ(stats.retries + 0, stats.retries);  // counted
  EXPECT_LE(stats.retries, 20u);
}

TEST(Scheduler, RetriedTileSucceedsOnSecondWorker) {
  WorkerPool pool(fake_workers(2));
  std::atomic<int> attempts{0};
  JobOptions options;
  options.inject_fault = [&](const WorkerInfo&, std::size_t tile, int attempt) {
    if (tile == 7) attempts++;
    return tile == 7 && attempt == 0;  // first try fails wherever it lands
  };
  auto stats = pool.run(
      20, [](WorkerContext&, std::size_t) {}, options);
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(attempts.load(), 2);
}

TEST(Scheduler, TileThatFailsEverywhereFailsTheJobWithItsError) {
  WorkerPool pool(fake_workers(3));
  std::atomic<int> tries{0};
  try {
    pool.run(10, [&](WorkerContext&, std::size_t tile) {
      if (tile == 4) {
        tries++;
        throw InputError("tile4.dat", 9, "cannot be processed");
      }
    });
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "tile4.dat:9: cannot be processed");
  }
  EXPECT_EQ(tries.load(), 3) << "each worker should have tried the tile once";
  // The pool stays usable after a failed job.
  std::atomic<int> count{0};
  pool.run(5, [&](WorkerContext&, std::size_t) { count++; });
  EXPECT_EQ(count.load(), 5);
}

TEST(Scheduler, CancellationStopsTheJob) {
  WorkerPool pool(fake_workers(2));
  CancelToken token;
  JobOptions options;
  options.cancel = &token;
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run(
                   10000,
                   [&](WorkerContext&, std::size_t) {
                     if (++ran == 50) token.cancel();
                     std::this_thread::sleep_for(std::chrono::microseconds(100));
                   },
                   options),
               Cancelled);
  EXPECT_LT(ran.load(), 10000);
}

TEST(Scheduler, ProgressIsReportedInOrderUpToTotal) {
  WorkerPool pool(fake_workers(3));
  std::vector<std::size_t> seen;
  JobOptions options;
  options.on_progress = [&](std::size_t done, std::size_t total) {
    EXPECT_EQ(total, 50u);
    seen.push_back(done);
  };
  pool.run(
      50, [](WorkerContext&, std::size_t) {}, options);
  ASSERT_EQ(seen.size(), 50u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i + 1);
}

TEST(Scheduler, WorkerLocalStateLivesForTheJob) {
  WorkerPool pool(fake_workers(2));
  struct Scratch {
    int uses = 0;
  };
  std::atomic<int> creations{0};
  struct Counted {
    explicit Counted(std::atomic<int>& c) { c++; }
  };
  pool.run(100, [&](WorkerContext& ctx, std::size_t) {
    ctx.local<Counted>(creations);
    ctx.local<Scratch>().uses++;
  });
  EXPECT_LE(creations.load(), 2);
  EXPECT_GE(creations.load(), 1);
}

TEST(Scheduler, KeptStateOutlivesJobsAndIsDestroyedWithThePool) {
  std::atomic<int> created{0}, destroyed{0};
  struct Counted {
    Counted(std::atomic<int>& c, std::atomic<int>& d) : destroyed(d) { c++; }
    ~Counted() { destroyed++; }
    std::atomic<int>& destroyed;
    int jobs_seen = 0;
  };
  {
    WorkerPool pool(fake_workers(2));
    for (int job = 0; job < 5; ++job)
      pool.run(20, [&](WorkerContext& ctx, std::size_t) {
        auto& kept = ctx.kept<Counted>(created, destroyed);
        kept.jobs_seen++;
        ctx.local<int>()++;  // per-job state beside it
      });
    // At most one kept object per worker, whatever the number of jobs.
    EXPECT_GE(created.load(), 1);
    EXPECT_LE(created.load(), 2);
    EXPECT_EQ(destroyed.load(), 0);
  }
  EXPECT_EQ(destroyed.load(), created.load());
}

TEST(PinnedPool, ReusesTheSmallestBlockThatFits) {
  PinnedPool pool;
  std::byte* small_block = nullptr;
  std::byte* large_block = nullptr;
  {
    PinnedBlock a = pool.take(1000);
    PinnedBlock b = pool.take(1 << 20);
    ASSERT_TRUE(a);
    ASSERT_GE(a.bytes(), 1000u);
    ASSERT_GE(b.bytes(), std::size_t{1} << 20);
    a.data()[999] = std::byte{7};  // writable over its whole size
    small_block = a.data();
    large_block = b.data();
    EXPECT_EQ(pool.kept_bytes(), 0u);
  }
  EXPECT_GE(pool.kept_bytes(), (std::size_t{1} << 20) + 1000);
  PinnedBlock c = pool.take(500);
  EXPECT_EQ(c.data(), small_block);
  PinnedBlock d = pool.take(2000);  // too big for the small block: the large one
  EXPECT_EQ(d.data(), large_block);
  PinnedBlock e = pool.take(0);
  EXPECT_FALSE(e);
  PinnedBlock moved = std::move(d);
  EXPECT_EQ(moved.data(), large_block);
  EXPECT_FALSE(d);  // NOLINT(bugprone-use-after-move): a moved-from block is empty
}

TEST(PinnedPool, ResourcesShareOnePoolWithTheirWorkers) {
  auto r = Resources::cpu(2);
  std::atomic<int> from_pool{0};
  run_tiles(r, 8, [&](WorkerContext& ctx, std::size_t) {
    PinnedBlock block = ctx.pinned_pool().take(4096);
    if (block && block.bytes() >= 4096) from_pool++;
  });
  EXPECT_EQ(from_pool.load(), 8);
  EXPECT_GE(r.pinned_pool().kept_bytes(), 4096u);
}

TEST(Scheduler, RunTilesThroughResources) {
  auto r = Resources::cpu(2);
  std::atomic<std::size_t> sum{0};
  run_tiles(r, 100, [&](WorkerContext& ctx, std::size_t tile) {
    EXPECT_EQ(ctx.worker().kind, WorkerInfo::Kind::cpu);
    sum += tile;
  });
  EXPECT_EQ(sum.load(), 4950u);
}

TEST(ParallelFor, CoversRangeOnceAndPropagatesErrors) {
  std::vector<std::atomic<int>> hits(1001);
  parallel_for(1001, 4, 7, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_THROW(parallel_for(100, 2, 1,
                            [](std::size_t b, std::size_t) {
                              if (b == 50) throw Error("boom");
                            }),
               Error);
  parallel_for(0, 2, 1, [](std::size_t, std::size_t) { FAIL(); });
}

TEST(ParallelFor, NestedAndConcurrentCallsComplete) {
  std::atomic<long> total{0};
  auto work = [&] {
    parallel_for(64, 4, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i)
        parallel_for(10, 4, 1, [&](std::size_t b2, std::size_t e2) { total += static_cast<long>(e2 - b2); });
    });
  };
  std::thread a(work), b(work);
  work();
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 3 * 64 * 10);
}

TEST(TileRange, SplitsWithRemainder) {
  TileRange r{10, 4};
  EXPECT_EQ(r.count(), 3u);
  EXPECT_EQ(r.begin(2), 8u);
  EXPECT_EQ(r.end(2), 10u);
}

}  // namespace
}  // namespace molaccel

// The GPU chunk pool's bookkeeping (chunk_queue.hpp), without a GPU: a chunk that failed on a
// worker goes to another one, never back to it; failures are counted per chunk, so chunks that
// fail on different workers are all redone; a chunk that failed everywhere ends the request with
// its error.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "orbital/chunk_queue.hpp"

namespace molaccel::orbital {
namespace {

WorkerInfo worker(int index) {
  WorkerInfo w;
  w.kind = WorkerInfo::Kind::gpu;
  w.index = index;
  return w;
}

std::vector<std::pair<std::size_t, std::size_t>> chunks(std::size_t n) {
  std::vector<std::pair<std::size_t, std::size_t>> c;
  for (std::size_t i = 0; i < n; ++i) c.emplace_back(4 * i, 4);
  return c;
}

// Two workers, chunks 1 and 3 failing at their first attempt on whichever worker takes them
// (tiles 2 + c: two shares come first): worker 0 fails chunk 1, worker 1 then fails chunk 3; each
// failed chunk is taken by the other worker, and every chunk ends up done.
TEST(OrbitalChunkQueue, ChunksThatFailOnDifferentWorkersAreAllRedone) {
  const WorkerInfo w0 = worker(0), w1 = worker(1);
  detail::ChunkQueue queue(chunks(6), 2, [](const WorkerInfo&, std::size_t tile, int attempt) {
    return attempt == 0 && (tile == 2 + 1 || tile == 2 + 3);
  });
  std::size_t c = 0;
  ASSERT_TRUE(queue.take(w0, c));
  EXPECT_EQ(c, 0u);
  queue.done(w0);
  EXPECT_THROW(queue.take(w0, c), InjectedFault);  // chunk 1 on worker 0
  queue.fail(std::make_exception_ptr(std::runtime_error("chunk 1")));
  ASSERT_TRUE(queue.take(w1, c));
  EXPECT_EQ(c, 1u);  // the given-back chunk first, on the other worker
  queue.done(w1);
  ASSERT_TRUE(queue.take(w1, c));
  EXPECT_EQ(c, 2u);
  queue.done(w1);
  EXPECT_THROW(queue.take(w1, c), InjectedFault);  // chunk 3 on worker 1
  queue.fail(std::make_exception_ptr(std::runtime_error("chunk 3")));
  // Worker 1 is not given chunk 3 again; worker 0 is.
  ASSERT_TRUE(queue.take(w1, c));
  EXPECT_EQ(c, 4u);
  queue.done(w1);
  ASSERT_TRUE(queue.take(w0, c));
  EXPECT_EQ(c, 3u);
  queue.done(w0);
  ASSERT_TRUE(queue.take(w0, c));
  EXPECT_EQ(c, 5u);
  queue.done(w0);
  EXPECT_FALSE(queue.take(w0, c));
  EXPECT_FALSE(queue.take(w1, c));
  EXPECT_EQ(queue.left(), 0u);
  EXPECT_EQ(queue.failures(), 2u);
  EXPECT_EQ(queue.done_per_worker(), (std::vector<std::size_t>{3, 3}));
}

// A chunk that failed on both workers is left: neither takes it, and the front rethrows the
// last failure.
TEST(OrbitalChunkQueue, ChunkFailedOnEveryWorkerIsLeftWithItsError) {
  const WorkerInfo w0 = worker(0), w1 = worker(1);
  detail::ChunkQueue queue(chunks(2), 2, nullptr);
  std::size_t c = 0;
  ASSERT_TRUE(queue.take(w0, c));
  queue.give_back(c, &w0);
  queue.fail(std::make_exception_ptr(std::runtime_error("first")));
  ASSERT_TRUE(queue.take(w1, c));
  EXPECT_EQ(c, 0u);
  queue.give_back(c, &w1);
  queue.fail(std::make_exception_ptr(std::runtime_error("device lost")));
  ASSERT_TRUE(queue.take(w0, c));  // chunk 1 is still fine
  EXPECT_EQ(c, 1u);
  queue.done(w0);
  EXPECT_FALSE(queue.take(w0, c));
  EXPECT_FALSE(queue.take(w1, c));
  EXPECT_EQ(queue.left(), 1u);
  EXPECT_EQ(queue.progress(), 3u);  // one chunk done, two failure marks
  try {
    queue.rethrow_last_failure();
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "device lost");
  }
}

// Given back without a failure (out of memory: the worker shrinks its chunks), a chunk may
// return to the same worker.
TEST(OrbitalChunkQueue, ChunkGivenBackWithoutFailureMayReturn) {
  const WorkerInfo w0 = worker(0);
  detail::ChunkQueue queue(chunks(1), 1, nullptr);
  std::size_t c = 0;
  ASSERT_TRUE(queue.take(w0, c));
  queue.give_back(c);
  ASSERT_TRUE(queue.take(w0, c));
  EXPECT_EQ(c, 0u);
}

}  // namespace
}  // namespace molaccel::orbital

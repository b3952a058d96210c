// The GPU "chunk pool" of one request (default for GPU pools, see orbital.cpp): the grid is cut into
// chunks of planes by the request alone (grid, outputs, kernel path: never by the number of
// workers, so every value is the same bit for bit on any number of GPUs), and each worker takes
// one scheduler tile, its "share", in which it claims chunks one by one from this queue and
// pipelines them (kernels of one chunk while the previous one is copied out), until the queue is
// empty. A share that fails gives its unfinished chunks back and ends (the front records the
// error, see fail()); the chunk known to have failed is marked with its worker, which never takes
// it again. The other shares take them, and the front runs another round of shares for whatever is
// left when all have ended, while rounds make progress. Failures are counted per chunk, not per share, so two
// chunks failing on two different workers are both redone. C++17 (included by the CUDA backend).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::orbital::detail {

class ChunkQueue {
 public:
  using Fault = std::function<bool(const WorkerInfo&, std::size_t tile, int attempt)>;
  // chunks: [first plane, planes) in grid order; shares: scheduler tiles of the job (the fault
  // hook sees chunk c as tile shares + c).
  ChunkQueue(std::vector<std::pair<std::size_t, std::size_t>> chunks, std::size_t shares, Fault fault)
      : chunks_(std::move(chunks)),
        attempts_(chunks_.size(), 0),
        failed_on_(chunks_.size(), 0),
        shares_(shares),
        fault_(std::move(fault)) {}

  std::size_t size() const { return chunks_.size(); }
  const std::pair<std::size_t, std::size_t>& chunk(std::size_t c) const { return chunks_[c]; }

  // Claims the next chunk (given-back chunks first, except those that failed on this worker);
  // false when none is left for it. Throws InjectedFault (after giving the chunk back) when the
  // test hook says this attempt fails.
  bool take(const WorkerInfo& worker, std::size_t& c) {
    int attempt = 0;
    {
      std::lock_guard lock(mutex_);
      const std::uint64_t me = bit(worker);
      std::size_t r = returned_.size();
      while (r > 0 && (failed_on_[returned_[r - 1]] & me)) --r;
      if (r > 0) {
        c = returned_[r - 1];
        returned_.erase(returned_.begin() + static_cast<std::ptrdiff_t>(r - 1));
      } else if (next_ < chunks_.size()) {
        c = next_++;
      } else {
        return false;
      }
      attempt = attempts_[c]++;
    }
    if (fault_ && fault_(worker, shares_ + c, attempt)) {
      give_back(c, &worker);
      throw InjectedFault("injected fault in orbital chunk " + std::to_string(c) + " on " + worker.name(),
                          __FILE__, __LINE__);
    }
    return true;
  }
  // A claimed chunk that was not finished (its share failed): another worker redoes it. With
  // `failed_on`, that worker never takes it again in this request.
  void give_back(std::size_t c, const WorkerInfo* failed_on = nullptr) {
    std::lock_guard lock(mutex_);
    if (failed_on && !(failed_on_[c] & bit(*failed_on))) {
      failed_on_[c] |= bit(*failed_on);
      ++marks_;
    }
    returned_.push_back(c);
  }
  // A chunk whose values are in the output.
  void done(const WorkerInfo& worker) {
    std::lock_guard lock(mutex_);
    const std::size_t w = static_cast<std::size_t>(worker.index);
    if (done_per_worker_.size() <= w) done_per_worker_.resize(w + 1, 0);
    ++done_per_worker_[w];
    ++done_;
  }
  // A share that ended with `error` (its chunks already given back).
  void fail(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    ++failures_;
    last_error_ = std::move(error);
  }
  std::size_t failures() const {
    std::lock_guard lock(mutex_);
    return failures_;
  }
  // Grows while the request gets on: a chunk finished, or a chunk failed on a worker it had not
  // failed on. A round of shares that leaves it unchanged changes nothing the next would see.
  std::size_t progress() const {
    std::lock_guard lock(mutex_);
    return done_ + marks_;
  }
  // Chunks not yet in the output.
  std::size_t left() const {
    std::lock_guard lock(mutex_);
    return chunks_.size() - done_;
  }
  // After a round of shares without progress while chunks are left: they failed on every worker
  // that could take them, or every worker fails whatever it takes.
  [[noreturn]] void rethrow_last_failure() const {
    std::lock_guard lock(mutex_);
    if (last_error_) std::rethrow_exception(last_error_);
    throw Error("orbital: chunks left that no worker could take", __FILE__, __LINE__);
  }
  std::vector<std::size_t> done_per_worker() const {
    std::lock_guard lock(mutex_);
    return done_per_worker_;
  }

 private:
  static std::uint64_t bit(const WorkerInfo& worker) { return std::uint64_t{1} << (worker.index & 63); }

  std::vector<std::pair<std::size_t, std::size_t>> chunks_;
  std::vector<int> attempts_;
  std::vector<std::uint64_t> failed_on_;  // per chunk: workers it failed on
  std::size_t shares_;
  Fault fault_;
  mutable std::mutex mutex_;
  std::size_t next_ = 0;
  std::vector<std::size_t> returned_;
  std::vector<std::size_t> done_per_worker_;
  std::size_t done_ = 0, failures_ = 0, marks_ = 0;
  std::exception_ptr last_error_;
};

}  // namespace molaccel::orbital::detail

// The GPU "chunk pool" of one request (default for GPU pools, see orbital.cpp): the grid is cut into
// chunks of planes by the request alone (grid, outputs, kernel path: never by the number of
// workers, so every value is the same bit for bit on any number of GPUs), and each worker takes
// one scheduler tile, its "share", in which it claims chunks one by one from this queue and
// pipelines them (kernels of one chunk while the previous one is copied out), until the queue is
// empty. A share that fails gives its unfinished chunks back before it throws; the scheduler then
// runs the share again on another worker, which finishes whatever is left (a failed share is thus
// split into its chunks, and only those are redone). C++17 (included by the CUDA backend).
#pragma once

#include <cstddef>
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
      : chunks_(std::move(chunks)), attempts_(chunks_.size(), 0), shares_(shares), fault_(std::move(fault)) {}

  std::size_t size() const { return chunks_.size(); }
  const std::pair<std::size_t, std::size_t>& chunk(std::size_t c) const { return chunks_[c]; }

  // Claims the next chunk (given-back chunks first); false when none is left. Throws InjectedFault
  // (after giving the chunk back) when the test hook says this attempt fails.
  bool take(const WorkerInfo& worker, std::size_t& c) {
    int attempt = 0;
    {
      std::lock_guard lock(mutex_);
      if (!returned_.empty()) {
        c = returned_.back();
        returned_.pop_back();
      } else if (next_ < chunks_.size()) {
        c = next_++;
      } else {
        return false;
      }
      attempt = attempts_[c]++;
    }
    if (fault_ && fault_(worker, shares_ + c, attempt)) {
      give_back(c);
      throw InjectedFault("injected fault in orbital chunk " + std::to_string(c) + " on " + worker.name(),
                          __FILE__, __LINE__);
    }
    return true;
  }
  // A claimed chunk that was not finished (its share failed): another worker redoes it.
  void give_back(std::size_t c) {
    std::lock_guard lock(mutex_);
    returned_.push_back(c);
  }
  // A chunk whose values are in the output.
  void done(const WorkerInfo& worker) {
    std::lock_guard lock(mutex_);
    const std::size_t w = static_cast<std::size_t>(worker.index);
    if (done_per_worker_.size() <= w) done_per_worker_.resize(w + 1, 0);
    ++done_per_worker_[w];
  }
  std::vector<std::size_t> done_per_worker() const {
    std::lock_guard lock(mutex_);
    return done_per_worker_;
  }

 private:
  std::vector<std::pair<std::size_t, std::size_t>> chunks_;
  std::vector<int> attempts_;
  std::size_t shares_;
  Fault fault_;
  mutable std::mutex mutex_;
  std::size_t next_ = 0;
  std::vector<std::size_t> returned_;
  std::vector<std::size_t> done_per_worker_;
};

}  // namespace molaccel::orbital::detail

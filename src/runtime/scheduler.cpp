// The tile scheduler: one persistent worker thread per device pulls tiles from a shared iterator,
// so fast and slow devices balance themselves; a tile that throws goes back to a retry queue for
// a worker that has not failed it yet, and the job fails only when every worker has failed it.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "molaccel/runtime.hpp"
#include "runtime/device_hooks.hpp"

namespace molaccel {

struct WorkerPool::Impl {
  struct Job {
    std::size_t n_tiles = 0;
    const TileFunction* fn = nullptr;
    const JobOptions* options = nullptr;
    std::size_t next_tile = 0;
    std::size_t done = 0;
    std::size_t in_flight = 0;
    std::size_t retries = 0;
    std::deque<std::size_t> retry_queue;
    std::unordered_map<std::size_t, std::uint64_t> failed_by;  // tile -> bitmask of workers
    std::unordered_map<std::size_t, int> attempts;
    std::exception_ptr fatal;
    bool aborted = false;
    std::vector<std::size_t> tiles_per_worker;
  };

  std::mutex mutex;
  std::condition_variable cv;       // wakes workers: new job, new retriable tile, abort, stop
  std::condition_variable cv_done;  // wakes run(): a worker left the job
  std::uint64_t generation = 0;
  std::size_t active = 0;  // workers still inside the current job
  bool stopping = false;
  Job job;
  std::vector<std::exception_ptr> broken;  // per worker: start-up failure, if any
  std::uint64_t healthy_mask = 0;
  std::vector<std::thread> threads;
  std::mutex run_mutex;  // one job at a time
  PinnedPool pinned;     // page-locked staging for every worker's jobs

  bool can_take(std::size_t worker, std::size_t& tile) {
    const std::uint64_t bit = std::uint64_t{1} << worker;
    for (auto it = job.retry_queue.begin(); it != job.retry_queue.end(); ++it) {
      if (!(job.failed_by[*it] & bit)) {
        tile = *it;
        job.retry_queue.erase(it);
        return true;
      }
    }
    if (job.next_tile < job.n_tiles) {
      tile = job.next_tile++;
      return true;
    }
    return false;
  }

  void worker_main(const WorkerInfo info) {
    const std::size_t me = static_cast<std::size_t>(info.index);
    try {
      if (info.kind == WorkerInfo::Kind::gpu) detail::bind_thread_to_device(info.device);
    } catch (...) {
      std::lock_guard lock(mutex);
      broken[me] = std::current_exception();
      healthy_mask &= ~(std::uint64_t{1} << me);
    }
    WorkerContext::Slots kept;  // this worker's state kept from job to job (WorkerContext::kept)
    std::uint64_t seen = 0;
    std::unique_lock lock(mutex);
    for (;;) {
      cv.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping) break;
      seen = generation;
      if (!broken[me]) run_job(info, kept, lock);
      if (--active == 0) cv_done.notify_all();
    }
    lock.unlock();
    kept.clear();  // on this thread, with its device still current
    detail::release_thread_device();
  }

  // Called with the lock held; returns with it held.
  void run_job(const WorkerInfo& info, WorkerContext::Slots& kept, std::unique_lock<std::mutex>& lock) {
    const std::size_t me = static_cast<std::size_t>(info.index);
    const JobOptions& options = *job.options;
    WorkerContext ctx(info, &kept, &pinned);
    for (;;) {
      std::size_t tile = 0;
      cv.wait(lock, [&] {
        if (job.aborted) return true;
        if (!job.retry_queue.empty() || job.next_tile < job.n_tiles) {
          // Something queued; can this worker take it?
          const std::uint64_t bit = std::uint64_t{1} << me;
          if (job.next_tile < job.n_tiles) return true;
          for (auto t : job.retry_queue)
            if (!(job.failed_by[t] & bit)) return true;
        }
        return job.in_flight == 0;  // nothing left that could come back to this worker
      });
      if (job.aborted) break;
      if (options.cancel && options.cancel->cancelled()) {
        abort_with(std::make_exception_ptr(
            Cancelled(fmt::format("{} cancelled", options.name), __FILE__, __LINE__)));
        break;
      }
      if (!can_take(me, tile)) break;  // in_flight == 0 and nothing for this worker
      ++job.in_flight;
      const int attempt = job.attempts[tile]++;
      lock.unlock();
      std::exception_ptr error;
      try {
        if (options.inject_fault && options.inject_fault(info, tile, attempt))
          throw InjectedFault(fmt::format("injected fault in tile {} on {}", tile, info.name()), __FILE__,
                              __LINE__);
        (*job.fn)(ctx, tile);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      --job.in_flight;
      if (!error) {
        ++job.done;
        ++job.tiles_per_worker[me];
        job.failed_by.erase(tile);
        if (options.on_progress) {
          try {
            options.on_progress(job.done, job.n_tiles);
          } catch (...) {
            abort_with(std::current_exception());
          }
        }
      } else {
        auto& mask = job.failed_by[tile];
        mask |= std::uint64_t{1} << me;
        bool cancelled = false;
        try {
          std::rethrow_exception(error);
        } catch (const Cancelled&) {
          cancelled = true;
        } catch (const std::exception& e) {
          log_warn("{}: tile {} failed on {}: {}", options.name, tile, info.name(), e.what());
        } catch (...) {
        }
        if (cancelled || (mask & healthy_mask) == healthy_mask) {
          abort_with(error);
        } else {
          ++job.retries;
          job.retry_queue.push_back(tile);
        }
      }
      cv.notify_all();
    }
  }

  void abort_with(std::exception_ptr e) {
    if (!job.fatal) job.fatal = std::move(e);
    job.aborted = true;
    cv.notify_all();
  }
};

WorkerPool::WorkerPool(std::vector<WorkerInfo> workers)
    : workers_(std::move(workers)), impl_(std::make_unique<Impl>()) {
  MOLACCEL_EXPECTS(!workers_.empty() && workers_.size() <= 64, "a worker pool needs 1 to 64 workers");
  impl_->broken.resize(workers_.size());
  impl_->healthy_mask =
      workers_.size() == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << workers_.size()) - 1);
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].index = static_cast<int>(i);
    impl_->threads.emplace_back([this, info = workers_[i]] { impl_->worker_main(info); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->threads) t.join();
}

PinnedPool& WorkerPool::pinned_pool() const {
  return impl_->pinned;
}

JobStats WorkerPool::run(std::size_t n_tiles, const TileFunction& fn, const JobOptions& options) {
  std::lock_guard run_lock(impl_->run_mutex);
  const double start = now_seconds();
  JobStats stats;
  stats.tiles = n_tiles;
  stats.tiles_per_worker.assign(workers_.size(), 0);
  if (n_tiles == 0) return stats;
  std::unique_lock lock(impl_->mutex);
  if (impl_->healthy_mask == 0) {
    auto first = impl_->broken.front();
    lock.unlock();
    std::rethrow_exception(first);
  }
  impl_->job = Impl::Job{};
  impl_->job.n_tiles = n_tiles;
  impl_->job.fn = &fn;
  impl_->job.options = &options;
  impl_->job.tiles_per_worker.assign(workers_.size(), 0);
  impl_->active = workers_.size();
  ++impl_->generation;
  impl_->cv.notify_all();
  impl_->cv_done.wait(lock, [&] { return impl_->active == 0; });
  auto job = std::move(impl_->job);
  impl_->job = Impl::Job{};
  lock.unlock();
  if (job.fatal) std::rethrow_exception(job.fatal);
  if (job.done != n_tiles)
    throw Error(fmt::format("{}: {} of {} tiles were not done", options.name, n_tiles - job.done, n_tiles),
                __FILE__, __LINE__);
  stats.retries = job.retries;
  stats.tiles_per_worker = std::move(job.tiles_per_worker);
  stats.seconds = now_seconds() - start;
  return stats;
}

JobStats run_tiles(const Resources& resources, std::size_t n_tiles, const TileFunction& fn,
                   const JobOptions& options) {
  if (!(resources.show_progress() && options.progress_bar) || n_tiles < 2)
    return resources.pool().run(n_tiles, fn, options);
  ProgressBar bar(options.name, n_tiles);
  JobOptions with_bar = options;
  with_bar.on_progress = [&bar, user = options.on_progress](std::size_t done, std::size_t total) {
    bar.set(done);
    if (user) user(done, total);
  };
  auto stats = resources.pool().run(n_tiles, fn, with_bar);
  bar.finish();
  return stats;
}

namespace {
// Threads for parallel_for, started once and kept: starting threads per call costs tens of
// microseconds, which small CPU kernels (a solver iteration, one tile) cannot afford.
class HelperThreads {
 public:
  static HelperThreads& instance() {
    static HelperThreads pool;
    return pool;
  }
  // Runs `task` on up to `count` helper threads; returns how many will run it.
  std::size_t launch(std::size_t count, const std::function<void()>& task,
                     std::atomic<std::size_t>& pending) {
    std::lock_guard lock(mutex_);
    grow(count);
    for (std::size_t i = 0; i < count; ++i) queue_.push_back({&task, &pending});
    cv_.notify_all();
    return count;
  }
  static bool on_helper_thread() { return current_is_helper; }
  void wait_done(std::atomic<std::size_t>& pending) {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return pending.load() == 0; });
  }

 private:
  struct Job {
    const std::function<void()>* task;
    std::atomic<std::size_t>* pending;
  };
  ~HelperThreads() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void grow(std::size_t count) {
    while (threads_.size() < count) threads_.emplace_back([this] { loop(); });
  }
  void loop() {
    current_is_helper = true;
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty()) return;
      Job job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      (*job.task)();
      lock.lock();
      if (--*job.pending == 0) done_cv_.notify_all();
    }
  }
  static thread_local bool current_is_helper;
  std::mutex mutex_;
  std::condition_variable cv_, done_cv_;
  std::deque<Job> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};
thread_local bool HelperThreads::current_is_helper = false;
}  // namespace

void parallel_for(std::size_t n, int threads, std::size_t chunk,
                  const std::function<void(std::size_t, std::size_t)>& fn) {
  if (n == 0) return;
  if (chunk == 0) chunk = 1;
  const std::size_t chunks = (n + chunk - 1) / chunk;
  std::size_t t =
      threads > 0 ? static_cast<std::size_t>(threads) : static_cast<std::size_t>(cpu_info().logical_cores);
  t = std::min(t, chunks);
  // Nested calls run inline: a helper waiting for other helpers could deadlock the pool.
  if (t <= 1 || HelperThreads::on_helper_thread()) {
    fn(0, n);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  const std::function<void()> body = [&] {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const std::size_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      try {
        fn(c * chunk, std::min(n, (c + 1) * chunk));
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  auto& helpers = HelperThreads::instance();
  std::atomic<std::size_t> pending{t - 1};
  helpers.launch(t - 1, body, pending);
  body();
  helpers.wait_done(pending);
  if (error) std::rethrow_exception(error);
}

}  // namespace molaccel

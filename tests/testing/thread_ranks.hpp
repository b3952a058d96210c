// Ranks as threads of one process, for unit tests of code written against molaccel::Communicator:
// the collectives' semantics without MPI (and in builds without it). run_ranks(n, fn) runs
// fn(comm) on n threads, each with its own rank, and rethrows the first exception any of them
// threw after all have finished.
#pragma once

#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "molaccel/distributed.hpp"

namespace molaccel::testing {

class ThreadRanks {
 public:
  explicit ThreadRanks(int size)
      : size_(size),
        barrier_(size),
        slots_(static_cast<std::size_t>(size)),
        boxes_(static_cast<std::size_t>(size) * static_cast<std::size_t>(size)) {}

  class Rank final : public Communicator {
   public:
    Rank(ThreadRanks& group, int rank) : group_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return group_.size_; }
    int local_rank() const override { return rank_; }
    int local_size() const override { return group_.size_; }
    std::string_view kind() const override { return "threads"; }

    std::vector<std::byte> allgather(std::span<const std::byte> mine,
                                     std::vector<std::size_t>* counts) override {
      return collect(mine, counts, true);
    }
    std::vector<std::byte> gather(std::span<const std::byte> mine, int root,
                                  std::vector<std::size_t>* counts) override {
      auto out = collect(mine, counts, rank_ == root);
      if (rank_ != root && counts) counts->clear();
      return out;
    }
    void broadcast(std::vector<std::byte>& data, int root) override {
      if (rank_ == root) group_.slots_[0] = data;
      group_.barrier_.arrive_and_wait();
      if (rank_ != root) data = group_.slots_[0];
      group_.barrier_.arrive_and_wait();
    }
    void send(std::span<const std::byte> bytes, int to) override {
      auto& box = group_.box(rank_, to);
      std::lock_guard lock(box.mutex);
      box.messages.emplace_back(bytes.begin(), bytes.end());
      box.ready.notify_one();
    }
    std::vector<std::byte> receive(int from) override {
      auto& box = group_.box(from, rank_);
      std::unique_lock lock(box.mutex);
      box.ready.wait(lock, [&] { return !box.messages.empty(); });
      auto out = std::move(box.messages.front());
      box.messages.pop_front();
      return out;
    }
    void barrier() override { group_.barrier_.arrive_and_wait(); }
    [[noreturn]] void abort_all(int, std::string_view message) override {
      // A test that gets here has a bug: the ranks could not agree.
      std::fprintf(stderr, "abort_all: %.*s\n", static_cast<int>(message.size()), message.data());
      std::abort();
    }

   private:
    std::vector<std::byte> collect(std::span<const std::byte> mine, std::vector<std::size_t>* counts,
                                   bool keep) {
      group_.slots_[static_cast<std::size_t>(rank_)].assign(mine.begin(), mine.end());
      group_.barrier_.arrive_and_wait();
      std::vector<std::byte> out;
      if (counts) counts->clear();
      if (keep)
        for (const auto& slot : group_.slots_) {
          out.insert(out.end(), slot.begin(), slot.end());
          if (counts) counts->push_back(slot.size());
        }
      group_.barrier_.arrive_and_wait();  // slots are reused by the next collective
      return out;
    }

    ThreadRanks& group_;
    int rank_;
  };

  // fn(rank's communicator) on every rank; the first exception (by rank) is rethrown.
  void run(const std::function<void(Communicator&)>& fn) {
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size_));
    std::vector<std::thread> threads;
    for (int r = 0; r < size_; ++r)
      threads.emplace_back([&, r] {
        Rank comm(*this, r);
        try {
          fn(comm);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

 private:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::vector<std::byte>> messages;
  };
  Mailbox& box(int from, int to) { return boxes_[static_cast<std::size_t>(from * size_ + to)]; }

  int size_;
  std::barrier<> barrier_;
  std::vector<std::vector<std::byte>> slots_;
  std::vector<Mailbox> boxes_;
};

inline void run_ranks(int size, const std::function<void(Communicator&)>& fn) {
  ThreadRanks group(size);
  group.run(fn);
}

}  // namespace molaccel::testing

// The pool of page-locked staging memory that every engine's GPU pipeline takes its host blocks
// from (one per Resources handle; see PinnedPool in runtime.hpp).
#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "molaccel/runtime.hpp"
#include "runtime/device_hooks.hpp"

namespace molaccel {

struct PinnedBlock::Store {
  // Blocks handed back, kept for the next take(); bounded so that one large job does not pin
  // memory for the rest of the process.
  static constexpr std::size_t kMaxBlocks = 32;
  struct Kept {
    std::byte* data;
    std::size_t bytes;
    bool page_locked;
  };
  mutable std::mutex mutex;
  std::vector<Kept> kept;

  static void release(const Kept& block) noexcept {
    if (block.page_locked)
      detail::free_page_locked(block.data);
    else
      delete[] block.data;
  }
  void give(Kept block) noexcept {
    {
      std::lock_guard lock(mutex);
      if (kept.size() < kMaxBlocks) {
        kept.push_back(block);
        return;
      }
    }
    release(block);
  }
  ~Store() {
    for (const Kept& block : kept) release(block);
  }
};

PinnedBlock::~PinnedBlock() {
  if (data_) store_->give({data_, bytes_, page_locked_});
}

PinnedBlock::PinnedBlock(PinnedBlock&& other) noexcept
    : store_(std::move(other.store_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      page_locked_(std::exchange(other.page_locked_, false)) {}

PinnedBlock& PinnedBlock::operator=(PinnedBlock&& other) noexcept {
  if (this != &other) {
    if (data_) store_->give({data_, bytes_, page_locked_});
    store_ = std::move(other.store_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    page_locked_ = std::exchange(other.page_locked_, false);
  }
  return *this;
}

PinnedPool::PinnedPool() : store_(std::make_shared<PinnedBlock::Store>()) {}

PinnedBlock PinnedPool::take(std::size_t bytes) {
  PinnedBlock block;
  block.store_ = store_;
  if (bytes == 0) return block;
  {
    std::lock_guard lock(store_->mutex);
    auto& kept = store_->kept;
    auto best = kept.end();
    for (auto it = kept.begin(); it != kept.end(); ++it)
      if (it->bytes >= bytes && (best == kept.end() || it->bytes < best->bytes)) best = it;
    if (best != kept.end()) {
      block.data_ = best->data;
      block.bytes_ = best->bytes;
      block.page_locked_ = best->page_locked;
      kept.erase(best);
      return block;
    }
  }
  if (void* p = detail::allocate_page_locked(bytes)) {
    block.data_ = static_cast<std::byte*>(p);
    block.page_locked_ = true;
  } else {
    block.data_ = new std::byte[bytes];
  }
  block.bytes_ = bytes;
  return block;
}

std::size_t PinnedPool::kept_bytes() const {
  std::lock_guard lock(store_->mutex);
  std::size_t total = 0;
  for (const auto& block : store_->kept) total += block.bytes;
  return total;
}

PinnedPool& Resources::pinned_pool() const {
  return pool().pinned_pool();
}

}  // namespace molaccel

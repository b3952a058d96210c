// The bounded probe table of the sorted-hp6 kernel (host and device): linear probing over
// kBoundedSlots physical slots, keys hashed into the first kBoundedHashed of them, probes that
// never wrap. The host planner simulates a query group's insertion (BoundedTablePlanner) and
// closes the group before its table would fill the last slot, so every probe on the device ends
// at a match or a free slot inside the array without a wrap-around step (one instruction less per
// probe than the power-of-two tables). Linear probing without deletions fills the same set of
// slots whatever the insertion order (each key takes the first free slot at or after its home at
// the moment it is placed, and a slot once taken stays taken), so the host's serial simulation
// decides for the device's concurrent atomicCAS insertion.
//
// Size: 3,136 slots x 8 bytes (24.5 KiB) with the kernel's 12.1 KiB of static shared memory and
// the 1 KiB the driver reserves per block is 37.6 KiB: 6 blocks per SM in the H100's 228 KiB,
// where the 4,096-slot table (32 KiB) allows 5.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__CUDACC__)
#define MOLACCEL_LINGO_BT_HD __host__ __device__ __forceinline__
#else
#define MOLACCEL_LINGO_BT_HD inline
#endif

namespace molaccel::lingo::detail {

constexpr std::uint32_t kBoundedHashed = 3072;                       // home slots
constexpr std::uint32_t kBoundedSlots = kBoundedHashed + 64;         // physical slots (probe tail)
constexpr std::uint32_t kBoundedMaxDistinct = kBoundedHashed / 2;    // load <= 1/2 of the home range
constexpr std::uint32_t kBoundedEmpty = 0xffffffffu;

// Home slot of a feature: the high half of (multiplicative hash x kBoundedHashed), i.e. the hash
// scaled to [0, kBoundedHashed) (for a power of two this is the power-of-two tables' shift).
MOLACCEL_LINGO_BT_HD std::uint32_t bounded_home(std::uint32_t feature) {
  const std::uint32_t h = feature * 2654435761u;
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(h) * kBoundedHashed) >> 32);
}

// Host twin of the device insertion: a group's table, filled query by query; a query whose
// features would exceed kBoundedMaxDistinct distinct features or reach the last physical slot is
// rolled back and refused (the group closes before it).
class BoundedTablePlanner {
 public:
  BoundedTablePlanner() : keys_(kBoundedSlots, kBoundedEmpty) {}

  std::uint32_t distinct() const { return static_cast<std::uint32_t>(used_.size()); }

  // Adds the (distinct within the query) features [f, f + n); false (and no change) when the
  // table could not hold them.
  bool try_add(const std::uint32_t* f, std::size_t n) {
    const std::size_t before = used_.size();
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t s = bounded_home(f[i]);
      while (keys_[s] != kBoundedEmpty && keys_[s] != f[i]) ++s;  // the last slot is always free
      if (keys_[s] == f[i]) continue;
      if (s + 1 >= kBoundedSlots || used_.size() + 1 > kBoundedMaxDistinct) {
        while (used_.size() > before) {  // undo this query's insertions (latest first)
          keys_[used_.back()] = kBoundedEmpty;
          used_.pop_back();
        }
        return false;
      }
      keys_[s] = f[i];
      used_.push_back(s);
    }
    return true;
  }

  void clear() {
    for (std::uint32_t s : used_) keys_[s] = kBoundedEmpty;
    used_.clear();
  }

  // The slot holding `feature` or the free slot where its probe stops (for tests).
  std::uint32_t probe_end(std::uint32_t feature) const {
    std::uint32_t s = bounded_home(feature);
    while (keys_[s] != kBoundedEmpty && keys_[s] != feature) ++s;
    return s;
  }
  const std::vector<std::uint32_t>& keys() const { return keys_; }

 private:
  std::vector<std::uint32_t> keys_;
  std::vector<std::uint32_t> used_;  // occupied slots, in insertion order
};

}  // namespace molaccel::lingo::detail

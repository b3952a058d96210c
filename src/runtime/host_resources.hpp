// What of the host a process uses: GPUs listed without creating their contexts, the free memory
// of one GPU, the CPUs this process may use, its share of the host's CPUs when several processes
// of one launch (MPI ranks) run there, large fresh memory faulted in on several threads, and
// positioned writes of whole buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::detail {

// gpu_list() without creating any context (free_memory as last queried, 0 if never): for choosing
// devices, e.g. one MPI rank's, without touching the others (a context costs 100s of ms and
// device memory).
std::vector<GpuInfo> gpu_properties();
// Free memory of one GPU now (0 if there is no such GPU); creates its context if needed.
std::size_t gpu_free_memory(int device);

// CPUs in this process's affinity mask (what taskset, a cpuset or a launcher allows).
int usable_cpus();
// CPUs online on this host.
int online_cpus();
// Launchers bind processes to CPUs (Open MPI: one core per rank when there are at most two), which
// would run molaccel's threads on one core. When the mask is narrower than this process's share of
// the host (online / local_size), widens it to the share: CPUs [local_rank * share, +share).
// Returns what it did, in words (empty when nothing was changed).
std::string claim_cpu_share(int local_rank, int local_size);

// Faults in the whole pages of fresh memory [data, data + bytes) on up to 8 threads (Linux's
// MADV_POPULATE_WRITE: the kernel's zeroing of new pages, in parallel, where one thread writing
// hundreds of MB of new memory spends most of its time in page faults). Does nothing below 8 MB
// or where the kernel lacks it (before Linux 5.14); the memory's contents are not changed.
void populate_pages(void* data, std::size_t bytes) noexcept;

// Gives the whole pages of [data, data + bytes) back to the kernel on up to 8 threads (MADV_DONTNEED:
// their contents become zeros), so that freeing a large array afterwards, or the process's exit,
// does not return them one at a time on one thread. Does nothing below 8 MB. For memory about to be
// freed; the pages around an allocation's ends (which hold the allocator's records) are kept.
void release_pages(void* data, std::size_t bytes) noexcept;

// Frees `v`'s storage, its pages given back by release_pages first.
template <class T>
void free_in_parallel(std::vector<T>& v) noexcept {
  release_pages(v.data(), v.capacity() * sizeof(T));
  std::vector<T>().swap(v);
}

// v.resize(n), the new elements' pages faulted in by populate_pages first: the value-initialisation
// (one thread) then runs at memory speed. For large arrays that the caller fills on every core.
template <class T>
void resize_populated(std::vector<T>& v, std::size_t n) {
  if (n > v.size()) {
    v.reserve(n);
    populate_pages(v.data() + v.size(), (n - v.size()) * sizeof(T));
  }
  v.resize(n);
}

// Writes all of [data, data + bytes) at `offset` of the file `fd` (pwrite, continued after a short
// write or EINTR; thread-safe). False on an error (errno says which).
bool write_all_at(int fd, std::uint64_t offset, const void* data, std::size_t bytes) noexcept;

}  // namespace molaccel::detail

// Arguments of a test process that are not Google Test's. `--sanitizer-sizes` (passed by
// scripts/compute-sanitizer.sh after a GPU test's own arguments): the GPU tests that take minutes
// under compute-sanitizer (align's long sequences, linalg's solver sweeps) run smaller
// inputs, covering the same kernels and code paths. Read from /proc/self/cmdline, so that tests
// built on gtest_main need no main of their own.
#pragma once

#include <cstddef>
#include <fstream>
#include <iterator>
#include <string>

namespace molaccel::testing {

inline bool has_test_argument(const std::string& argument) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  while (at < all.size()) {
    const std::size_t end = all.find('\0', at);
    if (all.compare(at, (end == std::string::npos ? all.size() : end) - at, argument) == 0) return true;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return false;
}

inline bool sanitizer_sizes() {
  static const bool on = has_test_argument("--sanitizer-sizes");
  return on;
}

// Under --sanitizer-sizes a sweep over many combinations runs every `every`-th case (true for the
// cases that run; always true without the argument). Callers number their cases so that the
// numbering rotates (a geometry's index plus a call count), so each geometry or form still runs,
// in some of the combinations. The sanitizers check how a kernel synchronises and accesses memory,
// which the values it computes on do not change.
inline bool sanitizer_sample(std::size_t case_number, std::size_t every) {
  return !sanitizer_sizes() || case_number % every == 0;
}

}  // namespace molaccel::testing

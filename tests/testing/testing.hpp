// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "molaccel/runtime.hpp"

namespace molaccel::testing {

// True when this build has CUDA and a GPU is usable.
bool gpu_available();

// Skips the current test (reported as SKIPPED by CTest) when there is no GPU.
#define MOLACCEL_REQUIRE_GPU()                                        \
  do {                                                                \
    if (!::molaccel::testing::gpu_available())                        \
      GTEST_SKIP() << "no GPU: " << ::molaccel::gpu_absence_reason(); \
  } while (0)

// Skips the current test when NVRTC cannot be loaded.
#define MOLACCEL_REQUIRE_NVRTC()                                               \
  do {                                                                         \
    if (!::molaccel::nvrtc_available()) GTEST_SKIP() << "NVRTC not available"; \
  } while (0)

// The repository root, the bundled data/ folder, and ../shared/data (may not exist).
std::filesystem::path source_dir();
std::filesystem::path data_dir();
std::filesystem::path shared_data_dir();

// A fresh, empty temporary directory removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& content);

}  // namespace molaccel::testing

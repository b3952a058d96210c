#include "testing/testing.hpp"

#include <fstream>
#include <random>
#include <sstream>

namespace molaccel::testing {

namespace {
// Every test program that links this file waits for the library's background work (a JIT kernel
// compiling for the disk cache) before main returns: finish_background_work (runtime.hpp).
class FinishBackgroundWork : public ::testing::Environment {
 public:
  void TearDown() override { finish_background_work(); }
};
[[maybe_unused]] const ::testing::Environment* const finish_background_work_at_end =
    ::testing::AddGlobalTestEnvironment(new FinishBackgroundWork);
}  // namespace

bool gpu_available() {
  static const bool available = build_info().cuda && !gpu_list().empty();
  return available;
}

std::filesystem::path source_dir() {
  return MOLACCEL_SOURCE_DIR;
}
std::filesystem::path data_dir() {
  return source_dir() / "data";
}
std::filesystem::path shared_data_dir() {
  return source_dir().parent_path() / "shared" / "data";
}

TempDir::TempDir() {
  std::random_device rd;
  auto base = std::filesystem::temp_directory_path();
  for (int i = 0; i < 100; ++i) {
    auto candidate = base / fmt::format("molaccel-test-{:08x}", rd());
    std::error_code ec;
    if (std::filesystem::create_directory(candidate, ec)) {
      path_ = candidate;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

}  // namespace molaccel::testing

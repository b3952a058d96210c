// The environment is for users, not a switchboard for kernels: molaccel reads only the variables
// documented in the README. A new getenv anywhere in the library, the CLI or the public headers
// fails here until it is added to that list (and documented) or replaced by a tuning parameter.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

const std::set<std::string>& documented_variables() {
  static const std::set<std::string> names = {
      // molaccel's own (README, "Environment")
      "MOLACCEL_CACHE_DIR", "MOLACCEL_DUMP_KERNELS", "MOLACCEL_NVRTC_LIBRARY", "MOLACCEL_DATA_DIR",
      "MOLACCEL_CUDA_DEBUG_SYNC", "MOLACCEL_SIMD", "MOLACCEL_TRACE",
      // the system's, read for their usual meaning
      "XDG_CACHE_HOME", "HOME", "CUDA_HOME", "CUDA_PATH",
      // MPI launchers' (src/runtime/distributed.cpp): whether mpirun/srun started this process and
      // how many it started, so that MPI is initialised only under a launcher and a build without
      // MPI can refuse to run the whole job once per process. Read, never used to choose kernels.
      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMIX_RANK"};
  return names;
}

TEST(Environment, OnlyDocumentedVariablesAreRead) {
  const std::filesystem::path root = MOLACCEL_SOURCE_DIR;
  // getenv / secure_getenv with whatever stands between the parentheses.
  const std::regex call(R"(\b(?:secure_)?getenv\s*\(\s*([^)]*)\))");
  const std::regex literal(R"re(^"([A-Za-z0-9_]+)"$)re");
  int files = 0;
  for (const char* dir : {"src", "apps", "include"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / dir)) {
      const auto ext = entry.path().extension().string();
      if (!entry.is_regular_file() ||
          !(ext == ".cpp" || ext == ".hpp" || ext == ".cu" || ext == ".cuh" || ext == ".h"))
        continue;
      ++files;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string source = text.str();
      const auto relative = std::filesystem::relative(entry.path(), root).string();
      for (std::sregex_iterator it(source.begin(), source.end(), call), end; it != end; ++it) {
        const std::string argument = (*it)[1].str();
        std::smatch name;
        if (!std::regex_match(argument, name, literal)) {
          ADD_FAILURE() << relative << ": getenv(" << argument
                        << ") reads a variable whose name is not written out; name it in the call";
          continue;
        }
        EXPECT_TRUE(documented_variables().count(name[1].str()))
            << relative << " reads " << name[1].str()
            << ", which is not a documented user setting: pass tuning explicitly (tuning_for), or document "
               "the variable in the README and add it to this list";
      }
    }
  }
  EXPECT_GT(files, 50) << "the sources were not found under " << root;
}

}  // namespace

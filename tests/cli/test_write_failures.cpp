// A full disk while writing, run as processes: the same exit code (4, README) in every command and
// no file, partial or temporary, left under the output's name or beside it. The file size limit
// (RLIMIT_FSIZE, with SIGXFSZ ignored so that write() fails with EFBIG) stands in for a full disk,
// whose ENOSPC is met through /dev/full.

#include <algorithm>
#include <sstream>

#include "testing/processes.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

using molaccel::testing::TempDir;

using molaccel::testing::quoted;

// The CLI with files limited to `kib` KiB (0: no limit).
int run_limited(const std::string& arguments, int kib) {
  return molaccel::testing::exit_code_with_file_limit(MOLACCEL_CLI_PATH, arguments, kib);
}

// Whether the CLI was built with `engine` (MOLACCEL_ENGINES, comma-separated).
bool built_with(const std::string& engine) {
  return (std::string(",") + MOLACCEL_CLI_ENGINES + ",").find("," + engine + ",") != std::string::npos;
}

std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CliWriteFailures, EveryCommandExitsFourAndLeavesNoFile) {
  TempDir dir;
  const auto out = dir / "out";
  std::filesystem::create_directories(out);
  const auto data = molaccel::testing::data_dir();
  // 40 molecules: a 6.4 KB matrix; a water orbital on a 0.3 A grid: 40 KB of cube text; 20000
  // two-residue sequences: a 160 KB offsets.bin. Files are limited to 1 KiB.
  std::string smiles, fasta;
  {
    std::istringstream all(molaccel::testing::read_file(data / "lingo" / "demo4096.smi"));
    std::string line;
    for (int i = 0; i < 40 && std::getline(all, line); ++i) smiles += line + "\n";
    for (int i = 0; i < 20000; ++i) fasta += ">s" + std::to_string(i) + "\nWW\n";
  }
  molaccel::testing::write_file(dir / "m.smi", smiles);
  molaccel::testing::write_file(dir / "db.fa", fasta);
  const std::string molden = quoted(data / "orbital" / "h2o_631gs.molden");
  const std::vector<std::pair<std::string, std::string>> runs{
      {"lingo matrix " + quoted(dir / "m.smi") + " -o " + quoted(out / "m.npy"), "lingo matrix"},
      {"orbital grid " + molden + " --device cpu --orbital homo --spacing 0.3 -o " + quoted(out / "h.cube"),
       "orbital grid"},
      {"align makedb " + quoted(dir / "db.fa") + " -o " + quoted(out / "db"), "align makedb"},
  };
  for (const auto& [arguments, name] : runs) {
    if (!built_with(name.substr(0, name.find(' ')))) continue;
    EXPECT_EQ(run_limited(arguments, 1), 4) << name;
    EXPECT_TRUE(entries(out).empty()) << name << ": left " << (entries(out).empty() ? "" : entries(out)[0]);
    EXPECT_EQ(run_limited(arguments, 0), 0) << name << " without the limit";
    std::filesystem::remove_all(out);
    std::filesystem::create_directories(out);
  }
  // A device with no space: written through (not replaced), ENOSPC, the same exit code.
  if (!built_with("orbital")) return;
  EXPECT_EQ(
      run_limited("orbital grid " + molden + " --device cpu --orbital homo --spacing 0.3 -o /dev/full", 0),
      4);
}

}  // namespace
}  // namespace molaccel

// `molaccel align search --json`: the report carries the time of each stage.
#include <cstdlib>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "testing/testing.hpp"

namespace {

using molaccel::testing::data_dir;
using molaccel::testing::read_file;
using molaccel::testing::TempDir;

TEST(AlignReport, StagesInJson) {
  TempDir dir;
  const auto queries = data_dir() / "align" / "demo_queries.fasta",
             db = data_dir() / "align" / "demo_db.fasta";
  for (const char* traceback : {"", " --no-traceback"}) {
    const std::string command = fmt::format(
        "{} --json {} align search {} {} -k 3 --device cpu{} -o {} > /dev/null 2>&1", MOLACCEL_CLI_PATH,
        (dir / "r.json").string(), queries.string(), db.string(), traceback, (dir / "h.tsv").string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const std::string report = read_file(dir / "r.json");
    for (const char* key :
         {"\"stages\"", "\"read\"", "\"load\"", "\"compute\"", "\"traceback\"", "\"write\""})
      EXPECT_NE(report.find(key), std::string::npos) << "no " << key << " in " << report;
  }
}

}  // namespace

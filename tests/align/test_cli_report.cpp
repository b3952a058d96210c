// `molaccel align search --json`: the report carries the time of each stage, adding up to the
// command's time.
#include <cstdlib>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
         {"\"stages\"", "\"read\"", "\"load\"", "\"start\"", "\"compute\"", "\"traceback\"", "\"write\""})
      EXPECT_NE(report.find(key), std::string::npos) << "no " << key << " in " << report;
    // The stages add up to the command's time; the process's start before it is measured apart.
    const auto json = nlohmann::json::parse(report);
    double sum = 0;
    for (const auto& [name, seconds] : json.at("stages").items()) {
      EXPECT_GE(seconds.get<double>(), 0.0) << name;
      sum += seconds.get<double>();
    }
    EXPECT_NEAR(sum, json.at("total_seconds").get<double>(), 1e-6);
    EXPECT_GE(json.at("before_start_seconds").get<double>(), 0.0);
    EXPECT_LT(json.at("before_start_seconds").get<double>(), 60.0);
  }
}

// `align makedb --json`: read, sort and write, adding up to the command's time.
TEST(AlignReport, MakedbStagesInJson) {
  TempDir dir;
  const std::string command = fmt::format(
      "{} -q --json {} align makedb {} -o {} > /dev/null 2>&1", MOLACCEL_CLI_PATH, (dir / "m.json").string(),
      (data_dir() / "align" / "demo_db.fasta").string(), (dir / "db").string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto json = nlohmann::json::parse(read_file(dir / "m.json"));
  double sum = 0;
  for (const char* stage : {"read", "sort", "write"}) {
    ASSERT_TRUE(json.at("stages").contains(stage)) << stage;
    EXPECT_GE(json.at("stages").at(stage).get<double>(), 0.0) << stage;
    sum += json.at("stages").at(stage).get<double>();
  }
  EXPECT_NEAR(sum, json.at("total_seconds").get<double>(), 1e-6);
  EXPECT_EQ(json.at("sequences").get<std::size_t>(), 400u);
}

// --device auto: the demo queries against the demo database are a job for the CPU (the estimate
// from the inputs' sizes and the choice in the report), with the hits of --device cpu.
TEST(AlignReport, AutoRunsASmallSearchOnTheCpu) {
  TempDir dir;
  const auto queries = data_dir() / "align" / "demo_queries.fasta",
             db = data_dir() / "align" / "demo_db.fasta";
  for (const char* device : {"auto", "cpu"}) {
    const std::string command =
        fmt::format("{} --json {} align search {} {} -k 3 --device {} -o {} > /dev/null 2>&1",
                    MOLACCEL_CLI_PATH, (dir / (std::string(device) + ".json")).string(), queries.string(),
                    db.string(), device, (dir / (std::string(device) + ".tsv")).string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  const auto json = nlohmann::json::parse(read_file(dir / "auto.json"));
  EXPECT_LT(json.at("cpu_seconds_estimate").get<double>(), 0.3);
  EXPECT_NE(json.at("device_choice").get<std::string>().find("small job"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(read_file(dir / "cpu.json")).contains("device_choice"));
  EXPECT_EQ(read_file(dir / "auto.tsv"), read_file(dir / "cpu.tsv"));
}

}  // namespace

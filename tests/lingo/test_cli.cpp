// The `molaccel lingo` commands end to end: outputs, exit codes, no partial file on bad input.
#include <algorithm>
#include <cstdlib>

#include "lingo_test_util.hpp"

namespace molaccel::lingo {
namespace {

using molaccel::testing::read_file;
using molaccel::testing::TempDir;
using molaccel::testing::write_file;

int run_cli(const std::string& args) {
  const std::string command = std::string(MOLACCEL_CLI_PATH) + " " + args + " > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(LingoCli, SearchWritesRankedHits) {
  TempDir dir;
  write_file(dir / "q.smi", "c1ccccc1O phenol\nCCCCO butanol\n");
  write_file(dir / "db.smi", "CCCCO e\nc1ccccc1O p\nCCCO pr\nc1ccccc1N an\n");
  ASSERT_EQ(run_cli(fmt::format("lingo search {} {} -k 2 --device cpu -o {}", (dir / "q.smi").string(),
                                (dir / "db.smi").string(), (dir / "hits.tsv").string())),
            0);
  const std::string hits = read_file(dir / "hits.tsv");
  EXPECT_EQ(hits.substr(0, hits.find('\n')), "query\ttarget\tsimilarity\trank");
  EXPECT_NE(hits.find("phenol\tp\t1\t1\n"), std::string::npos) << hits;
  EXPECT_NE(hits.find("butanol\te\t1\t1\n"), std::string::npos) << hits;
}

// --device auto: a search this small runs on the CPU (the estimate, from the files' sizes, and the
// choice in the report), with the hits of --device cpu.
TEST(LingoCli, AutoRunsASmallSearchOnTheCpu) {
  TempDir dir;
  write_file(dir / "q.smi", "c1ccccc1O phenol\nCCCCO butanol\n");
  write_file(dir / "db.smi", "CCCCO e\nc1ccccc1O p\nCCCO pr\nc1ccccc1N an\n");
  for (const char* device : {"auto", "cpu"})
    ASSERT_EQ(run_cli(fmt::format("lingo search {} {} -k 2 --device {} -o {} --json {}",
                                  (dir / "q.smi").string(), (dir / "db.smi").string(), device,
                                  (dir / (std::string(device) + ".tsv")).string(),
                                  (dir / (std::string(device) + ".json")).string())),
              0);
  const std::string report = read_file(dir / "auto.json");
  EXPECT_NE(report.find("\"cpu_seconds_estimate\""), std::string::npos) << report;
  EXPECT_NE(report.find("small job"), std::string::npos) << report;
  EXPECT_EQ(read_file(dir / "cpu.json").find("device_choice"), std::string::npos);
  EXPECT_EQ(read_file(dir / "auto.tsv"), read_file(dir / "cpu.tsv"));
  // A backend asked for is left to decide (no estimate, no choice).
  ASSERT_EQ(
      run_cli(fmt::format("lingo search {} {} -k 2 --backend cpu -o {} --json {}", (dir / "q.smi").string(),
                          (dir / "db.smi").string(), (dir / "b.tsv").string(), (dir / "b.json").string())),
      0);
  EXPECT_EQ(read_file(dir / "b.json").find("cpu_seconds_estimate"), std::string::npos);
}

TEST(LingoCli, InvalidInputFailsWithoutOutput) {
  TempDir dir;
  write_file(dir / "bad.smi", "CCO\nCC(C\n");
  const auto out = dir / "m.npy";
  EXPECT_EQ(run_cli(fmt::format("lingo matrix {} -o {}", (dir / "bad.smi").string(), out.string())), 1);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(
      run_cli(fmt::format("lingo matrix {} -o {} --skip-invalid", (dir / "bad.smi").string(), out.string())),
      0);
  EXPECT_TRUE(std::filesystem::exists(out));
  EXPECT_NE(
      run_cli(fmt::format("lingo matrix {} -o {}", (dir / "bad.smi").string(), (dir / "m.csv").string())), 0);
}

TEST(LingoCli, MatrixOutputTypes) {
  TempDir dir;
  write_file(dir / "m.smi", "c1ccccc1O phenol\nCCCCO butanol\nCCCO propanol\n");
  const auto in = (dir / "m.smi").string();
  ASSERT_EQ(run_cli(fmt::format("lingo matrix {} --device cpu --output-type u8 -o {}", in,
                                (dir / "m.npy").string())),
            0);
  const std::string npy = read_file(dir / "m.npy");
  EXPECT_NE(npy.find("'descr': '|u1'"), std::string::npos);
  ASSERT_EQ(npy.size(), 128u + 9u);
  EXPECT_EQ(static_cast<unsigned char>(npy[128]), 255u);  // phenol against itself
  EXPECT_EQ(run_cli(fmt::format("lingo matrix {} --device cpu --output-type fp16 -o {}", in,
                                (dir / "h.npy").string())),
            0);
  EXPECT_NE(read_file(dir / "h.npy").find("'descr': '<f2'"), std::string::npos);
  // TSV prints fp32 only; an unknown type is rejected.
  EXPECT_NE(run_cli(fmt::format("lingo matrix {} --device cpu --output-type u8 -o {}", in,
                                (dir / "m.tsv").string())),
            0);
  EXPECT_FALSE(std::filesystem::exists(dir / "m.tsv"));
  EXPECT_NE(run_cli(fmt::format("lingo matrix {} --output-type fp64 -o {}", in, (dir / "x.npy").string())),
            0);
}

TEST(LingoCli, ClusterAndNeighborsFromCsv) {
  TempDir dir;
  write_file(dir / "m.csv", "name,smiles\na,CCCCCCO\nb,CCCCCCN\nc,c1ccccc1\nd,CCCCCCO\n");
  ASSERT_EQ(run_cli(fmt::format("lingo cluster {} --smiles-column smiles --threshold 0.9 --device cpu -o {}",
                                (dir / "m.csv").string(), (dir / "c.tsv").string())),
            0);
  const std::string clusters = read_file(dir / "c.tsv");
  EXPECT_NE(clusters.find("a\t0\t1\n"), std::string::npos) << clusters;  // a and d identical: cluster 0
  EXPECT_NE(clusters.find("d\t0\t0\n"), std::string::npos) << clusters;
  ASSERT_EQ(run_cli(fmt::format("lingo neighbors {} --smiles-column 2 --threshold 0.5 -o {}",
                                (dir / "m.csv").string(), (dir / "n.tsv").string())),
            0);
  EXPECT_NE(read_file(dir / "n.tsv").find("a\td\t1\t0\n"), std::string::npos);
}

// Issue 24, defect 13: a tab in a name keeps every TSV line at its column count.
TEST(LingoCli, TabsInNamesKeepTheTsvColumns) {
  TempDir dir;
  write_file(dir / "q.smi", "c1ccccc1O phenol\twith tab\n");
  write_file(dir / "db.smi", "CCCCO but\tanol\nc1ccccc1O p\n");
  ASSERT_EQ(run_cli(fmt::format("lingo search {} {} -k 2 --device cpu -o {}", (dir / "q.smi").string(),
                                (dir / "db.smi").string(), (dir / "hits.tsv").string())),
            0);
  const std::string hits = read_file(dir / "hits.tsv");
  std::size_t lines = 0;
  for (std::size_t begin = 0; begin < hits.size(); ++lines) {
    const auto end = hits.find('\n', begin);
    const std::string line = hits.substr(begin, end - begin);
    EXPECT_EQ(std::count(line.begin(), line.end(), '\t'), 3) << line;
    begin = end + 1;
  }
  EXPECT_EQ(lines, 3u);
  EXPECT_NE(hits.find("phenol with tab\tp\t1\t1\n"), std::string::npos) << hits;
  ASSERT_EQ(run_cli(fmt::format("lingo cluster {} --threshold 0.5 --device cpu -o {}",
                                (dir / "db.smi").string(), (dir / "c.tsv").string())),
            0);
  EXPECT_NE(read_file(dir / "c.tsv").find("but anol\t"), std::string::npos);
}

// Issue 24, defect 14: an empty SMILES file is bad input (exit 1, no output), not an empty result.
TEST(LingoCli, EmptyInputIsBadInput) {
  TempDir dir;
  write_file(dir / "empty.smi", "");
  EXPECT_EQ(run_cli(fmt::format("lingo matrix {} --device cpu -o {}", (dir / "empty.smi").string(),
                                (dir / "m.npy").string())),
            1);
  EXPECT_FALSE(std::filesystem::exists(dir / "m.npy"));
}

}  // namespace
}  // namespace molaccel::lingo

// Reading a .smi file across ranks (ranks as threads): each rank parses a byte slice cut at line
// boundaries, and every rank ends with exactly read_molecules' set, names (line numbers for unnamed
// molecules), statistics and errors, whatever the slices' boundaries cut: CRLF, a byte order mark,
// blank lines, a line longer than a slice, no final newline, invalid lines.
#include "lingo_test_util.hpp"
#include "testing/thread_ranks.hpp"

namespace molaccel::lingo {
namespace {

using molaccel::testing::TempDir;
using molaccel::testing::write_file;

void expect_same_set(const MoleculeSet& a, const MoleculeSet& b, const std::string& what) {
  EXPECT_EQ(a.names, b.names) << what;
  EXPECT_EQ(a.offsets, b.offsets) << what;
  EXPECT_EQ(a.keys32, b.keys32) << what;
  EXPECT_EQ(a.keys64, b.keys64) << what;
  EXPECT_EQ(a.counts, b.counts) << what;
  EXPECT_EQ(a.magnitudes, b.magnitudes) << what;
}

// A file with a byte order mark, CRLF and LF lines, blank and whitespace-only lines, unnamed
// molecules, one line of 6,000 bytes (longer than most slices) and no newline at the end;
// `invalid` adds unbalanced and control-byte lines.
std::string awkward_file(std::uint32_t seed, bool invalid) {
  const auto smiles = testing::random_smiles_set(seed, 300, 1, 20);
  std::string text = "\xEF\xBB\xBF";
  for (std::size_t i = 0; i < smiles.size(); ++i) {
    const char* end = i % 3 == 0 ? "\r\n" : "\n";
    if (i % 17 == 5) text += "\n";
    if (i % 23 == 9) text += "  \t\r\n";
    if (invalid && i % 41 == 13) text += std::string("C(C bad") + end;
    if (invalid && i % 53 == 20) text += std::string("CC\x01O ctl") + end;
    if (i == 150) text += std::string(6000, 'C') + " long" + end;
    text += smiles[i];
    if (i % 4 != 1) text += " m" + std::to_string(i);
    if (i + 1 < smiles.size()) text += end;
  }
  return text;
}

TEST(LingoReadAcrossRanks, EveryRankGetsTheOneProcessSet) {
  TempDir dir;
  LingoOptions lingo;
  for (bool invalid : {false, true}) {
    const auto path = dir / (invalid ? "invalid.smi" : "plain.smi");
    write_file(path, awkward_file(invalid ? 7 : 5, invalid));
    ReadOptions read;
    read.skip_invalid = invalid;
    ReadStats one_stats;
    const auto one = read_molecules(path, lingo, read, &one_stats);
    if (invalid) {
      ASSERT_GT(one_stats.skipped_invalid, 0u);
    }
    for (int ranks : {1, 2, 3, 4, 7, 64}) {
      const std::string what = path.filename().string() + ", " + std::to_string(ranks) + " ranks";
      molaccel::testing::run_ranks(ranks, [&](Communicator& comm) {
        ReadStats stats;
        const auto set = read_molecules_across_ranks(comm, path, lingo, read, &stats);
        expect_same_set(set, one, what);
        EXPECT_EQ(stats.lines, one_stats.lines) << what;
        EXPECT_EQ(stats.molecules, one_stats.molecules) << what;
        EXPECT_EQ(stats.skipped_invalid, one_stats.skipped_invalid) << what;
        EXPECT_EQ(stats.first_skipped_line, one_stats.first_skipped_line) << what;
      });
    }
  }
}

// The first invalid line in file order stops every rank with read_molecules' FILE:LINE message,
// also when it lies in a later rank's slice; a file of blank lines gives the one-process error.
TEST(LingoReadAcrossRanks, ErrorsNameTheOneProcessLine) {
  TempDir dir;
  LingoOptions lingo;
  std::string text;
  for (int i = 0; i < 200; ++i) text += i == 170 ? "C(C\r\n" : "CCO\n";
  write_file(dir / "bad.smi", text);
  write_file(dir / "blank.smi", "\n  \n\r\n");
  for (const char* name : {"bad.smi", "blank.smi"}) {
    std::string expected;
    try {
      (void)read_molecules(dir / name, lingo);
    } catch (const InputError& e) {
      expected = e.what();
    }
    ASSERT_FALSE(expected.empty()) << name;
    if (std::string(name) == "bad.smi") {
      ASSERT_NE(expected.find(":171:"), std::string::npos) << expected;
    }
    for (int ranks : {2, 3, 5}) {
      molaccel::testing::run_ranks(ranks, [&](Communicator& comm) {
        try {
          (void)read_molecules_across_ranks(comm, dir / name, lingo);
          ADD_FAILURE() << name << ": no error on rank " << comm.rank();
        } catch (const RankFailure& e) {
          EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
          EXPECT_EQ(e.cause(), RankFailure::Cause::input);
        }
      });
    }
  }
}

}  // namespace
}  // namespace molaccel::lingo

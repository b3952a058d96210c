// Reading molecules in parallel batches and blocks of lines: the same set as building it one
// molecule at a time (make_molecules), across batch and block boundaries; the first invalid line in
// file order is the one reported, and --skip-invalid counts every one.
#include <zlib.h>

#include "lingo_test_util.hpp"

namespace molaccel::lingo {
namespace {

using molaccel::testing::TempDir;
using molaccel::testing::write_file;

void expect_same_set(const MoleculeSet& a, const MoleculeSet& b) {
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.keys32, b.keys32);
  EXPECT_EQ(a.keys64, b.keys64);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_EQ(a.magnitudes, b.magnitudes);
}

// 150,001 molecules: more than two batches, the last one a single molecule.
TEST(LingoParallelRead, SameSetAsOneAtATime) {
  TempDir dir;
  const auto smiles = testing::random_smiles_set(31, 150001, 1, 30);
  std::string text;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < smiles.size(); ++i) {
    // Every third molecule unnamed (its line number), a blank line now and then.
    if (i % 1000 == 7) text += "\n";
    const std::size_t line = i + 1 + (i >= 7 ? (i - 7) / 1000 + 1 : 0);  // blank lines above
    names.push_back(i % 3 ? fmt::format("m{}", i) : std::to_string(line));
    text += i % 3 ? fmt::format("{} m{}\n", smiles[i], i) : smiles[i] + "\n";
  }
  write_file(dir / "many.smi", text);
  for (int q : {3, 6}) {
    LingoOptions options;
    options.q = q;
    expect_same_set(read_molecules(dir / "many.smi", options), make_molecules(smiles, options, names));
  }
}

TEST(LingoParallelRead, FirstInvalidLineInFileOrder) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 70000; ++i) text += "CCO\n";
  text += "CC(C\n";  // line 70001, in the second batch: an unbalanced SMILES
  for (int i = 0; i < 10; ++i) text += "CCO\n";
  text += "C\x01O\n";  // line 70012: a control byte, found while reading
  write_file(dir / "bad.smi", text);
  try {
    read_molecules(dir / "bad.smi", LingoOptions{});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.smi:70001:"), std::string::npos) << e.what();
  }
  ReadOptions skip;
  skip.skip_invalid = true;
  ReadStats stats;
  const auto set = read_molecules(dir / "bad.smi", LingoOptions{}, skip, &stats);
  EXPECT_EQ(set.size(), 70010u);
  EXPECT_EQ(stats.skipped_invalid, 2u);
  EXPECT_EQ(stats.first_skipped_line, 70001u);
  EXPECT_EQ(set.names[70000], "70002");
}

// Several MiB: the text is parsed in blocks of lines on every core. Invalid lines in different
// blocks: the first in file order is reported; line numbers (default names) count across blocks;
// CRLF line ends; the gzip file gives the same set.
TEST(LingoParallelRead, BlocksOfLinesKeepFileOrder) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300000; ++i) text += i % 2 ? "CCO\r\n" : "c1ccccc1N\n";  // about 2.4 MB
  text += "CC(C\n";                                                            // line 300001
  for (int i = 0; i < 10; ++i) text += "CCO named\n";
  text += "C\x01O\n";  // line 300012: a control byte
  for (int i = 0; i < 300000; ++i) text += "CCN\n";
  text += "C)C\n";  // line 600013
  write_file(dir / "blocks.smi", text);
  try {
    read_molecules(dir / "blocks.smi", LingoOptions{});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.smi:300001:"), std::string::npos) << e.what();
  }
  ReadOptions skip;
  skip.skip_invalid = true;
  ReadStats stats;
  const auto set = read_molecules(dir / "blocks.smi", LingoOptions{}, skip, &stats);
  EXPECT_EQ(stats.lines, 600013u);
  EXPECT_EQ(stats.skipped_invalid, 3u);
  EXPECT_EQ(stats.first_skipped_line, 300001u);
  EXPECT_EQ(stats.molecules, 600010u);
  ASSERT_EQ(set.size(), 600010u);
  EXPECT_EQ(set.names[299999], "300000");
  EXPECT_EQ(set.names[300000], "named");
  EXPECT_EQ(set.names[300010], "300013");
  EXPECT_EQ(set.names.back(), "600012");
  std::vector<std::string> smiles, names;
  for (int i = 0; i < 300000; ++i) smiles.push_back(i % 2 ? "CCO" : "c1ccccc1N");
  for (int i = 0; i < 10; ++i) smiles.push_back("CCO");
  for (int i = 0; i < 300000; ++i) smiles.push_back("CCN");
  for (std::size_t i = 0; i < set.size(); ++i) names.push_back(set.names[i]);
  expect_same_set(set, make_molecules(smiles, LingoOptions{}, names));
  // The same text from memory, and gzip-compressed.
  expect_same_set(parse_molecules("blocks.smi", text, LingoOptions{}, skip), set);
  gzFile gz = gzopen((dir / "blocks.smi.gz").c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  expect_same_set(read_molecules(dir / "blocks.smi.gz", LingoOptions{}, skip), set);
}

// Megabytes of blank lines: no molecules, reported at the last line.
TEST(LingoParallelRead, BlankBlocksAreNoMolecules) {
  TempDir dir;
  write_file(dir / "blank.smi", std::string(3u << 20, '\n'));
  try {
    read_molecules(dir / "blank.smi", LingoOptions{});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("blank.smi:{}: no molecules", 3u << 20)),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace molaccel::lingo

// Preprocessing, SMILES validation and the .smi / CSV readers (tier 1: hand-checked cases).
#include <zlib.h>

#include "lingo_test_util.hpp"

namespace molaccel::lingo {
namespace {

using molaccel::testing::TempDir;
using molaccel::testing::write_file;

TEST(LingoPreprocess, PaperRuleRingClosuresBecomeZero) {
  const Preprocessing paper;
  EXPECT_EQ(preprocess("c1ccccc1", paper), "c0ccccc0");
  EXPECT_EQ(preprocess("C1CC2CC1C2", paper), "C0CC0CC0C0");
  EXPECT_EQ(preprocess("c1cc[nH]c1", paper), "c0cc[nH]c0");
  EXPECT_EQ(preprocess("C12C3=C4C5=C1[Fe]23456789", paper), "C00C0=C0C0=C0[Fe]00000000");
}

TEST(LingoPreprocess, PaperRuleKeepsChargesHydrogensIsotopes) {
  const Preprocessing paper;
  EXPECT_EQ(preprocess("[NH3+]CC(=O)[O-]", paper), "[NH3+]CC(=O)[O-]");
  EXPECT_EQ(preprocess("[13CH4]", paper), "[13CH4]");
  EXPECT_EQ(preprocess("N[Co+3](N)N", paper), "N[Co+3](N)N");
  EXPECT_EQ(preprocess("[Fe++]1CC1", paper), "[Fe++]0CC0");
  EXPECT_EQ(preprocess("[O-2]", paper), "[O-2]");
}

TEST(LingoPreprocess, PercentRingClosures) {
  const Preprocessing paper;
  EXPECT_EQ(preprocess("C%12CC%12", paper), "C%0CC%0");
  EXPECT_EQ(preprocess("C9%10CC%10", paper), "C0%0CC%0");
  EXPECT_EQ(preprocess("C%1", paper), "C%0");  // truncated %n: still one ring-closure digit
  EXPECT_EQ(preprocess("C%", paper), "C%");
}

TEST(LingoPreprocess, DigitsAllAndHalogens) {
  Preprocessing all;
  all.digits = DigitMode::all;
  EXPECT_EQ(preprocess("[13CH4]", all), "[00CH0]");
  EXPECT_EQ(preprocess("C%12CC%12", all), "C%00CC%00");
  Preprocessing hal;
  hal.halogens = true;
  EXPECT_EQ(preprocess("ClC(Br)Cl", hal), "LC(R)L");
  EXPECT_EQ(preprocess("Clc1ccccc1", hal), "Lc0ccccc0");
  EXPECT_EQ(preprocess("[Br-]", hal), "[R-]");
}

TEST(LingoPreprocess, RealNciCasesKeepNoTwoDigitRingClosure) {
  const auto smiles = testing::real_smiles("nci_first5k.smi", 5000);
  ASSERT_GT(smiles.size(), 3000u);
  int percent = 0;
  for (const auto& s : smiles) {
    const auto p = preprocess(s, {});
    ASSERT_EQ(p.find("%1"), std::string::npos) << s;
    percent += p.find("%0") != std::string::npos;
  }
  EXPECT_GE(percent, 3);  // lines 2021, 3087, 3400 use %nn
}

TEST(LingoSmilesCheck, AcceptsAndRejects) {
  EXPECT_EQ(smiles_problem("CC(=O)[O-]"), "");
  EXPECT_NE(smiles_problem(""), "");
  EXPECT_NE(smiles_problem("CC(C"), "");
  EXPECT_NE(smiles_problem("CC)C"), "");
  EXPECT_NE(smiles_problem("C[NH+"), "");
  EXPECT_NE(smiles_problem("C[N[H]]"), "");
  EXPECT_NE(smiles_problem("C[N(H)]"), "");
  EXPECT_NE(smiles_problem("C\x01"), "");
  EXPECT_NE(smiles_problem("C\xc3\xa9"), "");
}

TEST(LingoLingos, MultisetOfPackedKeys) {
  MoleculeSet set;
  set.q = 2;
  set.add("m", "CCCC");
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.magnitudes[0], 3u);
  ASSERT_EQ(set.distinct(0), 1u);
  EXPECT_EQ(set.keys32[0], pack_lingo("CC"));
  EXPECT_EQ(set.counts[0], 3u);
  EXPECT_EQ(unpack_lingo(pack_lingo("c1cc"), 4), "c1cc");
  MoleculeSet wide;
  wide.q = 8;
  wide.add("w", "CCOCCOCCO");  // 2 Lingos of length 8
  EXPECT_TRUE(wide.keys32.empty());
  ASSERT_EQ(wide.keys64.size(), 2u);
  EXPECT_EQ(wide.keys64[0], pack_lingo("CCOCCOCC"));
  MoleculeSet tiny;
  tiny.q = 4;
  tiny.add("t", "CC");
  EXPECT_EQ(tiny.magnitudes[0], 0u);
  EXPECT_EQ(tiny.distinct(0), 0u);
}

TEST(LingoReader, SmiNamesAndLineNumbers) {
  const auto set = parse_molecules("x.smi", "CCO ethanol\n\nc1ccccc1\tbenzene ring\nCC\n", {});
  ASSERT_EQ(set.size(), 3u);
  EXPECT_EQ(set.names[0], "ethanol");
  EXPECT_EQ(set.names[1], "benzene ring");
  EXPECT_EQ(set.names[2], "4");  // line number
}

TEST(LingoReader, InvalidLineNamesFileAndLine) {
  try {
    parse_molecules("bad.smi", "CCO a\nCC(C b\nCC c\n", {});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "bad.smi");
    EXPECT_EQ(e.line(), 2u);
  }
  try {
    parse_molecules("bad.smi", "CCO\nC\x01O\n", {});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 2u);
  }
}

TEST(LingoReader, SkipInvalidCounts) {
  ReadOptions read;
  read.skip_invalid = true;
  ReadStats stats;
  const auto set = parse_molecules("bad.smi", "CCO\nCC(C\nC\xff\nCCN\n[NH4+\n", {}, read, &stats);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(stats.skipped_invalid, 3u);
  EXPECT_EQ(stats.first_skipped_line, 2u);
  EXPECT_EQ(set.names[1], "4");
}

TEST(LingoReader, CsvByNameAndIndex) {
  ReadOptions read;
  read.smiles_column = "smiles";
  const std::string csv = "id,smiles,activity\nm1,CCO,1.0\n\"m,2\",\"c1ccccc1\",2\n";
  auto set = parse_molecules("x.csv", csv, {}, read);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.names[0], "m1");
  EXPECT_EQ(set.names[1], "m,2");
  EXPECT_EQ(set.magnitudes[1], 5u);
  read.smiles_column = "2";
  set = parse_molecules("x.csv", csv, {}, read);
  EXPECT_EQ(set.size(), 2u);
  read.smiles_column = "nope";
  EXPECT_THROW(parse_molecules("x.csv", csv, {}, read), InputError);
  read.smiles_column = "smiles";
  try {
    parse_molecules("x.csv", "id,smiles\na,CC(\n", {}, read);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 2u);
  }
}

TEST(LingoReader, GzipAndPlainFilesGiveTheSameSet) {
  TempDir dir;
  const std::string text = "CCO a\nc1ccccc1 b\nCC(=O)[O-] c\n";
  write_file(dir / "m.smi", text);
  gzFile gz = gzopen((dir / "m.smi.gz").c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  const auto plain = read_molecules(dir / "m.smi", {});
  const auto packed = read_molecules(dir / "m.smi.gz", {});
  EXPECT_EQ(plain.names, packed.names);
  EXPECT_EQ(plain.keys32, packed.keys32);
  EXPECT_EQ(plain.counts, packed.counts);
  EXPECT_THROW(read_molecules(dir / "missing.smi", {}), InputError);
}

// Issue 24, defect 6: a .smi.gz cut short gave the molecules before the cut and exit 0.
TEST(LingoReader, TruncatedGzipIsAnInputError) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "CC(=O)Oc1ccccc1C(=O)O aspirin_" + std::to_string(i) + "\n";
  gzFile gz = gzopen((dir / "m.smi.gz").c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  EXPECT_EQ(read_molecules(dir / "m.smi.gz", {}).size(), 5000u);
  const std::string bytes = molaccel::testing::read_file(dir / "m.smi.gz");
  write_file(dir / "cut.smi.gz", bytes.substr(0, bytes.size() * 2 / 3));
  try {
    (void)read_molecules(dir / "cut.smi.gz", {});
    FAIL() << "a truncated .gz was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), (dir / "cut.smi.gz").string());
    EXPECT_GT(e.line(), 0u);
  }
}

// Issue 24, defect 14: an empty SMILES file gave an empty result and exit 0.
TEST(LingoReader, NoMoleculesIsAnInputError) {
  auto expect_no_molecules = [](const std::string& content, const ReadOptions& read, std::size_t line) {
    try {
      (void)parse_molecules("e.smi", content, {}, read);
      ADD_FAILURE() << "accepted: '" << content << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(e.line(), line) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(fmt::format("e.smi:{}: no molecules", line), 0), 0u) << e.what();
    }
  };
  expect_no_molecules("", {}, 1);
  expect_no_molecules("\n  \n\n", {}, 3);
  ReadOptions skip;
  skip.skip_invalid = true;
  expect_no_molecules("CC(\nC[\n", skip, 2);
  ReadOptions csv;
  csv.smiles_column = "smiles";
  expect_no_molecules("id,smiles\n", csv, 1);
}

// Issue 24, defect 14: a UTF-8 byte order mark (Excel's "CSV UTF-8", Notepad) is skipped.
TEST(LingoReader, ByteOrderMarkIsSkipped) {
  const auto smi = parse_molecules("b.smi",
                                   "\xEF\xBB\xBF"
                                   "CCO ethanol\nCC ethane\n",
                                   {});
  ASSERT_EQ(smi.size(), 2u);
  EXPECT_EQ(smi.names[0], "ethanol");
  ReadOptions csv;
  csv.smiles_column = "smiles";
  const auto set = parse_molecules("b.csv",
                                   "\xEF\xBB\xBF"
                                   "smiles,name\nCCO,ethanol\n",
                                   {}, csv);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.names[0], "ethanol");
}

// Issue 24, defect 13: a tab inside a name made extra columns in every TSV output.
TEST(LingoReader, TabsInNamesBecomeSpaces) {
  const auto smi = parse_molecules("t.smi", "CCO ethyl\talcohol\r\nCC\tethane\t\tgas\v1\n", {});
  ASSERT_EQ(smi.size(), 2u);
  EXPECT_EQ(smi.names[0], "ethyl alcohol");
  EXPECT_EQ(smi.names[1], "ethane  gas 1");
  ReadOptions csv;
  csv.smiles_column = "smiles";
  const auto set = parse_molecules("t.csv", "smiles,name\nCCO,\"ethyl\talcohol\"\n", {}, csv);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.names[0], "ethyl alcohol");
  csv.csv_delimiter = '\t';
  const auto tsv = parse_molecules("t.tsv", "smiles\tname\nCCO\t\"ethyl\talcohol\"\n", {}, csv);
  ASSERT_EQ(tsv.size(), 1u);
  EXPECT_EQ(tsv.names[0], "ethyl alcohol");
}

TEST(LingoReader, QOutOfRangeIsAnInputError) {
  LingoOptions o;
  o.q = 9;
  EXPECT_THROW(parse_molecules("x", "CCO\n", o), InputError);
  o.q = 0;
  EXPECT_THROW(make_molecules({"CCO"}, o), InputError);
}

TEST(LingoReader, BundledDemoSetStatistics) {
  const auto set = read_molecules(molaccel::testing::data_dir() / "lingo" / "demo4096.smi", {});
  ASSERT_EQ(set.size(), 4096u);
  double distinct = 0;
  for (std::size_t i = 0; i < set.size(); ++i) distinct += static_cast<double>(set.distinct(i));
  EXPECT_NEAR(distinct / 4096, 29.3, 0.5);  // the SIML paper's Table 1: 29.31 distinct Lingos
}

// subset: molecules in the given order (the GPU neighbours path orders the set by size with it).
TEST(LingoMolecules, SubsetKeepsMoleculesInTheGivenOrder) {
  for (int q : {4, 6}) {
    LingoOptions options;
    options.q = q;
    const auto set = make_molecules({"CCOc1ccccc1", "C", "N#CCCl", "c1ccncc1O"}, options);
    const auto picked = subset(set, {3, 0, 0, 2});
    ASSERT_EQ(picked.size(), 4u);
    EXPECT_EQ(picked.names,
              (std::vector<std::string>{set.names[3], set.names[0], set.names[0], set.names[2]}));
    for (auto [k, i] : {std::pair{0, 3}, std::pair{1, 0}, std::pair{2, 0}, std::pair{3, 2}}) {
      EXPECT_EQ(picked.magnitudes[k], set.magnitudes[i]);
      EXPECT_EQ(similarity(picked, k, set, i, Metric::tanimoto), 1.0f);
      ASSERT_EQ(picked.distinct(k), set.distinct(i));
      for (std::size_t e = 0; e < set.distinct(i); ++e) {
        EXPECT_EQ(picked.key(picked.offsets[k] + e), set.key(set.offsets[i] + e));
        EXPECT_EQ(picked.counts[picked.offsets[k] + e], set.counts[set.offsets[i] + e]);
      }
    }
    EXPECT_EQ(subset(set, {}).size(), 0u);
    EXPECT_THROW(subset(set, {4}), Error);
  }
}

}  // namespace
}  // namespace molaccel::lingo

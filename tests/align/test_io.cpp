// FASTA parsing (errors name file, line, record and position), databases (makedb round trip,
// sorting, shards) and the hits TSV.
#include <zlib.h>

#include <algorithm>

#include "align/align_test_util.hpp"
#include "testing/testing.hpp"

namespace molaccel::align {
namespace {

using molaccel::testing::TempDir;

TEST(AlignFasta, ParsesIdsAndMultiLineRecords) {
  const auto set = parse_fasta("x.fa", ">sp|P1|A first protein\nACDE\nfgh\n\n>P2\nW*xuO\n");
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.ids[0], "sp|P1|A");
  EXPECT_EQ(set.ids[1], "P2");
  EXPECT_EQ(set.sequence(0).size(), 7u);
  EXPECT_EQ(set.sequence(1).size(), 5u);
  EXPECT_EQ(set.sequence(0)[4], encode_residue('F'));
}

TEST(AlignFasta, BadLetterNamesFileLineRecordAndPosition) {
  try {
    parse_fasta("q.fa", ">a\nACD\n>b desc\nAC\nDJK\n");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "q.fa");
    EXPECT_EQ(e.line(), 5u);
    const std::string what = e.what();
    EXPECT_NE(what.find("record 'b'"), std::string::npos) << what;
    EXPECT_NE(what.find("residue 4"), std::string::npos) << what;
    EXPECT_NE(what.find("'J'"), std::string::npos) << what;
  }
  EXPECT_THROW(parse_fasta("e.fa", ""), InputError);
  EXPECT_THROW(parse_fasta("e.fa", "ACD\n"), InputError);         // no header
  EXPECT_THROW(parse_fasta("e.fa", ">a\n>b\nAC\n"), InputError);  // empty record
  EXPECT_THROW(parse_fasta("e.fa", ">\nAC\n"), InputError);       // no id
  EXPECT_THROW(parse_fasta("e.fa", ">a\nA\x01\n"), InputError);
}

TEST(AlignFasta, ReadsGzipFiles) {
  TempDir dir;
  const std::string text = ">a\nACDEFGHIKL\n>b\nMNPQ\n";
  const auto path = dir / "x.fa.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  const auto set = read_fasta(path);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.sequence(0).size(), 10u);
  EXPECT_THROW(read_fasta(dir / "missing.fa"), InputError);
}

// Issue 24, defect 6: a FASTA .gz cut short gave the sequences before the cut and exit 0.
TEST(AlignFasta, TruncatedGzipIsAnInputError) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 3000; ++i) text += ">seq" + std::to_string(i) + " some protein\nACDEFGHIKLMNPQRSTVWY\n";
  const auto path = dir / "x.fa.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  EXPECT_EQ(read_fasta(path).size(), 3000u);
  const std::string bytes = molaccel::testing::read_file(path);
  molaccel::testing::write_file(dir / "cut.fa.gz", bytes.substr(0, bytes.size() - 3));
  try {
    (void)read_fasta(dir / "cut.fa.gz");
    FAIL() << "a truncated .gz was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), (dir / "cut.fa.gz").string());
    EXPECT_GT(e.line(), 0u);
  }
}

// Issue 24, defects 13 and 14: a byte order mark before the first '>' is skipped; an id ends at
// the first space or tab, so ids never hold a tab and the hits TSV keeps its 11 columns.
TEST(AlignFasta, ByteOrderMarkAndTabsInHeaders) {
  const auto set = parse_fasta("b.fa", "\xEF\xBB\xBF>a\tfirst\tprotein\nACDEFGHIKW\n>b\tx\nMNPQRSTVWY\n");
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.ids[0], "a");
  EXPECT_EQ(set.ids[1], "b");
  TempDir dir;
  const auto db = Database::from_sequences(set);
  const auto result = search(Resources::cpu(1), set, db, SearchOptions{});
  write_hits_tsv(dir / "hits.tsv", set, db, result);
  const std::string text = molaccel::testing::read_file(dir / "hits.tsv");
  for (std::size_t begin = 0; begin < text.size();) {
    const auto end = text.find('\n', begin);
    const std::string line = text.substr(begin, end - begin);
    EXPECT_EQ(std::count(line.begin(), line.end(), '\t'), 10) << line;
    begin = end + 1;
  }
}

TEST(AlignDatabase, SortedByLengthThenInputOrder) {
  const auto db = Database::from_sequences(testing::make_set({"AAAA", "C", "DD", "EE", "F"}));
  ASSERT_EQ(db.size(), 5u);
  const std::vector<std::uint32_t> expected = {1, 4, 2, 3, 0};
  for (std::size_t i = 0; i < db.size(); ++i) EXPECT_EQ(db.original_index(i), expected[i]);
  EXPECT_EQ(db.residues(), 10u);
  EXPECT_EQ(db.max_length(), 4u);
  EXPECT_EQ(db.id_of_original(3), "s3");
}

TEST(AlignDatabase, MakedbRoundTripAndDamageDetection) {
  TempDir dir;
  std::mt19937 rng(7);
  std::vector<std::string> seqs;
  for (int i = 0; i < 50; ++i) seqs.push_back(testing::random_protein(rng, 1 + rng() % 80));
  const auto db = Database::from_sequences(testing::make_set(seqs));
  db.write(dir / "db");
  const auto back = Database::open(dir / "db");
  ASSERT_EQ(back.size(), db.size());
  EXPECT_EQ(back.total_residues(), db.total_residues());
  for (std::size_t i = 0; i < db.size(); ++i) {
    EXPECT_EQ(back.original_index(i), db.original_index(i));
    const auto a = db.sequence(i), b = back.sequence(i);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  EXPECT_EQ(Database::load(dir / "db").size(), db.size());
  // Damage: truncated residues, wrong order file, missing metadata.
  const auto residues = molaccel::testing::read_file(dir / "db" / "residues.bin");
  molaccel::testing::write_file(dir / "db" / "residues.bin", residues.substr(1));
  EXPECT_THROW(Database::open(dir / "db"), InputError);
  molaccel::testing::write_file(dir / "db" / "residues.bin", residues);
  std::string bad = residues;
  bad[0] = 40;
  molaccel::testing::write_file(dir / "db" / "residues.bin", bad);
  EXPECT_THROW(Database::open(dir / "db"), InputError);
  std::filesystem::remove(dir / "db" / "molaccel-align.json");
  EXPECT_THROW(Database::open(dir / "db"), InputError);
}

TEST(AlignDatabase, ShardsCoverEverythingOnce) {
  std::mt19937 rng(11);
  std::vector<std::string> seqs;
  for (int i = 0; i < 97; ++i) seqs.push_back(testing::random_protein(rng, 1 + rng() % 200));
  const auto db = Database::from_sequences(testing::make_set(seqs));
  for (int ranks : {1, 2, 3, 7}) {
    std::vector<int> seen(db.size(), 0);
    std::uint64_t residues = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto shard = db.shard(r, ranks);
      EXPECT_EQ(shard.total_residues(), db.total_residues());
      residues += shard.residues();
      for (std::size_t i = 0; i < shard.size(); ++i) ++seen[shard.original_index(i)];
    }
    EXPECT_EQ(residues, db.residues());
    for (int s : seen) EXPECT_EQ(s, 1);
  }
}

// Shards are balanced by work on a skewed database (most subjects short, a tail 10x longer, as in
// UniProt): every rank holds about 1/N of the residues and about 1/N of the long tail's residues
// (contiguous shards of the sorted order gave the last rank the whole tail). Bounds: a shard is 16
// blocks of residues/(16 N) each, and a block boundary moves by less than one subject, so a rank's
// residues are within 16 x the longest subject of the mean; the tail is a run of the sorted order,
// so each rank holds its blocks inside it, give or take one partial block at each end.
TEST(AlignDatabase, ShardsBalanceResiduesAndLengthMix) {
  std::mt19937 rng(29);
  std::vector<std::string> seqs;
  std::lognormal_distribution<double> short_length(5.3, 0.5);  // median 200
  for (int i = 0; i < 6000; ++i) {
    const bool tail = rng() % 10 == 0;
    const auto length = tail ? 2000 + rng() % 1000
                             : std::clamp<std::size_t>(static_cast<std::size_t>(short_length(rng)), 1, 1500);
    seqs.push_back(testing::random_protein(rng, length));
  }
  const auto db = Database::from_sequences(testing::make_set(seqs));
  const std::uint64_t longest = db.max_length(), blocks_per_rank = 16;
  auto tail_residues = [](const Database& d) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < d.size(); ++i) sum += d.length(i) >= 2000 ? d.length(i) : 0;
    return sum;
  };
  const std::uint64_t tail_total = tail_residues(db);
  for (int ranks : {2, 3, 4, 8}) {
    const double mean = static_cast<double>(db.residues()) / ranks;
    const double block = mean / static_cast<double>(blocks_per_rank);
    for (int r = 0; r < ranks; ++r) {
      const auto shard = db.shard(r, ranks);
      EXPECT_LE(std::abs(static_cast<double>(shard.residues()) - mean),
                static_cast<double>(blocks_per_rank * longest))
          << r << " of " << ranks;
      EXPECT_LE(std::abs(static_cast<double>(tail_residues(shard)) - static_cast<double>(tail_total) / ranks),
                2 * block + static_cast<double>(blocks_per_rank * longest))
          << r << " of " << ranks;
      for (std::size_t i = 1; i < shard.size(); ++i) ASSERT_LE(shard.length(i - 1), shard.length(i));
    }
  }
}

// The long tail (subjects above 2,048 residues, slower per residue on a GPU) is dealt one subject at
// a time: every rank holds the same number of long subjects, give or take one, and their residues
// differ by at most two longest subjects between ranks (the serpentine's full rounds by at most the
// spread of the tail's lengths, its last partial round by one subject). Here 37 long subjects sit
// among 3,000 short ones, so one residue block would have held them all.
TEST(AlignDatabase, ShardsDealTheLongTailOneByOne) {
  std::mt19937 rng(31);
  std::vector<std::string> seqs;
  for (int i = 0; i < 3000; ++i) seqs.push_back(testing::random_protein(rng, 50 + rng() % 400));
  for (int i = 0; i < 37; ++i) seqs.push_back(testing::random_protein(rng, 2049 + rng() % 30000));
  std::shuffle(seqs.begin(), seqs.end(), rng);
  const auto db = Database::from_sequences(testing::make_set(seqs));
  const auto longest = static_cast<double>(db.max_length());
  for (int ranks : {2, 3, 5, 8, 64}) {
    std::vector<std::uint64_t> count(ranks), residues(ranks);
    for (int r = 0; r < ranks; ++r) {
      const auto shard = db.shard(r, ranks);
      for (std::size_t i = 0; i < shard.size(); ++i)
        if (shard.length(i) > 2048) {
          ++count[r];
          residues[r] += shard.length(i);
        }
    }
    const auto [fewest, most] = std::minmax_element(count.begin(), count.end());
    EXPECT_LE(*most - *fewest, 1u) << ranks << " ranks";
    const auto [least, largest] = std::minmax_element(residues.begin(), residues.end());
    EXPECT_LE(static_cast<double>(*largest - *least), 2 * longest) << ranks << " ranks";
  }
}

// A rank reads its shard of a DBDIR alone: the same view as the whole directory's shard, with the
// whole database's statistics and the shard's own ids, with and without ids.index.bin.
TEST(AlignDatabase, OpenShardEqualsShardOfTheWholeDirectory) {
  TempDir dir;
  std::mt19937 rng(13);
  std::vector<std::string> seqs;
  for (int i = 0; i < 61; ++i) seqs.push_back(testing::random_protein(rng, 1 + rng() % 300));
  seqs[9] = testing::random_protein(rng, 5000);  // one long subject: an uneven last shard
  Database::from_sequences(testing::make_set(seqs)).write(dir / "db");
  const auto whole = Database::open(dir / "db");
  for (bool with_index : {true, false}) {
    if (!with_index) std::filesystem::remove(dir / "db" / "ids.index.bin");
    for (int ranks : {1, 2, 3, 4, 64, 100}) {
      for (int r = 0; r < ranks; ++r) {
        const auto expected = whole.shard(r, ranks);
        const auto shard = Database::open_shard(dir / "db", r, ranks);
        ASSERT_EQ(shard.size(), expected.size()) << r << " of " << ranks;
        EXPECT_EQ(shard.residues(), expected.residues());
        EXPECT_EQ(shard.total_residues(), whole.total_residues());
        EXPECT_EQ(shard.total_sequences(), whole.total_sequences());
        for (std::size_t i = 0; i < shard.size(); ++i) {
          EXPECT_EQ(shard.original_index(i), expected.original_index(i));
          const auto a = shard.sequence(i), b = expected.sequence(i);
          EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
          EXPECT_EQ(shard.id_of_original(shard.original_index(i)),
                    whole.id_of_original(expected.original_index(i)));
        }
      }
    }
  }
  // Damage in one shard's residues (the longest subject's) fails that shard only.
  const std::uint32_t longest = whole.original_index(whole.size() - 1);
  const auto shard0 = whole.shard(0, 2);
  int damaged = 1;
  for (std::size_t i = 0; i < shard0.size(); ++i)
    if (shard0.original_index(i) == longest) damaged = 0;
  const auto intact = molaccel::testing::read_file(dir / "db" / "residues.bin");
  // Bytes at every place of an eight-byte word and in the last partial word, just outside the
  // alphabet and far outside it: open() refuses the directory, and open_shard the shard holding
  // the byte, naming the first bad residue.
  for (std::size_t from_end : {1, 2, 5, 8, 9, 13, 2500})
    for (int value : {26, 40, 127, 128, 255}) {
      auto residues = intact;
      residues[residues.size() - from_end] = static_cast<char>(value);
      molaccel::testing::write_file(dir / "db" / "residues.bin", residues);
      EXPECT_NO_THROW(Database::open_shard(dir / "db", 1 - damaged, 2));
      try {  // the whole directory's check too (the same test of the codes)
        (void)Database::open(dir / "db");
        ADD_FAILURE() << "open() took a code outside the alphabet: " << from_end << " " << value;
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("outside the alphabet"), std::string::npos) << e.what();
      }
      std::string error;
      try {
        (void)Database::open_shard(dir / "db", damaged, 2);
      } catch (const InputError& e) {
        error = e.what();
      }
      EXPECT_NE(error.find(fmt::format("(byte {})", whole.total_residues() - from_end)), std::string::npos)
          << from_end << " " << value << ": " << error;
    }
}

}  // namespace
}  // namespace molaccel::align

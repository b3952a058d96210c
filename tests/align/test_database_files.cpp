// The database directory as a whole (issue 24, items 7 and 9): makedb replaces a database only
// when the new one is complete (a failed makedb over an existing database leaves it as it was);
// files of two makedb runs in one directory are refused, by open() and open_shard(); a header
// claiming more sequences than the files hold is a clear error, not std::bad_alloc.
#include <fstream>
#include <thread>

#include "align/align_test_util.hpp"
#include "testing/testing.hpp"

namespace molaccel::align {
namespace {

using molaccel::testing::read_file;
using molaccel::testing::TempDir;
using molaccel::testing::write_file;

Database database_of(const std::string& prefix, int count, int length) {
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < count; ++i)
    records.push_back(
        {prefix + std::to_string(i), std::string(static_cast<std::size_t>(length + i % 3), 'A')});
  return Database::from_sequences(encode_sequences(records));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "no error";
}

// Entries of `dir` other than `keep` (temporary directories left behind would show here).
std::vector<std::string> others(const std::filesystem::path& dir, const std::string& keep) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename() != keep) names.push_back(entry.path().filename().string());
  return names;
}

TEST(AlignDatabaseFiles, MakedbReplacesAWholeDatabaseAndLeavesNothingBehind) {
  TempDir dir;
  database_of("old", 5, 10).write(dir / "db");
  database_of("new", 7, 12).write(dir / "db");
  const auto db = Database::open(dir / "db");
  ASSERT_EQ(db.size(), 7u);
  EXPECT_EQ(db.id_of_original(0), "new0");
  EXPECT_TRUE(others(dir.path(), "db").empty());
  // A trailing slash names the same directory.
  database_of("third", 3, 9).write((dir / "db").string() + "/");
  EXPECT_EQ(Database::open(dir / "db").id_of_original(2), "third2");
  EXPECT_TRUE(others(dir.path(), "db").empty());
}

// open() makes an id a string only when it is asked for: the same ids as the database written,
// long ones included (past the small-string buffer), each made once when many threads ask at once
// (one address per id), and an id past the end is an error.
TEST(AlignDatabaseFiles, IdsComeFromTheMappedFileOnceEach) {
  TempDir dir;
  const Database written = database_of("a-long-identifier-of-uniprot-length|", 300, 8);
  written.write(dir / "db");
  const auto db = Database::open(dir / "db");
  std::vector<std::vector<const std::string*>> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      for (std::uint32_t i = 0; i < 300; ++i) seen[t].push_back(&db.id_of_original(i));
    });
  for (auto& thread : threads) thread.join();
  for (std::uint32_t i = 0; i < 300; ++i) {
    EXPECT_EQ(*seen[0][i], written.id_of_original(i));
    for (std::size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t][i], seen[0][i]) << i;
  }
  EXPECT_THROW((void)db.id_of_original(300), std::out_of_range);
  EXPECT_EQ(db.slice(10, 20).id_of_original(7), written.id_of_original(7));
  EXPECT_EQ(db.shard(1, 3).id_of_original(db.shard(1, 3).original_index(0)),
            written.id_of_original(db.shard(1, 3).original_index(0)));
}

TEST(AlignDatabaseFiles, RefusesToReplaceWhatIsNotADatabase) {
  TempDir dir;
  std::filesystem::create_directories(dir / "mine");
  write_file(dir / "mine" / "notes.txt", "keep me\n");
  EXPECT_NE(error_of([&] { database_of("x", 3, 5).write(dir / "mine"); }).find("is not an align database"),
            std::string::npos);
  EXPECT_EQ(read_file(dir / "mine" / "notes.txt"), "keep me\n");
  write_file(dir / "file", "x");
  EXPECT_NE(error_of([&] { database_of("x", 3, 5).write(dir / "file"); }).find("not a directory"),
            std::string::npos);
  // An empty directory is fine.
  std::filesystem::create_directories(dir / "empty");
  database_of("x", 3, 5).write(dir / "empty");
  EXPECT_EQ(Database::open(dir / "empty").size(), 3u);
}

// The defect: a makedb that failed over an existing database left old and new files mixed, and
// the mix searched without error, reporting the new sequences under the old ids.
TEST(AlignDatabaseFiles, FilesOfTwoBuildsAreRefused) {
  TempDir dir;
  database_of("old", 6, 10).write(dir / "a");
  database_of("new", 6, 10).write(dir / "b");  // same counts: every file has the same size
  for (const char* file : {"residues.bin", "offsets.bin", "order.bin", "ids.txt", "ids.index.bin"}) {
    std::filesystem::remove_all(dir / "mixed");
    std::filesystem::copy(dir / "a", dir / "mixed");
    std::filesystem::copy_file(dir / "b" / file, dir / "mixed" / file,
                               std::filesystem::copy_options::overwrite_existing);
    const std::string open_error = error_of([&] { (void)Database::open(dir / "mixed"); });
    EXPECT_NE(open_error.find("mixes two databases"), std::string::npos) << file << ": " << open_error;
    EXPECT_NE(open_error.find(file), std::string::npos) << open_error;
    const std::string shard_error = error_of([&] { (void)Database::open_shard(dir / "mixed", 0, 2); });
    EXPECT_NE(shard_error.find("mixes two databases"), std::string::npos) << file << ": " << shard_error;
  }
}

TEST(AlignDatabaseFiles, HeaderClaimingTooManySequencesIsAClearError) {
  TempDir dir;
  database_of("s", 4, 8).write(dir / "db");
  const auto json_path = dir / "db" / "molaccel-align.json";
  const std::string json = read_file(json_path);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = json;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    write_file(json_path, text);
  };
  // 10^12 sequences: more than a database holds (and than the residues).
  with("\"sequences\": 4", "\"sequences\": 1000000000000");
  for (const auto& message : {error_of([&] { (void)Database::open(dir / "db"); }),
                              error_of([&] { (void)Database::open_shard(dir / "db", 1, 3); })})
    EXPECT_NE(message.find("claims 1000000000000 sequences"), std::string::npos) << message;
  // Consistent counts that the files do not hold: sizes are checked before anything is allocated.
  with("\"sequences\": 4", "\"sequences\": 40000000");
  std::string text = read_file(json_path);
  const auto at = text.find("\"residues\": ");
  const auto end = text.find(',', at);
  text.replace(at, end - at, "\"residues\": 900000000000");
  write_file(json_path, text);
  for (const auto& message : {error_of([&] { (void)Database::open(dir / "db"); }),
                              error_of([&] { (void)Database::open_shard(dir / "db", 1, 3); })}) {
    EXPECT_NE(message.find("do not belong together"), std::string::npos) << message;
    EXPECT_NE(message.find("40000000 sequences"), std::string::npos) << message;
  }
}

// A makedb that fails while writing (here: the file size limit, as a full disk would) exits
// non-zero, leaves the old database searchable with its own ids and no temporary directory.
TEST(AlignDatabaseFiles, FailedMakedbLeavesTheOldDatabase) {
  TempDir dir;
  std::string small = ">old1\nMKV\n>old2\nACDEF\n", big;
  for (int i = 0; i < 20000; ++i) big += ">new" + std::to_string(i) + "\nWW\n";
  write_file(dir / "small.fa", small);
  write_file(dir / "big.fa", big);
  const std::string cli = MOLACCEL_CLI_PATH;
  ASSERT_EQ(std::system((cli + " -q align makedb '" + (dir / "small.fa").string() + "' -o '" +
                         (dir / "db").string() + "' > /dev/null 2>&1")
                            .c_str()),
            0);
  // 64 KiB per file: residues.bin (40 KB) is written, offsets.bin (160 KB) is not; file by file
  // into the old directory, this left the new residues beside the old offsets. SIGXFSZ ignored:
  // write() fails with EFBIG, as it fails with ENOSPC on a full disk.
  const std::string command = "trap '' XFSZ; ulimit -f 64; exec " + cli + " -q align makedb '" +
                              (dir / "big.fa").string() + "' -o '" + (dir / "db").string() +
                              "' > /dev/null 2> '" + (dir / "err.txt").string() + "'";
  const int status = std::system(("bash -c \"" + command + "\"").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0) << read_file(dir / "err.txt");
  const auto db = Database::open(dir / "db");
  ASSERT_EQ(db.size(), 2u);
  EXPECT_EQ(db.id_of_original(0), "old1");
  std::vector<std::string> left = others(dir.path(), "db");
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"big.fa", "err.txt", "small.fa"}));
}

}  // namespace
}  // namespace molaccel::align

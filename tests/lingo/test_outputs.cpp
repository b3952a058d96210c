// Hit outputs of `molaccel lingo search` / `neighbors`: .npy (read back by numpy.load), gzip TSV
// and TSV agree; hits written while the search runs are the bytes of hits written after it; and the
// ordered parallel block writer behind them.
#include <zlib.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "lingo/io/hits_output.hpp"
#include "lingo_test_util.hpp"
#include "runtime/parallel_writer.hpp"

namespace molaccel::lingo {
namespace {

using molaccel::testing::read_file;
using molaccel::testing::TempDir;
using molaccel::testing::write_file;

int run(const std::string& command) {
  const int status = std::system((command + " > /dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
int run_cli(const std::string& args) {
  return run(std::string(MOLACCEL_CLI_PATH) + " " + args);
}

// `count` random molecules named PREFIX0, PREFIX1, ... (names unique, so the checker maps them
// back to indices).
std::string smi_file(std::uint32_t seed, std::size_t count, const char* prefix) {
  std::string text;
  const auto smiles = testing::random_smiles_set(seed, count, 2, 24, 8);
  for (std::size_t i = 0; i < smiles.size(); ++i) text += fmt::format("{} {}{}\n", smiles[i], prefix, i);
  return text;
}

std::string gunzip(const std::filesystem::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  std::string out;
  char buffer[1 << 14];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
  gzclose(f);
  return out;
}

class LingoOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOLACCEL_PYTHON).empty())
      GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  }
  int check(const std::filesystem::path& stem, const std::filesystem::path& queries,
            const std::filesystem::path& db) {
    return run(fmt::format("{} '{}' '{}.npy' '{}.tsv' '{}.tsv.gz' '{}' '{}'", MOLACCEL_PYTHON,
                           MOLACCEL_HITS_CHECKER, stem.string(), stem.string(), stem.string(),
                           queries.string(), db.string()));
  }
};

// 70k hits: several formatted blocks, so their order is checked too.
TEST_F(LingoOutputs, SearchNpyAndGzipAgreeWithTsv) {
  TempDir dir;
  write_file(dir / "q.smi", smi_file(11, 350, "q"));
  write_file(dir / "db.smi", smi_file(12, 900, "d"));
  for (const char* ext : {".tsv", ".npy", ".tsv.gz"})
    ASSERT_EQ(run_cli(fmt::format("lingo search {} {} -k 200 --device cpu --threads 2 -o {}{}",
                                  (dir / "q.smi").string(), (dir / "db.smi").string(),
                                  (dir / "hits").string(), ext)),
              0)
        << ext;
  EXPECT_EQ(check(dir / "hits", dir / "q.smi", dir / "db.smi"), 0);
  const std::string npy = read_file(dir / "hits.npy");
  EXPECT_EQ(npy.size(), 128u + 12u * 350u * 200u);  // a 64-byte-aligned header, 12-byte records
}

TEST_F(LingoOutputs, NeighborsNpyAndGzipAgreeWithTsv) {
  TempDir dir;
  write_file(dir / "db.smi", smi_file(13, 600, "m"));
  for (const char* ext : {".tsv", ".npy", ".tsv.gz"})
    ASSERT_EQ(run_cli(fmt::format("lingo neighbors {} --threshold 0.3 --device cpu -o {}{}",
                                  (dir / "db.smi").string(), (dir / "pairs").string(), ext)),
              0)
        << ext;
  EXPECT_EQ(check(dir / "pairs", dir / "db.smi", dir / "db.smi"), 0);
}

TEST_F(LingoOutputs, EmptyResultIsAValidNpyAndGzip) {
  TempDir dir;
  write_file(dir / "db.smi", "CCO a\nc1ccccc1 b\n");
  for (const char* ext : {".tsv", ".npy", ".tsv.gz"})
    ASSERT_EQ(run_cli(fmt::format("lingo neighbors {} --threshold 1 --device cpu -o {}{}",
                                  (dir / "db.smi").string(), (dir / "pairs").string(), ext)),
              0);
  EXPECT_EQ(check(dir / "pairs", dir / "db.smi", dir / "db.smi"), 0);
  EXPECT_EQ(gunzip(dir / "pairs.tsv.gz"), "query\ttarget\tsimilarity\trank\n");
}

// The output formats the hits go to (.zst where this build has libzstd).
std::vector<std::string> hit_formats() {
  std::vector<std::string> formats{"npy", "tsv", "tsv.gz"};
  try {
    molaccel::io::compression_for("x.zst");
    formats.push_back("tsv.zst");
  } catch (const NotCompiled&) {
  }
  return formats;
}

// Written during the search (StreamedHits fed by search's HitsReady: row tiles of 64 queries, in
// the order the workers finish them) and after it (write_hits): the same bytes in every format.
// 2,000 queries x top-50 = 100k hits: several formatted blocks, streamed in several segments.
TEST(LingoStreamedHits, SameBytesAsWritingAfterTheSearch) {
  TempDir dir;
  const auto queries = parse_molecules("q.smi", smi_file(21, 2000, "q"), {});
  const auto db = parse_molecules("d.smi", smi_file(22, 700, "d"), {});
  const std::size_t k = 50;
  ComputeOptions options;
  options.backend = Backend::cpu;
  options.job.progress_bar = false;
  for (const auto& format : hit_formats()) {
    const auto streamed = dir / ("streamed." + format), after = dir / ("after." + format);
    std::vector<Hit> hits;
    {
      detail::StreamedHits output(streamed.string(), queries, db, k, 2);
      hits = search(Resources::cpu(2), queries, db, k, options, nullptr,
                    [&](std::size_t first, const Hit* done, std::size_t count) {
                      output.ready(first, std::span(done, count));
                    });
      output.finish();
      EXPECT_GE(output.write_seconds(), 0.0);
    }
    detail::write_hits(after.string(), queries, db, hits, k, 2);
    EXPECT_EQ(read_file(streamed), read_file(after)) << format;
  }
}

// Queries final in a scrambled order (as several GPUs or retried tiles may deliver them), one query
// or a few at a time from another thread: the file still holds them in query order. A search
// that fails (abort) leaves no file.
TEST(LingoStreamedHits, OutOfOrderRowsAndAbort) {
  TempDir dir;
  const auto queries = parse_molecules("q.smi", smi_file(23, 3000, "q"), {});
  const auto db = parse_molecules("d.smi", smi_file(24, 40, "d"), {});
  const std::size_t k = 20;
  std::vector<Hit> hits(queries.size() * k);
  std::mt19937 rng(25);
  for (std::size_t i = 0; i < hits.size(); ++i)
    hits[i] = {static_cast<std::uint32_t>(i / k), static_cast<std::uint32_t>(rng() % db.size()),
               static_cast<float>(rng() % 1000) / 1000.0f};
  std::vector<std::pair<std::size_t, std::size_t>> runs;  // first query, queries
  for (std::size_t q = 0; q < queries.size();) {
    const std::size_t n = std::min<std::size_t>(1 + rng() % 7, queries.size() - q);
    runs.emplace_back(q, n);
    q += n;
  }
  std::shuffle(runs.begin(), runs.end(), rng);
  for (const auto& format : hit_formats()) {
    const auto streamed = dir / ("shuffled." + format), after = dir / ("after." + format);
    detail::StreamedHits output(streamed.string(), queries, db, k, 3);
    std::thread feeder([&] {
      for (const auto& [first, n] : runs) output.ready(first, std::span(hits).subspan(first * k, n * k));
    });
    feeder.join();
    output.finish();
    detail::write_hits(after.string(), queries, db, hits, k, 3);
    EXPECT_EQ(read_file(streamed), read_file(after)) << format;
  }
  {
    detail::StreamedHits output((dir / "aborted.tsv").string(), queries, db, k, 2);
    output.ready(0, std::span(hits).subspan(0, 100 * k));
    output.abort();
  }
  {
    detail::StreamedHits output((dir / "dropped.npy").string(), queries, db, k, 2);
    output.ready(0, std::span(hits).subspan(0, 100 * k));
  }  // destroyed without finish: as abort
  EXPECT_FALSE(std::filesystem::exists(dir / "aborted.tsv"));
  EXPECT_FALSE(std::filesystem::exists(dir / "dropped.npy"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find("aborted"), std::string::npos) << entry.path();
}

// --json reports the time of each stage.
TEST(LingoReport, StagesInJson) {
  TempDir dir;
  write_file(dir / "db.smi", smi_file(14, 50, "m"));
  const std::string db = (dir / "db.smi").string();
  for (const std::string& command :
       {fmt::format("lingo search {} {} -k 3 -o {}", db, db, (dir / "h.tsv").string()),
        fmt::format("lingo neighbors {} -o {}", db, (dir / "p.npy").string()),
        fmt::format("lingo matrix {} -o {}", db, (dir / "m.npy").string())}) {
    ASSERT_EQ(run_cli(fmt::format("--json {} {} --device cpu", (dir / "r.json").string(), command)), 0)
        << command;
    const std::string report = read_file(dir / "r.json");
    for (const char* key : {"\"stages\"", "\"read\"", "\"encode\"", "\"compute\"", "\"write\""})
      EXPECT_NE(report.find(key), std::string::npos) << command << ": no " << key << " in " << report;
    if (command.starts_with("lingo search")) {  // written during the search: its tail and the whole
      for (const char* key : {"\"write_after_compute\"", "\"whole\""})
        EXPECT_NE(report.find(key), std::string::npos) << command << ": no " << key << " in " << report;
    }
  }
}

// The block writer: blocks of random sizes (some empty) land in order, plain and gzip, on one
// thread and on several; a failing block leaves the exception to the caller.
TEST(ParallelWriter, BlocksLandInOrder) {
  TempDir dir;
  std::mt19937 rng(5);
  std::vector<std::string> blocks(300);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const std::size_t size = rng() % 4 == 0 ? 0 : rng() % 5000;
    for (std::size_t i = 0; i < size; ++i) blocks[b] += static_cast<char>('a' + (b + i * 7) % 26);
  }
  std::string expected;
  for (const auto& b : blocks) expected += b;
  for (int threads : {1, 3, 8})
    for (auto compression : {io::Compression::none, io::Compression::gzip}) {
      const auto path =
          dir / fmt::format("out{}{}", threads, compression == io::Compression::gzip ? ".gz" : "");
      EXPECT_EQ(io::compression_for(path), compression);
      write_file_atomically(path, [&](std::FILE* f) {
        io::write_blocks_in_order(
            f, path.string(), blocks.size(), threads,
            [&](std::size_t b, std::string& text) { text = blocks[b]; }, compression);
      });
      EXPECT_EQ(compression == io::Compression::gzip ? gunzip(path) : read_file(path), expected) << path;
    }
  const auto failing = dir / "failing.txt";
  EXPECT_THROW(write_file_atomically(failing,
                                     [&](std::FILE* f) {
                                       io::write_blocks_in_order(f, failing.string(), 100, 4,
                                                                 [&](std::size_t b, std::string& text) {
                                                                   if (b == 57) throw Error("block 57");
                                                                   text = "x";
                                                                 });
                                     }),
               Error);
  EXPECT_FALSE(std::filesystem::exists(failing));
}

// Zstandard: a build with libzstd writes independent frames that the zstd tool reads back as one
// stream (blocks of random sizes, some empty, several threads), and `lingo search -o x.tsv.zst`
// holds the bytes of the TSV; a build without it refuses .zst by name before any work.
bool zstd_compiled() {
  try {
    return io::compression_for("x.zst") == io::Compression::zstd;
  } catch (const NotCompiled&) {
    return false;
  }
}
std::string unzstd(const std::filesystem::path& path) {
  const auto plain = std::filesystem::path(path.string() + ".plain");
  EXPECT_EQ(run(fmt::format("zstd -q -d -f '{}' -o '{}'", path.string(), plain.string())), 0) << path;
  return read_file(plain);
}

TEST(ParallelWriter, ZstandardFramesReadBackAsOneStream) {
  if (!zstd_compiled()) {
    EXPECT_NE(run_cli("lingo search x.smi x.smi -o hits.tsv.zst"), 0);
    GTEST_SKIP() << "this build has no libzstd";
  }
  if (run("zstd --version") != 0) GTEST_SKIP() << "the zstd tool is not installed";
  TempDir dir;
  std::mt19937 rng(9);
  std::vector<std::string> blocks(120);
  std::string expected;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const std::size_t size = rng() % 4 == 0 ? 0 : rng() % 9000;
    for (std::size_t i = 0; i < size; ++i) blocks[b] += static_cast<char>('a' + (b * 3 + i * i) % 26);
    expected += blocks[b];
  }
  const auto path = dir / "out.zst";
  write_file_atomically(path, [&](std::FILE* f) {
    io::write_blocks_in_order(
        f, path.string(), blocks.size(), 3, [&](std::size_t b, std::string& text) { text = blocks[b]; },
        io::Compression::zstd);
  });
  EXPECT_TRUE(unzstd(path) == expected);  // (not EXPECT_EQ: a failure would print megabytes)

  write_file(dir / "q.smi", smi_file(15, 120, "q"));
  write_file(dir / "db.smi", smi_file(16, 700, "d"));
  for (const char* ext : {".tsv", ".tsv.zst"})
    ASSERT_EQ(run_cli(fmt::format("lingo search {} {} -k 300 --device cpu --threads 2 -o {}{}",
                                  (dir / "q.smi").string(), (dir / "db.smi").string(),
                                  (dir / "hits").string(), ext)),
              0)
        << ext;
  EXPECT_TRUE(unzstd(dir / "hits.tsv.zst") == read_file(dir / "hits.tsv"));
}

}  // namespace
}  // namespace molaccel::lingo

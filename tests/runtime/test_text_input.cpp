#include <zlib.h>

#include <algorithm>

#include "runtime/text_input.hpp"
#include "testing/testing.hpp"

namespace molaccel {
namespace {

std::vector<std::string> all_lines(io::LineReader& r) {
  std::vector<std::string> out;
  std::string_view line;
  while (r.next(line)) out.emplace_back(line);
  return out;
}

// 20,000 lines "CCO<i> mol<i>" gzip-compressed into `path`; returns the file's bytes.
std::string gzip_of_numbered_lines(const std::filesystem::path& path) {
  gzFile f = gzopen(path.c_str(), "wb");
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "CCO" + std::to_string(i) + " mol" + std::to_string(i) + "\n";
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  return testing::read_file(path);
}

TEST(LineReader, PlainFileWithCrLfAndNoFinalNewline) {
  testing::TempDir dir;
  testing::write_file(dir / "a.txt", "one\r\ntwo\n\nfour");
  io::LineReader r(dir / "a.txt");
  EXPECT_EQ(all_lines(r), (std::vector<std::string>{"one", "two", "", "four"}));
  EXPECT_EQ(r.line_number(), 4u);
}

TEST(LineReader, GzipIsDetectedFromContent) {
  testing::TempDir dir;
  const auto path = dir / "a.smi.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "CCO" + std::to_string(i) + "\n";  // spans several read chunks
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  io::LineReader r(path);
  auto lines = all_lines(r);
  ASSERT_EQ(lines.size(), 50000u);
  EXPECT_EQ(lines.front(), "CCO0");
  EXPECT_EQ(lines.back(), "CCO49999");
}

TEST(LineReader, ErrorsNameFileAndLine) {
  io::LineReader r("mem.smi", "ok\nbad\n");
  std::string_view line;
  r.next(line);
  r.next(line);
  try {
    r.fail("unbalanced parentheses");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "mem.smi:2: unbalanced parentheses");
  }
  EXPECT_THROW(io::LineReader("/nonexistent/file.smi"), InputError);
}

// Issue 24, defect 6: a gzip file cut short (an interrupted download or copy) was read up to the
// cut with no error, the last line truncated.
TEST(LineReader, TruncatedGzipIsAnInputErrorNamingTheFile) {
  testing::TempDir dir;
  const auto whole = dir / "whole.smi.gz";
  const std::string bytes = gzip_of_numbered_lines(whole);
  {
    io::LineReader r(whole);  // the whole file reads
    EXPECT_EQ(all_lines(r).size(), 20000u);
  }
  // Cut inside the deflate data, inside the 8-byte trailer (CRC and length), and just after the
  // header.
  for (const std::size_t keep : {bytes.size() / 2, bytes.size() - 4, bytes.size() - 1, std::size_t{12}}) {
    SCOPED_TRACE(keep);
    const auto cut = dir / "cut.smi.gz";
    testing::write_file(cut, bytes.substr(0, keep));
    io::LineReader r(cut);
    try {
      all_lines(r);
      FAIL() << "a truncated gzip stream was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), cut.string());
      EXPECT_GT(e.line(), 0u);
      EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(cut.string() + ":", 0), 0u) << e.what();
    }
  }
}

// Issue 24, defect 14: a UTF-8 byte order mark at the start of a file is skipped (and only there).
TEST(LineReader, Utf8ByteOrderMarkAtTheStartIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  {
    const std::string content = bom + "CCO a\r\n" + bom + "x\n";  // the reader keeps a view of it
    io::LineReader r("mem", content);
    EXPECT_EQ(all_lines(r), (std::vector<std::string>{"CCO a", bom + "x"}));
  }
  testing::TempDir dir;
  testing::write_file(dir / "a.fasta", bom + ">s1\nACGT\n");
  io::LineReader r(dir / "a.fasta");
  EXPECT_EQ(all_lines(r), (std::vector<std::string>{">s1", "ACGT"}));
  io::LineReader just_bom("mem", bom);
  EXPECT_EQ(all_lines(just_bom), (std::vector<std::string>{""}));
}

// next_lines: blocks of whole lines whose concatenation is the text (less a byte order mark at the
// start), each cut after a line end, with line_number() the number of each block's last line.
TEST(LineReader, NextLinesGivesBlocksOfWholeLines) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 30000; ++i)
    text += "C" + std::string(static_cast<std::size_t>(i % 97), 'O') + (i % 5 ? "\n" : "\r\n");
  text += "last-without-newline";
  const auto gz = dir / "a.smi.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  testing::write_file(dir / "a.smi", "\xEF\xBB\xBF" + text);
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 16,
                                  std::size_t{1} << 18, std::size_t{1} << 24}) {
    for (const auto& path : {gz, dir / "a.smi"}) {
      SCOPED_TRACE(path.string() + " " + std::to_string(bytes));
      io::LineReader r(path);
      std::string block, joined;
      std::size_t blocks = 0, lines = 0;
      while (r.next_lines(block, bytes)) {
        ++blocks;
        ASSERT_FALSE(block.empty());
        if (joined.size() + block.size() < text.size()) {
          EXPECT_EQ(block.back(), '\n');
        }
        // Lines are < 100 bytes; the input's end may come within the last two blocks.
        if (joined.size() + 2 * block.size() + 200 < text.size()) {
          EXPECT_GE(block.size() + 100, std::max<std::size_t>(bytes, 1 << 16));
        }
        lines +=
            static_cast<std::size_t>(std::count(block.begin(), block.end(), '\n')) + (block.back() != '\n');
        EXPECT_EQ(r.line_number(), lines);
        joined += block;
      }
      EXPECT_EQ(joined, text);
      EXPECT_EQ(r.line_number(), 30001u);
      if (bytes == std::size_t{1} << 24) {
        EXPECT_EQ(blocks, 1u);
      }
    }
  }
  io::LineReader from_memory("mem", "a\nb\n", 7);
  std::string block;
  ASSERT_TRUE(from_memory.next_lines(block, 1 << 20));
  EXPECT_EQ(block, "a\nb\n");
  EXPECT_EQ(from_memory.line_number(), 9u);
  EXPECT_FALSE(from_memory.next_lines(block, 1 << 20));
  io::LineReader empty("empty", "");
  EXPECT_FALSE(empty.next_lines(block, 10));
  EXPECT_EQ(empty.line_number(), 0u);
}

TEST(LineReader, NextLinesReportsATruncatedGzipAtItsLine) {
  testing::TempDir dir;
  const auto whole = dir / "whole.smi.gz";
  const std::string bytes = gzip_of_numbered_lines(whole);
  const auto cut = dir / "cut.smi.gz";
  testing::write_file(cut, bytes.substr(0, bytes.size() - 4));  // inside the trailer: every line decompresses
  io::LineReader r(cut);
  std::string block;
  try {
    while (r.next_lines(block, 1 << 12)) {
    }
    FAIL() << "a truncated gzip stream was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), cut.string());
    EXPECT_EQ(e.line(), 20001u);  // the line being read: the one after the last
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST(LineReader, EmptyInput) {
  io::LineReader r("empty", "");
  std::string_view line;
  EXPECT_FALSE(r.next(line));
}

}  // namespace
}  // namespace molaccel

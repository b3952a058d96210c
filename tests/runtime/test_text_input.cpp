#include <zlib.h>

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

TEST(LineReader, EmptyInput) {
  io::LineReader r("empty", "");
  std::string_view line;
  EXPECT_FALSE(r.next(line));
}

}  // namespace
}  // namespace molaccel

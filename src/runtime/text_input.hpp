// Line-by-line reading of text inputs, plain or gzip-compressed (detected from the content),
// with the line number kept for error messages. Shared by every engine's parsers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "molaccel/runtime.hpp"

namespace molaccel::io {

class LineReader {
 public:
  // Opens `path` ("-" = stdin); throws InputError when it cannot be opened.
  explicit LineReader(const std::filesystem::path& path);
  // Reads from memory (fuzz targets, tests, a slice of a file); `name` is used in error messages.
  // `lines_before`: lines of the file before `content` (line numbers count on from there).
  LineReader(std::string_view name, std::string_view content, std::size_t lines_before = 0);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Next line without its '\n' (and '\r'); false at end of input. The view stays valid until
  // the next call. A UTF-8 byte order mark at the start of the file is skipped. A gzip stream that
  // ends early (no end block or trailer: a truncated file) throws InputError naming the file and
  // the line that was being read.
  bool next(std::string_view& line);
  // The next whole lines into `lines` (replaced): the input is read until `bytes` of text (at
  // least 64 KiB) and a line end are in, and the block ends after the last line end (the rest
  // starts the next block); the text as it is ('\r' kept; the last line of the input without
  // its '\n' where it has none; a byte order mark at the start skipped). False at end of input;
  // line_number() is then the number of the last line given. For parsers that hand blocks of lines
  // to other threads: the reading thread only decompresses and finds one line end per block.
  // Not to be mixed with next() on one reader.
  bool next_lines(std::string& lines, std::size_t bytes);
  std::size_t line_number() const noexcept { return line_no_; }  // of the last line returned
  const std::string& name() const noexcept { return name_; }
  // Throws InputError naming this input and the current line.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string name_;
  std::string line_;
  std::size_t line_no_ = 0;
};

// The bytes of text in a file without reading it: its size, or for gzip the uncompressed size its
// trailer states (modulo 2^32; one smaller than the file counts 4 x the file); 1 when it cannot be
// looked at. For estimates: progress bars, and a job's size before its inputs are read.
std::uint64_t text_size_estimate(const std::filesystem::path& path);

// Whole file into memory (plain or gzip). Throws InputError when it cannot be read.
std::string read_all(const std::filesystem::path& path);

}  // namespace molaccel::io

#include "runtime/text_input.hpp"

#include <zlib.h>

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace molaccel::io {

struct LineReader::Impl {
  gzFile gz = nullptr;      // file input (zlib reads plain files transparently)
  std::string_view memory;  // in-memory input
  std::size_t memory_pos = 0;
  bool from_memory = false;
  std::string buffer;
  std::size_t pos = 0;
  bool eof = false;
  bool past_start = false;  // next_lines: the byte order mark was looked for

  ~Impl() {
    if (gz) gzclose(gz);
  }

  // Up to `n` bytes of the input into `dst`; 0 at its end. `line` is the number of the line being
  // read, for the error of a gzip stream cut short.
  std::size_t read(char* dst, std::size_t n, const std::string& name, std::size_t line) {
    if (eof) return 0;
    if (from_memory) {
      const std::size_t take = std::min(n, memory.size() - memory_pos);
      std::memcpy(dst, memory.data() + memory_pos, take);
      memory_pos += take;
      eof = memory_pos == memory.size();
      return take;
    }
    const int got = gzread(gz, dst, static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30)));
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(gz, &err);
      throw InputError(name, 0, fmt::format("read error: {}", err == Z_ERRNO ? std::strerror(errno) : msg),
                       __FILE__, __LINE__);
    }
    if (got == 0) {
      // zlib returns what it could decompress from a gzip stream cut short and only records
      // Z_BUF_ERROR ("unexpected end of file"): a stream without its end (deflate end block and
      // trailer) is an input error, never a silent short read.
      int err = Z_OK;
      gzerror(gz, &err);
      if (err == Z_BUF_ERROR)
        throw InputError(name, line, "gzip stream ends early (the file is truncated)", __FILE__, __LINE__);
      eof = true;
    }
    return static_cast<std::size_t>(got);
  }

  // Appends more data to buffer; false at end of input.
  bool fill(const std::string& name, std::size_t line) {
    if (from_memory) {  // all of it at once
      if (eof) return false;
      buffer.append(memory.substr(memory_pos));
      memory_pos = memory.size();
      eof = true;
      return true;
    }
    char chunk[1 << 16];
    const std::size_t n = read(chunk, sizeof chunk, name, line);
    buffer.append(chunk, n);
    return n > 0;
  }
};

LineReader::LineReader(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>()), name_(path.string()) {
  if (path == "-") {
    name_ = "<stdin>";
    impl_->gz = gzdopen(::dup(STDIN_FILENO), "rb");
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw InputError(name_, 0, "is a directory, expected a file", __FILE__, __LINE__);
    impl_->gz = gzopen(path.c_str(), "rb");
  }
  if (!impl_->gz)
    throw InputError(name_, 0, fmt::format("cannot open: {}", std::strerror(errno ? errno : ENOENT)),
                     __FILE__, __LINE__);
  gzbuffer(impl_->gz, 1 << 17);
}

LineReader::LineReader(std::string_view name, std::string_view content, std::size_t lines_before)
    : impl_(std::make_unique<Impl>()), name_(name), line_no_(lines_before) {
  impl_->from_memory = true;
  impl_->memory = content;
}

LineReader::~LineReader() = default;

bool LineReader::next(std::string_view& line) {
  auto& im = *impl_;
  for (;;) {
    const auto nl = im.buffer.find('\n', im.pos);
    if (nl != std::string::npos) {
      line_.assign(im.buffer, im.pos, nl - im.pos);
      im.pos = nl + 1;
      break;
    }
    // Keep only the unconsumed tail before reading more.
    if (im.pos > 0) {
      im.buffer.erase(0, im.pos);
      im.pos = 0;
    }
    if (!im.fill(name_, line_no_ + 1)) {
      if (im.buffer.empty()) return false;
      line_ = std::move(im.buffer);
      im.buffer.clear();
      break;
    }
  }
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  // A UTF-8 byte order mark (written by some Windows editors and tools) is not part of the text.
  if (line_no_ == 0 && line_.starts_with("\xEF\xBB\xBF")) line_.erase(0, 3);
  ++line_no_;
  line = line_;
  return true;
}

bool LineReader::next_lines(std::string& lines, std::size_t bytes) {
  auto& im = *impl_;
  // The block starts with what followed the last line end of the previous one.
  lines.assign(im.buffer, im.pos);
  im.buffer.clear();
  im.pos = 0;
  const std::size_t line_before = line_no_;
  bool has_line_end = lines.find('\n') != std::string::npos;
  while (lines.size() < std::max<std::size_t>(bytes, 3) || !has_line_end) {
    const std::size_t old = lines.size();
    const std::size_t want = std::max<std::size_t>(bytes > old ? bytes - old : 0, std::size_t{1} << 16);
    lines.resize(old + want);
    const std::size_t got = im.read(
        lines.data() + old, want, name_,
        line_before + 1 + static_cast<std::size_t>(std::count(lines.begin(), lines.begin() + old, '\n')));
    lines.resize(old + got);
    if (got == 0) break;
    has_line_end = has_line_end || std::memchr(lines.data() + old, '\n', got) != nullptr;
  }
  // A UTF-8 byte order mark (written by some Windows editors and tools) is not part of the text.
  if (line_no_ == 0 && !im.past_start) {
    im.past_start = true;
    if (lines.starts_with("\xEF\xBB\xBF")) lines.erase(0, 3);
  }
  if (lines.empty()) return false;
  if (!im.eof) {  // what follows the last line end waits for the next block
    const std::size_t cut = lines.rfind('\n') + 1;
    im.buffer.assign(lines, cut);
    lines.resize(cut);
  }
  line_no_ += static_cast<std::size_t>(std::count(lines.begin(), lines.end(), '\n')) + (lines.back() != '\n');
  return true;
}

void LineReader::fail(const std::string& message) const {
  throw InputError(name_, line_no_, message, __FILE__, __LINE__);
}

std::uint64_t text_size_estimate(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return 1;
  std::uint64_t text = size;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f) {
    unsigned char magic[2] = {0, 0}, trailer[4] = {0, 0, 0, 0};
    if (std::fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b && size >= 18 &&
        std::fseek(f, -4, SEEK_END) == 0 && std::fread(trailer, 1, 4, f) == 4) {
      const std::uint64_t stated =
          trailer[0] | (trailer[1] << 8) | (trailer[2] << 16) | (std::uint64_t{trailer[3]} << 24);
      text = stated >= size ? stated : 4 * size;
    }
    std::fclose(f);
  }
  return text;
}

std::string read_all(const std::filesystem::path& path) {
  LineReader reader(path);
  std::string out;
  std::string_view line;
  while (reader.next(line)) {
    out.append(line);
    out.push_back('\n');
  }
  return out;
}

}  // namespace molaccel::io

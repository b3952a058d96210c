#include "runtime/text_input.hpp"

#include <zlib.h>

#include <unistd.h>
#include <cerrno>
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

  ~Impl() {
    if (gz) gzclose(gz);
  }

  // Appends more data to buffer; false at end of input. `line` is the number of the line being
  // read, for the error of a gzip stream cut short.
  bool fill(const std::string& name, std::size_t line) {
    if (eof) return false;
    if (from_memory) {
      buffer.append(memory.substr(memory_pos));
      memory_pos = memory.size();
      eof = true;
      return true;
    }
    char chunk[1 << 16];
    const int n = gzread(gz, chunk, sizeof chunk);
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(gz, &err);
      throw InputError(name, 0, fmt::format("read error: {}", err == Z_ERRNO ? std::strerror(errno) : msg),
                       __FILE__, __LINE__);
    }
    if (n == 0) {
      // zlib returns what it could decompress from a gzip stream cut short and only records
      // Z_BUF_ERROR ("unexpected end of file"): a stream without its end (deflate end block and
      // trailer) is an input error, never a silent short read.
      int err = Z_OK;
      gzerror(gz, &err);
      if (err == Z_BUF_ERROR)
        throw InputError(name, line, "gzip stream ends early (the file is truncated)", __FILE__, __LINE__);
      eof = true;
      return false;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
    return true;
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

void LineReader::fail(const std::string& message) const {
  throw InputError(name_, line_no_, message, __FILE__, __LINE__);
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

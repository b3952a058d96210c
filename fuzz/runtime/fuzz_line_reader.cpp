// The line reader under every parser: arbitrary bytes split into lines without loss.
#include <cstdint>
#include <string>

#include "runtime/text_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  molaccel::io::LineReader reader("fuzz", text);
  std::string_view line;
  std::size_t total = 0, lines = 0;
  while (reader.next(line)) {
    total += line.size();
    ++lines;
  }
  if (total > size || reader.line_number() != lines) __builtin_trap();
  return 0;
}

// libFuzzer target for the orbital engine's cube reader: any input either parses or throws
// molaccel::InputError (never crashes, hangs or throws anything else).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "molaccel/orbital.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)molaccel::orbital::read_cube_text("fuzz.cube", text);
  } catch (const molaccel::InputError&) {
  }
  return 0;
}

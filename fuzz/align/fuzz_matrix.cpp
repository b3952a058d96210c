// libFuzzer target for the NCBI matrix parser: any input parses into a matrix with bounded scores
// or throws InputError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "molaccel/align.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace al = molaccel::align;
  try {
    const auto m = al::parse_matrix("fuzz.mat", std::string_view(reinterpret_cast<const char*>(data), size));
    for (int a = 0; a < al::kAlphabetSize; ++a)
      for (int b = 0; b < al::kAlphabetSize; ++b)
        if (std::abs(m.at(a, b)) > 127) __builtin_trap();
  } catch (const molaccel::InputError&) {
  }
  return 0;
}

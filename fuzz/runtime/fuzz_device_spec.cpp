// --device values: parsed or rejected with InputError, nothing else.
#include <cstdint>
#include <string>

#include "molaccel/runtime.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto spec = molaccel::DeviceSpec::parse(text);
    if (molaccel::DeviceSpec::parse(spec.to_string()).to_string() != spec.to_string()) __builtin_trap();
  } catch (const molaccel::InputError&) {
  }
  return 0;
}

// The JIT cache reads files other processes wrote: any bytes must decode or be rejected, never crash.
#include <cstdint>
#include <string_view>

#include "runtime/jit_cache_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto p = molaccel::detail::decode_cache_entry(bytes, "fuzz-key")) {
    // A decoded entry must re-encode to the same bytes.
    if (molaccel::detail::encode_cache_entry(*p) != bytes) __builtin_trap();
  }
  return 0;
}

// On-disk format of JIT cache entries (internal; exposed for tests and the fuzz target).
//
//   "MOLACCEL-JIT\n"  magic (13 bytes)
//   u32               format version (kJitCacheFormat)
//   u64               payload size
//   u64               hash64 checksum of the payload
//   payload           key, arch, log, cubin, name count, (name, lowered name)*: u64-length-prefixed
//
// A truncated, corrupt or foreign entry (wrong magic, version, size, checksum or key) decodes to
// nothing and is rebuilt by the cache.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "molaccel/runtime.hpp"

namespace molaccel::detail {

inline constexpr std::uint32_t kJitCacheFormat = 1;

std::string encode_cache_entry(const JitProgram& program);
std::optional<JitProgram> decode_cache_entry(std::string_view bytes, std::string_view expected_key);

}  // namespace molaccel::detail

// On-disk format of JIT cache entries (internal; exposed for tests and the fuzz target).
//
//   magic             "MOLACCEL-JIT\n" (NVRTC programs) or "MOLACCEL-CLBIN\n" (OpenCL binaries)
//   u32               format version
//   u64               payload size
//   u64               hash64 checksum of the payload, seeded with the version
//   payload           NVRTC: key, arch, log, cubin, name count, (name, lowered name)*;
//                     OpenCL: key, binary; u64-length-prefixed
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

// The envelope every cache entry shares (magic, version, size, checksum), around `payload`.
std::string frame_cache_entry(std::string_view magic, std::uint32_t version, std::string_view payload);
// The payload of an entry framed so; nothing when its magic, version, size or checksum is wrong.
std::optional<std::string_view> unframe_cache_entry(std::string_view bytes, std::string_view magic,
                                                    std::uint32_t version);
// Payload fields: u64 values and u64-length-prefixed strings.
void put_cache_u64(std::string& out, std::uint64_t v);
void put_cache_string(std::string& out, std::string_view s);
struct CacheCursor {
  std::string_view data;
  bool ok = true;  // false once a read ran past the end
  std::uint64_t u64();
  std::string str();
};

std::string encode_cache_entry(const JitProgram& program);
std::optional<JitProgram> decode_cache_entry(std::string_view bytes, std::string_view expected_key);

}  // namespace molaccel::detail

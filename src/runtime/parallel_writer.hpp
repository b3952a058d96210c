// Large text outputs formatted on several threads and written in order (internal to molaccel).
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

namespace molaccel::io {

// How an output is stored, from its name: "*.gz" -> gzip, "*.zst" -> Zstandard, anything else ->
// plain. Throws NotCompiled for .zst in a build without libzstd (call it before the long work).
enum class Compression { none, gzip, zstd };
Compression compression_for(const std::filesystem::path& path);

// Writes `n_blocks` blocks to `f` in block order. `format(block, text)` appends block `block`'s
// bytes to `text` (empty on entry); it runs on up to `threads` threads (<= 0: every core) while
// finished blocks are written, at most a few blocks per thread held in memory. With gzip each block
// becomes one independent gzip member (concatenated members are one valid gzip stream), with zstd
// one independent Zstandard frame (concatenated frames are one valid .zst file).
// `display` names the file in errors.
void write_blocks_in_order(std::FILE* f, const std::string& display, std::size_t n_blocks, int threads,
                           const std::function<void(std::size_t block, std::string& text)>& format,
                           Compression compression = Compression::none);

}  // namespace molaccel::io

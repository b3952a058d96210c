// What each MPI rank reads of a molecule file, and the wire form of molecules travelling between
// ranks (src/lingo/distributed_*.cpp): a rank's byte range of a plain .smi, its range of lines of a
// gzip one, and a MoleculeSet packed into bytes and unpacked again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::detail {

// Rank `rank` of `ranks`'s bytes of `path` and its line count (a last line without '\n' counts).
// Rank r's range starts at the first line that starts at or after size x r / N, so every line
// belongs to exactly one rank; a rank may get no bytes.
std::pair<std::string, std::size_t> read_slice(const std::filesystem::path& path, int rank, int ranks);

// This rank's lines of a gzip file, as text ('\n' after each), its line count and the lines before
// it. The decompressed stream is read twice, never held whole: once to count its lines L, then
// up to the end of this rank's lines [L r / N, L (r + 1) / N), keeping only those.
struct TextSlice {
  std::string text;
  std::size_t lines = 0, lines_before = 0;
};
TextSlice read_gzip_slice(const std::filesystem::path& path, int rank, int ranks);

// A set as bytes (names length-prefixed, then the arrays) and back, appended to `set`. Without
// names: a block of queries travelling the ring (only its home rank writes their names).
template <class T>
void put(std::vector<std::byte>& out, const T* data, std::size_t n) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  out.insert(out.end(), p, p + n * sizeof(T));
}
std::vector<std::byte> pack(const MoleculeSet& set, bool with_names = true);
void unpack_into(MoleculeSet& set, std::span<const std::byte> bytes);

// Reads back what put() wrote; a message shorter than its contents is an error.
class Unpacker {
 public:
  explicit Unpacker(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  void take(T* out, std::size_t n) {
    MOLACCEL_EXPECTS(at_ + n * sizeof(T) <= bytes_.size(), "a rank's molecules arrived truncated");
    if (n) std::memcpy(out, bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  template <class T>
  void append(std::vector<T>& v, std::size_t n) {
    const std::size_t old = v.size();
    v.resize(old + n);
    take(v.data() + old, n);
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

}  // namespace molaccel::lingo::detail

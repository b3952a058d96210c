// libFuzzer target for reading a database directory (Database::open and open_shard): a small
// DBDIR is written once; each input replaces the body of one of its files (the first byte picks
// the file; the file's header, with the build id, is kept so the reader gets past it). Either the
// directory is refused with InputError, or the whole database and every shard of 1-3 ranks agree:
// the same statistics, every shard's subjects sorted, in the alphabet, and together each subject
// once. The file is restored after each input.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "molaccel/align.hpp"

namespace {

namespace al = molaccel::align;
namespace fs = std::filesystem;

constexpr std::array<const char*, 5> kFiles = {"residues.bin", "offsets.bin", "order.bin", "ids.index.bin",
                                               "ids.txt"};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

// A database of 40 subjects, three of them above 2,048 residues (the shards' singly dealt tail).
struct Directory {
  fs::path dir;
  std::vector<std::string> pristine;
  Directory() {
    std::string name = (fs::temp_directory_path() / "molaccel-fuzz-db-XXXXXX").string();
    if (!::mkdtemp(name.data())) std::abort();
    dir = name;
    std::string fasta;
    const std::string letters = "ACDEFGHIKLMNPQRSTVWY";
    for (int i = 0; i < 40; ++i) {
      const int length = i < 3 ? 2100 + 400 * i : 5 + (i * 37) % 300;
      fasta += ">s" + std::to_string(i) + "\n";
      for (int j = 0; j < length; ++j) fasta += letters[std::size_t(i * 7 + j * 13) % letters.size()];
      fasta += "\n";
    }
    al::Database::from_sequences(al::parse_fasta("fuzz.fa", fasta)).write(dir / "db");
    for (const char* f : kFiles) pristine.push_back(read_file(dir / "db" / f));
  }
  ~Directory() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// Bytes of a file that stay: the 64-byte header of the binary files, the first line of ids.txt.
std::size_t kept(std::size_t file, const std::string& bytes) {
  if (file + 1 < kFiles.size()) return std::min<std::size_t>(64, bytes.size());
  const auto nl = bytes.find('\n');
  return nl == std::string::npos ? bytes.size() : nl + 1;
}

void check(const fs::path& db_dir) {
  const auto whole = al::Database::open(db_dir);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    std::vector<int> seen(whole.size(), 0);
    for (int r = 0; r < ranks; ++r) {
      const auto shard = al::Database::open_shard(db_dir, r, ranks);
      if (shard.total_residues() != whole.total_residues() || shard.total_sequences() != whole.size())
        __builtin_trap();
      for (std::size_t i = 0; i < shard.size(); ++i) {
        if (i > 0 && shard.length(i - 1) > shard.length(i)) __builtin_trap();
        for (auto c : shard.sequence(i))
          if (c >= al::kAlphabetSize) __builtin_trap();
        if (shard.original_index(i) >= whole.size()) __builtin_trap();
        ++seen[shard.original_index(i)];
      }
    }
    for (int s : seen)
      if (s != 1) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Directory d;
  if (size == 0) return 0;
  const std::size_t file = data[0] % kFiles.size();
  const fs::path path = d.dir / "db" / kFiles[file];
  const std::string& pristine = d.pristine[file];
  write_file(path, pristine.substr(0, kept(file, pristine)) +
                       std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    check(d.dir / "db");
  } catch (const molaccel::InputError&) {
  }
  write_file(path, pristine);
  return 0;
}

// Private to the align engine: the storage behind a Database and the read-only file mapping that
// database.cpp (whole directories) and database_shard.cpp (one rank's shard) share.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "molaccel/align.hpp"

namespace molaccel::align {

inline constexpr const char* kDatabaseFormatName = "molaccel-align-db";
inline constexpr int kDatabaseFormatVersion = 2;

// Every file of a DBDIR carries the build id of the makedb run that wrote it (32 hex digits, also
// in molaccel-align.json), so a directory whose files come from different builds is refused. The
// binary files start with a 64-byte header: kFileMagic (16 bytes), the id, 16 zero bytes; ids.txt
// starts with the line "molaccel-align-db <id>".
inline constexpr std::size_t kFileHeaderBytes = 64;
inline constexpr std::string_view kFileMagic = "MOLACCEL-ALIGNDB";
inline constexpr std::size_t kBuildIdDigits = 32;
std::string binary_file_header(const std::string& build_id);
std::string ids_file_header(const std::string& build_id);
// Throws InputError naming `path` unless `header` (the file's first bytes) carries `build_id`.
void check_binary_header(const std::filesystem::path& path, std::string_view header,
                         const std::string& build_id);
void check_ids_header(const std::filesystem::path& path, std::string_view text, const std::string& build_id);
// Whether any of `n` residue codes is kAlphabetSize or more (a damaged residues.bin).
bool has_code_outside_alphabet(const std::uint8_t* codes, std::uint64_t n);

// A read-only memory mapping that lives as long as the database storage.
class MappedFile {
 public:
  MappedFile() = default;
  // The whole file, or `length` bytes from `offset` (rounded out to whole pages; data() points at
  // `offset`). `length` = npos: to the end of the file.
  explicit MappedFile(const std::filesystem::path& path, std::size_t offset = 0,
                      std::size_t length = std::string::npos) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(path.string(), 0, fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw InputError(path.string(), 0, "cannot stat");
    file_size_ = static_cast<std::size_t>(st.st_size);
    if (offset > file_size_) offset = file_size_;
    size_ = length == std::string::npos ? file_size_ - offset : std::min(length, file_size_ - offset);
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t start = offset / page * page;
    if (size_ > 0) {
      mapped_bytes_ = size_ + (offset - start);
      void* p = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_PRIVATE, fd_, static_cast<off_t>(start));
      if (p == MAP_FAILED)
        throw InputError(path.string(), 0, fmt::format("cannot map: {}", std::strerror(errno)));
      base_ = static_cast<const std::uint8_t*>(p);
      data_ = base_ + (offset - start);
    }
  }
  ~MappedFile() {
    if (base_) ::munmap(const_cast<std::uint8_t*>(base_), mapped_bytes_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t file_size() const { return file_size_; }

 private:
  int fd_ = -1;
  const std::uint8_t* base_ = nullptr;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0, mapped_bytes_ = 0, file_size_ = 0;
};

struct Database::Storage {
  std::vector<std::string> ids;             // input order; a shard: its own subjects' ids, by id_originals
  std::vector<std::uint32_t> id_originals;  // a shard: input positions of `ids`, ascending
  // open(): the ids stay in the mapped ids.txt (`ids` is empty): id i is the text from
  // id_start[i] to the newline before id_start[i + 1], made a std::string the first time it is
  // asked for (a search reports a few hundred of a database's ids).
  std::unique_ptr<MappedFile> ids_mapping;
  std::vector<std::uint64_t> id_start;  // N+1
  std::unique_ptr<std::atomic<const std::string*>[]> id_strings;
  const std::string& mapped_id(std::uint32_t original) const;
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    for (std::size_t i = 0; id_strings && i + 1 < id_start.size(); ++i) delete id_strings[i].load();
  }
  std::vector<std::uint64_t> offsets;  // sorted order, N+1 (a shard: its own, from 0)
  std::vector<std::uint32_t> order;    // sorted -> input position
  std::vector<std::uint8_t> owned_residues;
  std::unique_ptr<MappedFile> mapping;
  const std::uint8_t* residues = nullptr;
  std::uint64_t total_residues = 0, total_sequences = 0;  // of the whole database
};

// The checked header of a DBDIR (molaccel-align.json): throws InputError for another format or
// version, a foreign alphabet or missing fields.
struct DatabaseMeta {
  std::size_t sequences = 0;
  std::uint64_t residues = 0;
  std::string build_id;
};
DatabaseMeta read_database_meta(const std::filesystem::path& dbdir);

// Size of a file (0 with `exists` false when there is none).
std::uint64_t file_size_or_zero(const std::filesystem::path& path, bool& exists);
// Throws InputError naming `path` unless it has exactly `expected` bytes (checked before anything
// is allocated for it, so a header claiming 10^12 sequences is an error, not std::bad_alloc).
void check_file_size(const std::filesystem::path& path, std::uint64_t expected, const DatabaseMeta& meta);

}  // namespace molaccel::align

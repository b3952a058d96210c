// The search database: sequences sorted by length, in memory or memory-mapped from a DBDIR.
//
// DBDIR layout (all integers little-endian; every binary file after a 64-byte header with the
// build id, ids.txt after a header line with it: database_storage.hpp):
//   molaccel-align.json  format, version, build id, counts, alphabet
//   residues.bin         encoded residues of all sequences, in sorted order, concatenated
//   offsets.bin          uint64 x (N+1): sequence i (sorted) is residues[offsets[i], offsets[i+1])
//   order.bin            uint32 x N: position in the input FASTA of sorted sequence i
//   ids.txt              N lines: ids in input order
//   ids.index.bin        uint64 x (N+1): byte offset in ids.txt of id i (input order), then the
//                        file size; lets one MPI rank read only its shard's ids
//
// write() builds the directory under a temporary name next to the target and swaps it in whole
// (an atomic exchange of the two names where the filesystem has one), so a failed or interrupted
// makedb leaves the old database as it was; the old one is removed only after the new one is in
// place.
#include <signal.h>
#include <stdio.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "align/io/database_storage.hpp"
#include "molaccel/align.hpp"
#include "runtime/resource_limits.hpp"

namespace molaccel::align {

namespace {

constexpr const char* kFormatName = kDatabaseFormatName;
constexpr int kFormatVersion = kDatabaseFormatVersion;

static_assert(std::endian::native == std::endian::little, "the database format is little-endian");

// An array file: its header (build id) and exactly `expected_count` values; the size is checked
// (check_file_size) before this allocates.
template <class T>
std::vector<T> read_array(const std::filesystem::path& path, std::size_t expected_count,
                          const DatabaseMeta& meta) {
  check_file_size(path, kFileHeaderBytes + expected_count * sizeof(T), meta);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), 0, "cannot open");
  std::string header(kFileHeaderBytes, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  check_binary_header(path, header, meta.build_id);
  std::vector<T> values(expected_count);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(expected_count * sizeof(T)));
  if (!in) throw InputError(path.string(), 0, "cannot read (database damaged)");
  return values;
}

std::string printable_id(std::string_view id) {
  std::string out;
  for (char c : id) out += std::isxdigit(static_cast<unsigned char>(c)) ? c : '?';
  return out;
}

std::string new_build_id() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", static_cast<std::uint32_t>(random()));
  return id;
}

}  // namespace

std::string binary_file_header(const std::string& build_id) {
  std::string header(kFileMagic);
  header += build_id;
  header.resize(kFileHeaderBytes, '\0');
  return header;
}

std::string ids_file_header(const std::string& build_id) {
  return fmt::format("{} {}\n", kDatabaseFormatName, build_id);
}

// Eight bytes at a time: a byte's low seven bits plus 128 - kAlphabetSize reach bit 7 exactly when
// they are kAlphabetSize or more (no carry leaves the byte: at most 127 + 102), and a byte of 128
// or more has bit 7 itself.
bool has_code_outside_alphabet(const std::uint8_t* codes, std::uint64_t n) {
  static_assert(kAlphabetSize > 0 && kAlphabetSize < 128);
  constexpr std::uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x80 * kOnes, kLow = 0x7f * kOnes;
  constexpr std::uint64_t kAdd = (128 - kAlphabetSize) * kOnes;
  std::uint64_t i = 0, bits = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x;
    std::memcpy(&x, codes + i, sizeof x);
    bits |= (((x & kLow) + kAdd) | x) & kHigh;
  }
  for (; i < n; ++i) bits |= codes[i] >= kAlphabetSize ? kHigh : 0;
  return bits != 0;
}

void check_binary_header(const std::filesystem::path& path, std::string_view header,
                         const std::string& build_id) {
  if (header.size() < kFileHeaderBytes || header.substr(0, kFileMagic.size()) != kFileMagic)
    throw InputError(path.string(), 0,
                     "not a file of an align database of this version: rebuild it with makedb");
  const std::string_view id = header.substr(kFileMagic.size(), kBuildIdDigits);
  if (id != build_id)
    throw InputError(
        path.string(), 0,
        fmt::format("comes from another makedb run (build {}) than molaccel-align.json (build {}): "
                    "the directory mixes two databases; rebuild it with makedb",
                    printable_id(id), build_id));
}

void check_ids_header(const std::filesystem::path& path, std::string_view text, const std::string& build_id) {
  const std::string expected = ids_file_header(build_id);
  if (text.substr(0, expected.size()) == expected) return;
  const std::string prefix = fmt::format("{} ", kDatabaseFormatName);
  if (text.substr(0, prefix.size()) != prefix)
    throw InputError(path.string(), 1,
                     "not the ids of an align database of this version: rebuild it with makedb");
  throw InputError(
      path.string(), 1,
      fmt::format("comes from another makedb run (build {}) than molaccel-align.json (build {}): "
                  "the directory mixes two databases; rebuild it with makedb",
                  printable_id(text.substr(prefix.size(), kBuildIdDigits)), build_id));
}

std::uint64_t file_size_or_zero(const std::filesystem::path& path, bool& exists) {
  struct stat st {};
  exists = ::stat(path.c_str(), &st) == 0;
  return exists ? static_cast<std::uint64_t>(st.st_size) : 0;
}

void check_file_size(const std::filesystem::path& path, std::uint64_t expected, const DatabaseMeta& meta) {
  bool exists = false;
  const std::uint64_t size = file_size_or_zero(path, exists);
  if (!exists) throw InputError(path.string(), 0, "missing (database damaged: rebuild it with makedb)");
  if (size != expected)
    throw InputError(
        path.string(), 0,
        fmt::format("has {} bytes, but molaccel-align.json ({} sequences, {} residues) needs {}: "
                    "the files do not belong together (database damaged or mixed); rebuild it "
                    "with makedb",
                    size, meta.sequences, meta.residues, expected));
}

Database Database::from_sequences(const SequenceSet& sequences) {
  auto storage = std::make_shared<Storage>();
  const std::size_t n = sequences.size();
  if (n > std::numeric_limits<std::uint32_t>::max()) throw Error("database has more than 2^32 sequences");
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  auto length = [&](std::uint32_t i) { return sequences.offsets[i + 1] - sequences.offsets[i]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return length(a) < length(b); });
  storage->ids = sequences.ids;
  storage->order = order;
  storage->offsets.reserve(n + 1);
  storage->offsets.push_back(0);
  storage->owned_residues.reserve(sequences.residues.size());
  for (auto i : order) {
    auto s = sequences.sequence(i);
    if (s.size() > std::numeric_limits<std::uint32_t>::max() / 2)
      throw Error(fmt::format("sequence '{}' is too long", sequences.ids[i]));
    storage->owned_residues.insert(storage->owned_residues.end(), s.begin(), s.end());
    storage->offsets.push_back(storage->owned_residues.size());
  }
  storage->residues = storage->owned_residues.data();
  storage->total_residues = storage->offsets.back();
  storage->total_sequences = n;
  Database db;
  db.storage_ = std::move(storage);
  db.begin_ = 0;
  db.end_ = n;
  return db;
}

Database Database::from_fasta(const std::filesystem::path& path) {
  return from_sequences(read_fasta(path));
}

DatabaseMeta read_database_meta(const std::filesystem::path& dbdir) {
  const auto meta_path = dbdir / "molaccel-align.json";
  nlohmann::json meta;
  {
    std::ifstream in(meta_path);
    if (!in)
      throw InputError(meta_path.string(), 0,
                       "cannot open (is this a database made by 'molaccel align makedb'?)");
    try {
      meta = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw InputError(meta_path.string(), 0, fmt::format("not valid JSON: {}", e.what()));
    }
  }
  DatabaseMeta m;
  try {
    if (meta.at("format").get<std::string>() != kFormatName)
      throw InputError(meta_path.string(), 0, "not an align database");
    if (meta.at("version").get<int>() != kFormatVersion)
      throw InputError(meta_path.string(), 0,
                       fmt::format("database format version {} (this build reads {}): rebuild it with makedb",
                                   meta.at("version").get<int>(), kFormatVersion));
    if (meta.at("alphabet").get<std::string>() != kAlphabet)
      throw InputError(meta_path.string(), 0,
                       "database uses another residue encoding: rebuild it with makedb");
    m.sequences = meta.at("sequences").get<std::size_t>();
    m.residues = meta.at("residues").get<std::uint64_t>();
    m.build_id = meta.at("build_id").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(meta_path.string(), 0, fmt::format("missing or bad field: {}", e.what()));
  }
  if (m.build_id.size() != kBuildIdDigits || !std::all_of(m.build_id.begin(), m.build_id.end(), [](char c) {
        return std::isxdigit(static_cast<unsigned char>(c));
      }))
    throw InputError(meta_path.string(), 0, "bad build_id (32 hex digits expected)");
  if (m.sequences > std::numeric_limits<std::uint32_t>::max())
    throw InputError(
        meta_path.string(), 0,
        fmt::format("claims {} sequences; a database holds at most 2^32 - 1 (damaged header?)", m.sequences));
  if (m.sequences > m.residues)
    throw InputError(
        meta_path.string(), 0,
        fmt::format("claims {} sequences but {} residues (every sequence has at least one): damaged "
                    "header",
                    m.sequences, m.residues));
  return m;
}

Database Database::open(const std::filesystem::path& dbdir) {
  const DatabaseMeta meta = read_database_meta(dbdir);
  const std::size_t n = meta.sequences;
  const std::uint64_t residues = meta.residues;
  // Sizes first, then memory, before anything is allocated.
  check_file_size(dbdir / "offsets.bin", kFileHeaderBytes + (n + 1) * sizeof(std::uint64_t), meta);
  check_file_size(dbdir / "order.bin", kFileHeaderBytes + n * sizeof(std::uint32_t), meta);
  check_file_size(dbdir / "residues.bin", kFileHeaderBytes + residues, meta);
  // ids.index.bin (read by open_shard) must belong to this build too.
  bool has_index = false;
  (void)file_size_or_zero(dbdir / "ids.index.bin", has_index);
  if (has_index) {
    check_file_size(dbdir / "ids.index.bin", kFileHeaderBytes + (n + 1) * sizeof(std::uint64_t), meta);
    std::ifstream in(dbdir / "ids.index.bin", std::ios::binary);
    std::string header(kFileHeaderBytes, '\0');
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
    check_binary_header(dbdir / "ids.index.bin", header, meta.build_id);
  }
  bool ids_exist = false;
  const std::uint64_t id_bytes = file_size_or_zero(dbdir / "ids.txt", ids_exist);
  if (!ids_exist)
    throw InputError((dbdir / "ids.txt").string(), 0, "missing (database damaged: rebuild it with makedb)");
  // In memory: offsets, order, the ids (their text, where each starts, a pointer for each one's
  // string) and the permutation check; the residues are mapped, not read.
  const double index_bytes =
      28.0 * static_cast<double>(n) + static_cast<double>(id_bytes) + static_cast<double>(n) / 8;
  if (const std::uint64_t available = molaccel::detail::available_memory().value_or(0);
      available > 0 && index_bytes > static_cast<double>(available))
    throw InputError(
        (dbdir / "molaccel-align.json").string(), 0,
        fmt::format("the index of this database ({} sequences) needs about {:.1f} GiB of memory and "
                    "{:.1f} GiB are available: search it with several MPI ranks (mpirun -np K "
                    "molaccel align search ...), each of which reads only its shard",
                    n, index_bytes / (1u << 30), static_cast<double>(available) / (1u << 30)));
  auto storage = std::make_shared<Storage>();
  storage->offsets = read_array<std::uint64_t>(dbdir / "offsets.bin", n + 1, meta);
  storage->order = read_array<std::uint32_t>(dbdir / "order.bin", n, meta);
  // Structural checks: a damaged database must fail here, not inside a kernel.
  const auto offsets_path = (dbdir / "offsets.bin").string();
  if (storage->offsets.front() != 0 || storage->offsets.back() != residues)
    throw InputError(offsets_path, 0, "offsets do not span the residues");
  for (std::size_t i = 0; i < n; ++i) {
    const auto len = storage->offsets[i + 1] - storage->offsets[i];
    if (storage->offsets[i + 1] < storage->offsets[i] || len == 0)
      throw InputError(offsets_path, 0, fmt::format("sequence {} has a bad extent", i));
    if (i > 0 && len < storage->offsets[i] - storage->offsets[i - 1])
      throw InputError(offsets_path, 0, "sequences are not sorted by length");
  }
  std::vector<bool> seen(n, false);
  for (auto o : storage->order) {
    if (o >= n || seen[o]) throw InputError((dbdir / "order.bin").string(), 0, "not a permutation");
    seen[o] = true;
  }
  storage->mapping = std::make_unique<MappedFile>(dbdir / "residues.bin");
  if (storage->mapping->size() != kFileHeaderBytes + residues)
    throw InputError(
        (dbdir / "residues.bin").string(), 0,
        fmt::format("has {} bytes, expected {}", storage->mapping->size(), kFileHeaderBytes + residues));
  check_binary_header(
      dbdir / "residues.bin",
      std::string_view(reinterpret_cast<const char*>(storage->mapping->data()), kFileHeaderBytes),
      meta.build_id);
  storage->residues = storage->mapping->data() + kFileHeaderBytes;
  {
    // One pass over the mapping, on all cores (it also faults the pages in, in parallel).
    const auto* r = storage->residues;
    std::atomic<bool> bad{false};
    parallel_for(static_cast<std::size_t>(residues), 0, std::size_t{8} << 20,
                 [&](std::size_t b, std::size_t e) {
                   if (has_code_outside_alphabet(r + b, e - b)) bad = true;
                 });
    if (bad) throw InputError((dbdir / "residues.bin").string(), 0, "contains codes outside the alphabet");
  }
  {
    // Ids: where each starts in the mapped file (no string is made here).
    const auto ids_path = dbdir / "ids.txt";
    storage->ids_mapping = std::make_unique<MappedFile>(ids_path);
    const MappedFile& file = *storage->ids_mapping;
    const char* text = reinterpret_cast<const char*>(file.data());
    check_ids_header(ids_path, std::string_view(text, file.size()), meta.build_id);
    std::size_t at = ids_file_header(meta.build_id).size();
    storage->id_start.reserve(n + 1);
    while (at < file.size()) {
      storage->id_start.push_back(at);
      const void* nl = std::memchr(text + at, '\n', file.size() - at);
      at = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - text) + 1 : file.size() + 1;
    }
    if (storage->id_start.size() != n)
      throw InputError(ids_path.string(), 0,
                       fmt::format("has {} ids, expected {}", storage->id_start.size(), n));
    storage->id_start.push_back(at);  // one past the last id's newline (or end of file)
    storage->id_strings = std::make_unique<std::atomic<const std::string*>[]>(n);
  }
  storage->total_residues = residues;
  storage->total_sequences = n;
  Database db;
  db.storage_ = std::move(storage);
  db.begin_ = 0;
  db.end_ = n;
  return db;
}

Database Database::load(const std::filesystem::path& fasta_or_dbdir) {
  std::error_code ec;
  if (std::filesystem::is_directory(fasta_or_dbdir, ec)) return open(fasta_or_dbdir);
  return from_fasta(fasta_or_dbdir);
}

namespace {

// ".NAME.makedb-PID-RANDOM": a database being built, next to NAME.
std::string temporary_prefix(const std::filesystem::path& target) {
  return fmt::format(".{}.makedb-", target.filename().string());
}

// Directories left by makedb runs of `target` that were killed (their process is gone).
void remove_stale_temporaries(const std::filesystem::path& target) {
  const std::string prefix = temporary_prefix(target);
  std::error_code ec;
  const auto parent = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove_all(entry.path(), ec);
  }
}

// Puts the directory `built` in place of `target` (which may exist): an atomic exchange where the
// filesystem has one, else two renames; the old database is removed after the new one is in place.
void swap_into_place(const std::filesystem::path& built, const std::filesystem::path& target) {
  std::error_code ec;
  const bool replacing = std::filesystem::exists(target, ec);
  if (!replacing) {
    if (::rename(built.c_str(), target.c_str()) != 0)
      throw Error(fmt::format("{}: cannot move the new database into place: {}", target.string(),
                              std::strerror(errno)));
    return;
  }
  if (::renameat2(AT_FDCWD, built.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    std::filesystem::remove_all(built, ec);  // now the old database
    return;
  }
  if (errno != EINVAL && errno != ENOSYS)
    throw Error(fmt::format("{}: cannot move the new database into place: {}", target.string(),
                            std::strerror(errno)));
  const auto old = std::filesystem::path(built.string() + "-old");
  if (::rename(target.c_str(), old.c_str()) != 0)
    throw Error(
        fmt::format("{}: cannot move the old database aside: {}", target.string(), std::strerror(errno)));
  if (::rename(built.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::rename(old.c_str(), target.c_str());
    throw Error(
        fmt::format("{}: cannot move the new database into place: {}", target.string(), std::strerror(err)));
  }
  std::filesystem::remove_all(old, ec);
}

// The files of `db` into the directory `dbdir`, each starting with the build id; errors name the
// file under `target`, the directory they are for.
void write_files(const Database& db, const std::filesystem::path& dbdir, const std::string& build_id,
                 const std::filesystem::path& target) {
  const std::uint64_t* db_offsets = db.offsets();
  const auto first = db_offsets[0];
  const auto count = db.size();
  const std::string header = binary_file_header(build_id);
  auto write_bytes = [&](const std::filesystem::path& path, const void* data, std::size_t bytes) {
    write_file_atomically(path, [&](std::FILE* f) {
      if (std::fwrite(header.data(), 1, header.size(), f) != header.size() ||
          (bytes && std::fwrite(data, 1, bytes, f) != bytes))
        throw Error(
            fmt::format("cannot write {}: {}", (target / path.filename()).string(), std::strerror(errno)));
    });
  };
  write_bytes(dbdir / "residues.bin", db.residue_data() + first, db.residues());
  std::vector<std::uint64_t> offsets(count + 1);
  std::vector<std::uint32_t> order(count);
  for (std::size_t i = 0; i <= count; ++i) offsets[i] = db_offsets[i] - first;
  // A slice is written as a database of its own: renumber input positions densely.
  std::vector<std::uint32_t> originals(count);
  for (std::size_t i = 0; i < count; ++i) originals[i] = db.original_index(i);
  std::vector<std::uint32_t> sorted_originals = originals;
  std::sort(sorted_originals.begin(), sorted_originals.end());
  for (std::size_t i = 0; i < count; ++i)
    order[i] = static_cast<std::uint32_t>(
        std::lower_bound(sorted_originals.begin(), sorted_originals.end(), originals[i]) -
        sorted_originals.begin());
  write_bytes(dbdir / "offsets.bin", offsets.data(), offsets.size() * sizeof(std::uint64_t));
  write_bytes(dbdir / "order.bin", order.data(), order.size() * sizeof(std::uint32_t));
  const std::string ids_header = ids_file_header(build_id);
  std::vector<std::uint64_t> id_index{ids_header.size()};
  write_file_atomically(dbdir / "ids.txt", [&](std::FILE* f) {
    fmt::print(f, "{}", ids_header);
    for (auto original : sorted_originals) {
      const auto& id = db.id_of_original(original);
      fmt::print(f, "{}\n", id);
      id_index.push_back(id_index.back() + id.size() + 1);
    }
  });
  write_bytes(dbdir / "ids.index.bin", id_index.data(), id_index.size() * sizeof(std::uint64_t));
  nlohmann::json meta = {{"format", kFormatName},
                         {"version", kFormatVersion},
                         {"build_id", build_id},
                         {"alphabet", kAlphabet},
                         {"sequences", count},
                         {"residues", db.residues()},
                         {"max_length", count ? db.max_length() : 0},
                         {"sorted_by", "length, then input order"}};
  write_file_atomically(dbdir / "molaccel-align.json",
                        [&](std::FILE* f) { fmt::print(f, "{}\n", meta.dump(2)); });
}

}  // namespace

void Database::write(const std::filesystem::path& dbdir) const {
  MOLACCEL_EXPECTS(storage_ != nullptr, "empty database");
  std::filesystem::path target = dbdir.lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  std::error_code ec;
  const auto status = std::filesystem::status(target, ec);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(status))
      throw InputError(target.string(), 0,
                       "exists and is not a directory: refusing to replace it with a database");
    if (!std::filesystem::is_empty(target, ec) &&
        !std::filesystem::exists(target / "molaccel-align.json", ec))
      throw InputError(
          target.string(), 0,
          "exists and is not an align database (no molaccel-align.json): refusing to replace it");
  }
  const auto parent = target.parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  remove_stale_temporaries(target);
  const std::string build_id = new_build_id();
  const auto built = (parent.empty() ? std::filesystem::path(".") : parent) /
                     fmt::format("{}{}-{}", temporary_prefix(target), ::getpid(), build_id.substr(0, 8));
  if (!std::filesystem::create_directory(built, ec) || ec)
    throw Error(fmt::format("{}: cannot create the temporary database directory {}: {}", target.string(),
                            built.string(), ec ? ec.message() : "it exists"));
  try {
    write_files(*this, built, build_id, target);
    swap_into_place(built, target);
  } catch (...) {
    std::filesystem::remove_all(built, ec);
    throw;
  }
}

std::span<const std::uint8_t> Database::sequence(std::size_t sorted_index) const {
  const auto i = begin_ + sorted_index;
  return {storage_->residues + storage_->offsets[i],
          static_cast<std::size_t>(storage_->offsets[i + 1] - storage_->offsets[i])};
}
std::uint32_t Database::length(std::size_t sorted_index) const {
  const auto i = begin_ + sorted_index;
  return static_cast<std::uint32_t>(storage_->offsets[i + 1] - storage_->offsets[i]);
}
std::uint32_t Database::original_index(std::size_t sorted_index) const {
  return storage_->order[begin_ + sorted_index];
}
const std::string& Database::Storage::mapped_id(std::uint32_t original) const {
  if (static_cast<std::size_t>(original) + 1 >= id_start.size())
    throw std::out_of_range(
        fmt::format("id {} of a database of {} sequences", original, id_start.size() - 1));
  std::atomic<const std::string*>& slot = id_strings[original];
  if (const std::string* made = slot.load(std::memory_order_acquire)) return *made;
  const char* text = reinterpret_cast<const char*>(ids_mapping->data());
  auto id = std::make_unique<const std::string>(text + id_start[original],
                                                id_start[original + 1] - 1 - id_start[original]);
  const std::string* expected = nullptr;
  if (slot.compare_exchange_strong(expected, id.get(), std::memory_order_acq_rel)) return *id.release();
  return *expected;  // another thread made it first
}

const std::string& Database::id_of_original(std::uint32_t original) const {
  if (!storage_->id_start.empty()) return storage_->mapped_id(original);
  if (storage_->id_originals.empty()) return storage_->ids.at(original);
  // A shard read alone holds only its own subjects' ids.
  const auto& have = storage_->id_originals;
  const auto it = std::lower_bound(have.begin(), have.end(), original);
  if (it == have.end() || *it != original)
    throw Error(fmt::format("subject {} is not in this shard of the database", original), __FILE__, __LINE__);
  return storage_->ids[static_cast<std::size_t>(it - have.begin())];
}
std::uint64_t Database::residues() const noexcept {
  return storage_ ? storage_->offsets[end_] - storage_->offsets[begin_] : 0;
}
std::uint32_t Database::max_length() const noexcept {
  return size() ? length(size() - 1) : 0;
}
std::uint64_t Database::total_residues() const noexcept {
  return storage_ ? storage_->total_residues : 0;
}
std::uint64_t Database::total_sequences() const noexcept {
  return storage_ ? storage_->total_sequences : 0;
}
const std::uint8_t* Database::residue_data() const noexcept {
  return storage_ ? storage_->residues : nullptr;
}
const std::uint64_t* Database::offsets() const noexcept {
  return storage_ ? storage_->offsets.data() + begin_ : nullptr;
}

Database Database::slice(std::size_t begin, std::size_t end) const {
  MOLACCEL_EXPECTS(begin <= end && end <= size(), "slice out of range");
  Database db = *this;
  db.begin_ = begin_ + begin;
  db.end_ = begin_ + end;
  return db;
}

}  // namespace molaccel::align

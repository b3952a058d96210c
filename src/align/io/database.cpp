// The search database: sequences sorted by length, in memory or memory-mapped from a DBDIR.
//
// DBDIR layout (all integers little-endian):
//   molaccel-align.json  format, version, counts, alphabet, file sizes
//   residues.bin         encoded residues of all sequences, in sorted order, concatenated
//   offsets.bin          uint64 x (N+1): sequence i (sorted) is residues[offsets[i], offsets[i+1])
//   order.bin            uint32 x N: position in the input FASTA of sorted sequence i
//   ids.txt              N lines: ids in input order
//   ids.index.bin        uint64 x (N+1): byte offset in ids.txt of id i (input order), then the
//                        file size; lets one MPI rank read only its shard's ids (directories
//                        without it are read whole, as before)
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "align/io/database_storage.hpp"
#include "molaccel/align.hpp"

namespace molaccel::align {

namespace {

constexpr const char* kFormatName = kDatabaseFormatName;
constexpr int kFormatVersion = kDatabaseFormatVersion;

static_assert(std::endian::native == std::endian::little, "the database format is little-endian");

template <class T>
std::vector<T> read_array(const std::filesystem::path& path, std::size_t expected_count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), 0, "cannot open");
  std::vector<T> values(expected_count);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(expected_count * sizeof(T)));
  if (!in || in.peek() != std::char_traits<char>::eof())
    throw InputError(path.string(), 0,
                     fmt::format("expected exactly {} bytes (database damaged or of another version)",
                                 expected_count * sizeof(T)));
  return values;
}

}  // namespace

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
  } catch (const nlohmann::json::exception& e) {
    throw InputError(meta_path.string(), 0, fmt::format("missing or bad field: {}", e.what()));
  }
  return m;
}

Database Database::open(const std::filesystem::path& dbdir) {
  const DatabaseMeta meta = read_database_meta(dbdir);
  const std::size_t n = meta.sequences;
  const std::uint64_t residues = meta.residues;
  auto storage = std::make_shared<Storage>();
  storage->offsets = read_array<std::uint64_t>(dbdir / "offsets.bin", n + 1);
  storage->order = read_array<std::uint32_t>(dbdir / "order.bin", n);
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
  if (storage->mapping->size() != residues)
    throw InputError((dbdir / "residues.bin").string(), 0,
                     fmt::format("has {} bytes, expected {}", storage->mapping->size(), residues));
  storage->residues = storage->mapping->data();
  {
    // One pass over the mapping, on all cores (it also faults the pages in, in parallel).
    const auto* r = storage->residues;
    std::atomic<bool> bad{false};
    parallel_for(static_cast<std::size_t>(residues), 0, std::size_t{8} << 20,
                 [&](std::size_t b, std::size_t e) {
                   std::uint8_t any = 0;
                   for (std::size_t i = b; i < e; ++i)
                     any |= static_cast<std::uint8_t>(r[i] >= kAlphabetSize);
                   if (any) bad = true;
                 });
    if (bad) throw InputError((dbdir / "residues.bin").string(), 0, "contains codes outside the alphabet");
  }
  {
    // Ids: the mapped file split at newlines.
    const auto ids_path = dbdir / "ids.txt";
    const MappedFile ids(ids_path);
    const char* text = reinterpret_cast<const char*>(ids.data());
    std::size_t at = 0;
    storage->ids.reserve(n);
    while (at < ids.size()) {
      const void* nl = std::memchr(text + at, '\n', ids.size() - at);
      const std::size_t end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - text) : ids.size();
      storage->ids.emplace_back(text + at, end - at);
      at = end + 1;
    }
    if (storage->ids.size() != n)
      throw InputError(ids_path.string(), 0, fmt::format("has {} ids, expected {}", storage->ids.size(), n));
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

void Database::write(const std::filesystem::path& dbdir) const {
  MOLACCEL_EXPECTS(storage_ != nullptr, "empty database");
  std::filesystem::create_directories(dbdir);
  const auto first = storage_->offsets[begin_];
  const auto count = size();
  auto write_bytes = [](const std::filesystem::path& path, const void* data, std::size_t bytes) {
    write_file_atomically(path, [&](std::FILE* f) {
      if (bytes && std::fwrite(data, 1, bytes, f) != bytes)
        throw Error(fmt::format("cannot write {}", path.string()));
    });
  };
  write_bytes(dbdir / "residues.bin", storage_->residues + first, residues());
  std::vector<std::uint64_t> offsets(count + 1);
  std::vector<std::uint32_t> order(count);
  for (std::size_t i = 0; i <= count; ++i) offsets[i] = storage_->offsets[begin_ + i] - first;
  // A slice is written as a database of its own: renumber input positions densely.
  std::vector<std::uint32_t> originals(storage_->order.begin() + begin_, storage_->order.begin() + end_);
  std::vector<std::uint32_t> sorted_originals = originals;
  std::sort(sorted_originals.begin(), sorted_originals.end());
  for (std::size_t i = 0; i < count; ++i)
    order[i] = static_cast<std::uint32_t>(
        std::lower_bound(sorted_originals.begin(), sorted_originals.end(), originals[i]) -
        sorted_originals.begin());
  write_bytes(dbdir / "offsets.bin", offsets.data(), offsets.size() * sizeof(std::uint64_t));
  write_bytes(dbdir / "order.bin", order.data(), order.size() * sizeof(std::uint32_t));
  std::vector<std::uint64_t> id_index{0};
  write_file_atomically(dbdir / "ids.txt", [&](std::FILE* f) {
    for (auto original : sorted_originals) {
      const auto& id = id_of_original(original);
      fmt::print(f, "{}\n", id);
      id_index.push_back(id_index.back() + id.size() + 1);
    }
  });
  write_bytes(dbdir / "ids.index.bin", id_index.data(), id_index.size() * sizeof(std::uint64_t));
  nlohmann::json meta = {{"format", kFormatName},
                         {"version", kFormatVersion},
                         {"alphabet", kAlphabet},
                         {"sequences", count},
                         {"residues", residues()},
                         {"max_length", count ? max_length() : 0},
                         {"sorted_by", "length, then input order"}};
  // Written last: a DBDIR without it (an interrupted makedb) is rejected by open().
  write_file_atomically(dbdir / "molaccel-align.json",
                        [&](std::FILE* f) { fmt::print(f, "{}\n", meta.dump(2)); });
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
const std::string& Database::id_of_original(std::uint32_t original) const {
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

Database Database::shard(int rank, int ranks) const {
  MOLACCEL_EXPECTS(ranks >= 1 && rank >= 0 && rank < ranks, "bad shard rank");
  const auto* off = offsets();
  auto boundary = [&](int r) -> std::size_t {
    if (r == 0) return 0;
    if (r == ranks) return size();
    const auto target =
        off[0] + residues() * static_cast<std::uint64_t>(r) / static_cast<std::uint64_t>(ranks);
    return static_cast<std::size_t>(std::lower_bound(off, off + size(), target) - off);
  };
  return slice(boundary(rank), boundary(rank + 1));
}

}  // namespace molaccel::align

// One rank's shard of a DBDIR, read without reading the rest: the shard's boundaries are found by
// binary search with single reads of offsets.bin, then only the shard's offsets, order entries,
// residues (a mapping of that byte range) and ids (through ids.index.bin) are read. Every file's
// size and build id are checked first, as open() does. The result is
// the same view as Database::open(dbdir).shard(rank, ranks), whole-database statistics included.
#include <algorithm>

#include "align/io/database_storage.hpp"
#include "molaccel/align.hpp"

namespace molaccel::align {
namespace {

// Reads with pread, values counted from the end of the file header (after checking that it
// carries the database's build id); a short read means a damaged file.
class FileReader {
 public:
  FileReader(std::filesystem::path path, const std::string& build_id) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(path_.string(), 0, fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      throw InputError(path_.string(), 0, "cannot stat");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
    try {
      const auto header =
          read<char>(0, size_ < kFileHeaderBytes ? static_cast<std::size_t>(size_) : kFileHeaderBytes, 0);
      check_binary_header(path_, std::string_view(header.data(), header.size()), build_id);
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
  ~FileReader() { ::close(fd_); }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  template <class T>
  std::vector<T> read(std::uint64_t first, std::size_t count, std::uint64_t base = kFileHeaderBytes) const {
    std::vector<T> values(count);
    auto* out = reinterpret_cast<char*>(values.data());
    std::size_t want = count * sizeof(T), done = 0;
    const auto offset = base + first * sizeof(T);
    while (done < want) {
      const ssize_t got = ::pread(fd_, out + done, want - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw InputError(
            path_.string(), 0,
            fmt::format("cannot read {} bytes at offset {} (database damaged or truncated)", want, offset));
      done += static_cast<std::size_t>(got);
    }
    return values;
  }
  template <class T>
  T at(std::uint64_t index) const {
    return read<T>(index, 1)[0];
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace

Database Database::open_shard(const std::filesystem::path& dbdir, int rank, int ranks) {
  MOLACCEL_EXPECTS(ranks >= 1 && rank >= 0 && rank < ranks, "bad shard rank");
  const DatabaseMeta meta = read_database_meta(dbdir);
  const std::size_t n = meta.sequences;
  const std::uint64_t residues = meta.residues;
  // Sizes first (before anything is allocated), then the build id in each file's header.
  check_file_size(dbdir / "offsets.bin", kFileHeaderBytes + (n + 1) * sizeof(std::uint64_t), meta);
  check_file_size(dbdir / "order.bin", kFileHeaderBytes + n * sizeof(std::uint32_t), meta);
  check_file_size(dbdir / "residues.bin", kFileHeaderBytes + residues, meta);
  bool has_index = false;
  (void)file_size_or_zero(dbdir / "ids.index.bin", has_index);
  if (has_index)
    check_file_size(dbdir / "ids.index.bin", kFileHeaderBytes + (n + 1) * sizeof(std::uint64_t), meta);
  const FileReader offsets_file(dbdir / "offsets.bin", meta.build_id);
  const auto offsets_path = offsets_file.path().string();
  if (offsets_file.at<std::uint64_t>(0) != 0 || offsets_file.at<std::uint64_t>(n) != residues)
    throw InputError(offsets_path, 0, "offsets do not span the residues");

  // Database::shard's boundaries: the first sorted sequence whose start offset reaches the rank's
  // share of the residues (std::lower_bound over offsets[0, n)), one read per probe.
  auto boundary = [&](int r) -> std::size_t {
    if (r == 0) return 0;
    if (r == ranks) return n;
    const std::uint64_t target = residues * static_cast<std::uint64_t>(r) / static_cast<std::uint64_t>(ranks);
    std::size_t lo = 0, count = n;
    while (count > 0) {
      const std::size_t step = count / 2, mid = lo + step;
      if (offsets_file.at<std::uint64_t>(mid) < target) {
        lo = mid + 1;
        count -= step + 1;
      } else {
        count = step;
      }
    }
    return lo;
  };
  const std::size_t begin = boundary(rank), end = boundary(rank + 1);
  const std::size_t count = end - begin;

  auto storage = std::make_shared<Storage>();
  storage->total_residues = residues;
  storage->total_sequences = n;
  // Offsets: one before the shard too, so the sorted-by-length check covers the shard's start.
  const std::size_t first_read = begin > 0 ? begin - 1 : 0;
  const auto raw = offsets_file.read<std::uint64_t>(first_read, end + 1 - first_read);
  const std::uint64_t first = raw[begin - first_read];
  for (std::size_t i = begin - first_read; i + 1 < raw.size(); ++i) {
    const auto length = raw[i + 1] - raw[i];
    if (raw[i + 1] <= raw[i] || raw[i + 1] > residues)
      throw InputError(offsets_path, 0, fmt::format("sequence {} has a bad extent", first_read + i));
    if (i > 0 && length < raw[i] - raw[i - 1])
      throw InputError(offsets_path, 0, "sequences are not sorted by length");
  }
  storage->offsets.reserve(count + 1);
  for (std::size_t i = begin; i <= end; ++i) storage->offsets.push_back(raw[i - first_read] - first);

  const FileReader order_file(dbdir / "order.bin", meta.build_id);
  storage->order = order_file.read<std::uint32_t>(begin, count);
  std::vector<std::uint32_t> originals = storage->order;
  std::sort(originals.begin(), originals.end());
  for (std::size_t i = 0; i < originals.size(); ++i)
    if (originals[i] >= n || (i > 0 && originals[i] == originals[i - 1]))
      throw InputError(order_file.path().string(), 0, "not a permutation");

  const auto residues_path = dbdir / "residues.bin";
  const std::uint64_t shard_residues = storage->offsets.back();
  (void)FileReader(residues_path, meta.build_id);  // the header's build id
  storage->mapping = std::make_unique<MappedFile>(residues_path, kFileHeaderBytes + first, shard_residues);
  if (storage->mapping->file_size() != kFileHeaderBytes + residues)
    throw InputError(
        residues_path.string(), 0,
        fmt::format("has {} bytes, expected {}", storage->mapping->file_size(), kFileHeaderBytes + residues));
  storage->residues = storage->mapping->data();
  for (std::uint64_t i = 0; i < shard_residues; ++i)
    if (storage->residues[i] >= kAlphabetSize)
      throw InputError(residues_path.string(), 0,
                       fmt::format("contains codes outside the alphabet (byte {})", first + i));

  // Ids of the shard's subjects only: through ids.index.bin, or (where it was removed) by one scan
  // of ids.txt.
  const auto ids_path = dbdir / "ids.txt";
  const MappedFile ids(ids_path);
  const char* text = reinterpret_cast<const char*>(ids.data());
  check_ids_header(ids_path, std::string_view(text, ids.size()), meta.build_id);
  const std::uint64_t ids_start = ids_file_header(meta.build_id).size();
  storage->id_originals = originals;
  storage->ids.reserve(originals.size());
  if (has_index) {
    const FileReader index(dbdir / "ids.index.bin", meta.build_id);
    if (index.at<std::uint64_t>(n) != ids.size())
      throw InputError(index.path().string(), 0, "does not match ids.txt (database damaged)");
    for (auto original : originals) {
      const auto span = index.read<std::uint64_t>(original, 2);
      if (span[0] < ids_start || span[1] <= span[0] || span[1] > ids.size() || text[span[1] - 1] != '\n')
        throw InputError(index.path().string(), 0, fmt::format("bad entry {} (database damaged)", original));
      storage->ids.emplace_back(text + span[0], span[1] - 1 - span[0]);
    }
  } else {
    std::size_t at = ids_start, line = 0, next = 0;
    while (at < ids.size() && next < originals.size()) {
      const void* nl = std::memchr(text + at, '\n', ids.size() - at);
      const std::size_t stop =
          nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - text) : ids.size();
      if (line == originals[next]) {
        storage->ids.emplace_back(text + at, stop - at);
        ++next;
      }
      at = stop + 1;
      ++line;
    }
    if (next != originals.size())
      throw InputError(ids_path.string(), 0, fmt::format("has fewer ids than the {} sequences", n));
  }

  Database db;
  db.storage_ = std::move(storage);
  db.begin_ = 0;
  db.end_ = count;
  return db;
}

}  // namespace molaccel::align

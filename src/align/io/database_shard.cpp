// One rank's shard of a database. The length-sorted order is cut in two at kDealtSingly residues.
// The shorter part is cut into ranks x kBlocksPerRank blocks of about equal residue counts, dealt to
// the ranks in serpentine order (round t gives block t*N + i to rank i when t is even, to rank
// N-1-i when odd), so every rank holds the same mix of lengths and about 1/N of the residues. The
// long tail is dealt one subject at a time in the same serpentine order, so every rank holds the
// same number of long subjects, of about the same lengths. A rank's ranges, concatenated in sorted
// order, are still length-sorted; subjects keep their FASTA positions, so merged results do not
// depend on N.
//
// open_shard reads a DBDIR's shard without reading the rest: the tail's start and the block
// boundaries are found by binary search with single reads of offsets.bin, then only the shard's
// offsets, order entries, residues and ids (through ids.index.bin) are read. Every file's size and
// build id are checked first, as open() does. The result equals Database::open(dbdir).shard(rank,
// ranks), whole-database statistics included.
#include <algorithm>
#include <cstring>
#include <functional>

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
    read_into(first, count, values.data(), base);
    return values;
  }
  template <class T>
  void read_into(std::uint64_t first, std::size_t count, T* values,
                 std::uint64_t base = kFileHeaderBytes) const {
    auto* out = reinterpret_cast<char*>(values);
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

// Blocks per rank: enough that every rank samples the whole length distribution, few enough that
// a rank's boundary searches (2 x 16 binary searches of offsets.bin) stay negligible.
constexpr std::uint64_t kBlocksPerRank = 16;

// Subjects longer than this are dealt one by one. They score more slowly per residue (on a GPU,
// subjects above 3,000 residues go to the intra-task kernel), and in residue blocks the longest
// block held them all: the real 486k database's 702 subjects above 3,000 residues (1.7% of its
// residues) all went to rank 0 of 2, whose scoring took 0.784 s against rank 1's 0.702 s (2 x H200).
// The real database has about 2,000 subjects above this length, so a rank reads at most that many
// extra ranges.
constexpr std::uint64_t kDealtSingly = 2048;

// The rank that round t of a serpentine deal over `ranks` ranks gives its i-th item (i < ranks).
std::uint64_t serpentine(std::uint64_t t, std::uint64_t i, std::uint64_t ranks) {
  return t % 2 == 0 ? i : ranks - 1 - i;
}

// The first index in [0, n) for which `past` holds, `past` being false then true along the sorted
// order (n when it never holds).
std::size_t first_where(std::size_t n, const std::function<bool(std::size_t)>& past) {
  std::size_t lo = 0, count = n;
  while (count > 0) {
    const std::size_t step = count / 2, mid = lo + step;
    if (!past(mid)) {
      lo = mid + 1;
      count -= step + 1;
    } else {
      count = step;
    }
  }
  return lo;
}

// The sorted ranges [begin, end) of shard `rank` of `ranks` of `n` sequences, `start(i)` being
// sequence i's start offset (start(n): the residue count). The head, the subjects up to
// kDealtSingly residues: blocks j = 0 .. ranks x kBlocksPerRank, block j starting at the first
// sequence whose start reaches head_residues x j / blocks (a block deviates from its share by less
// than one sequence at each end). The tail: subject k of it to rank serpentine(k / ranks, k % ranks).
// Adjacent ranges are joined.
std::vector<std::pair<std::size_t, std::size_t>> shard_ranges(
    std::size_t n, const std::function<std::uint64_t(std::size_t)>& start, int rank, int ranks) {
  MOLACCEL_EXPECTS(ranks >= 1 && rank >= 0 && rank < ranks, "bad shard rank");
  const std::size_t tail =
      first_where(n, [&](std::size_t i) { return start(i + 1) - start(i) > kDealtSingly; });
  const std::uint64_t head_residues = start(tail);
  const auto blocks = static_cast<std::uint64_t>(ranks) * kBlocksPerRank;
  auto boundary = [&](std::uint64_t j) -> std::size_t {
    if (j == 0) return 0;
    if (j == blocks) return tail;
    // In 128 bits: residues x j must not wrap for any database size and rank count.
    const auto target =
        static_cast<std::uint64_t>(static_cast<unsigned __int128>(head_residues) * j / blocks);
    return first_where(tail, [&](std::size_t i) { return start(i) >= target; });
  };
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  auto add = [&](std::size_t begin, std::size_t end) {
    if (begin == end) return;
    if (!ranges.empty() && ranges.back().second == begin)
      ranges.back().second = end;
    else
      ranges.emplace_back(begin, end);
  };
  const auto r = static_cast<std::uint64_t>(rank), size = static_cast<std::uint64_t>(ranks);
  for (std::uint64_t t = 0; t < kBlocksPerRank; ++t) {
    const std::uint64_t j = t * size + serpentine(t, r, size);
    add(boundary(j), boundary(j + 1));
  }
  for (std::uint64_t t = 0;; ++t) {
    const std::uint64_t k = t * size + serpentine(t, r, size);
    if (k >= n - tail) break;
    add(tail + k, tail + k + 1);
  }
  return ranges;
}

}  // namespace

Database Database::shard(int rank, int ranks) const {
  const auto* off = offsets();
  const auto ranges = shard_ranges(
      size(), [&](std::size_t i) { return off[i] - off[0]; }, rank, ranks);
  auto storage = std::make_shared<Storage>();
  storage->total_residues = total_residues();
  storage->total_sequences = total_sequences();
  for (const auto& [begin, end] : ranges)
    for (std::size_t i = begin; i < end; ++i) {
      const auto s = sequence(i);
      storage->owned_residues.insert(storage->owned_residues.end(), s.begin(), s.end());
      storage->offsets.push_back(storage->owned_residues.size());
      storage->order.push_back(original_index(i));
    }
  storage->offsets.insert(storage->offsets.begin(), 0);
  storage->residues = storage->owned_residues.data();
  storage->id_originals = storage->order;
  std::sort(storage->id_originals.begin(), storage->id_originals.end());
  storage->ids.reserve(storage->id_originals.size());
  for (auto original : storage->id_originals) storage->ids.push_back(id_of_original(original));
  Database db;
  db.storage_ = std::move(storage);
  db.begin_ = 0;
  db.end_ = db.storage_->order.size();
  return db;
}

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
  const auto ranges = shard_ranges(
      n, [&](std::size_t i) { return offsets_file.at<std::uint64_t>(i); }, rank, ranks);

  auto storage = std::make_shared<Storage>();
  storage->total_residues = residues;
  storage->total_sequences = n;
  storage->offsets.push_back(0);
  const FileReader order_file(dbdir / "order.bin", meta.build_id);
  const auto residues_path = dbdir / "residues.bin";
  const FileReader residues_file(residues_path, meta.build_id);
  if (residues_file.size() != kFileHeaderBytes + residues)
    throw InputError(
        residues_path.string(), 0,
        fmt::format("has {} bytes, expected {}", residues_file.size(), kFileHeaderBytes + residues));
  for (const auto& [begin, end] : ranges) {
    // Offsets: one before the range too, so the sorted-by-length check covers the range's start.
    const std::size_t first_read = begin > 0 ? begin - 1 : 0;
    const auto raw = offsets_file.read<std::uint64_t>(first_read, end + 1 - first_read);
    for (std::size_t i = begin - first_read; i + 1 < raw.size(); ++i) {
      if (raw[i + 1] <= raw[i] || raw[i + 1] > residues)
        throw InputError(offsets_path, 0, fmt::format("sequence {} has a bad extent", first_read + i));
      if (i > 0 && raw[i + 1] - raw[i] < raw[i] - raw[i - 1])
        throw InputError(offsets_path, 0, "sequences are not sorted by length");
    }
    const std::uint64_t first = raw[begin - first_read], range_residues = raw.back() - first;
    const std::uint64_t at = storage->owned_residues.size();
    for (std::size_t i = begin - first_read + 1; i < raw.size(); ++i)
      storage->offsets.push_back(at + raw[i] - first);
    const auto order = order_file.read<std::uint32_t>(begin, end - begin);
    storage->order.insert(storage->order.end(), order.begin(), order.end());
    // Straight into place, then checked eight bytes at a time (the first bad byte is looked for
    // only when there is one).
    storage->owned_residues.resize(at + range_residues);
    std::uint8_t* codes = storage->owned_residues.data() + at;
    residues_file.read_into(first, static_cast<std::size_t>(range_residues), codes);
    if (has_code_outside_alphabet(codes, range_residues)) {
      const auto bad =
          std::find_if(codes, codes + range_residues, [](std::uint8_t c) { return c >= kAlphabetSize; });
      throw InputError(residues_path.string(), 0,
                       fmt::format("contains codes outside the alphabet (byte {})", first + (bad - codes)));
    }
  }
  storage->residues = storage->owned_residues.data();
  std::vector<std::uint32_t> originals = storage->order;
  std::sort(originals.begin(), originals.end());
  for (std::size_t i = 0; i < originals.size(); ++i)
    if (originals[i] >= n || (i > 0 && originals[i] == originals[i - 1]))
      throw InputError(order_file.path().string(), 0, "not a permutation");

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
    const FileReader index(dbdir / "ids.index.bin", meta.build_id);  // its header and size checked
    if (index.at<std::uint64_t>(n) != ids.size())
      throw InputError(index.path().string(), 0, "does not match ids.txt (database damaged)");
    // Mapped: one read per subject would be a system call each (254k for half the real database).
    const MappedFile entries(index.path());
    for (auto original : originals) {
      std::uint64_t span[2];
      std::memcpy(span, entries.data() + kFileHeaderBytes + original * sizeof(std::uint64_t), sizeof span);
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
  db.end_ = db.storage_->order.size();
  return db;
}

}  // namespace molaccel::align

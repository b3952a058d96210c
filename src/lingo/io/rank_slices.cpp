// Reading a rank's slice of a molecule file, and molecules packed for travel between ranks.
#include "lingo/io/rank_slices.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "runtime/text_input.hpp"

namespace molaccel::lingo::detail {

namespace {

// The start of rank `rank`'s byte range: right after the first '\n' at or after size x rank / N - 1.
std::uint64_t slice_start(int fd, const std::string& path, std::uint64_t size, int rank, int ranks) {
  if (rank == 0) return 0;
  if (rank == ranks) return size;
  std::uint64_t at =
      static_cast<std::uint64_t>(static_cast<unsigned __int128>(size) * static_cast<std::uint64_t>(rank) /
                                 static_cast<std::uint64_t>(ranks));
  if (at == 0) return 0;
  --at;
  char buffer[1 << 16];
  while (at < size) {
    const ssize_t got = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw InputError(path, 0, fmt::format("cannot read at byte {}", at));
    if (const void* nl = std::memchr(buffer, '\n', static_cast<std::size_t>(got)))
      return at + static_cast<std::uint64_t>(static_cast<const char*>(nl) - buffer) + 1;
    at += static_cast<std::uint64_t>(got);
  }
  return size;
}

}  // namespace

std::pair<std::string, std::size_t> read_slice(const std::filesystem::path& path, int rank, int ranks) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path.string(), 0, fmt::format("cannot open: {}", std::strerror(errno)));
  std::pair<std::string, std::size_t> out;
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw InputError(path.string(), 0, "cannot stat");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t begin = slice_start(fd, path.string(), size, rank, ranks),
                        end = slice_start(fd, path.string(), size, rank + 1, ranks);
    auto& text = out.first;
    text.resize(static_cast<std::size_t>(end - begin));
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t got =
          ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(begin + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw InputError(path.string(), 0, fmt::format("cannot read at byte {}", begin + done));
      done += static_cast<std::size_t>(got);
    }
    out.second = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
    if (!text.empty() && text.back() != '\n') ++out.second;
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

TextSlice read_gzip_slice(const std::filesystem::path& path, int rank, int ranks) {
  std::size_t total = 0;
  std::string_view line;
  {
    io::LineReader counter(path);
    while (counter.next(line)) ++total;
  }
  const auto bound = [&](int r) {
    return static_cast<std::size_t>(static_cast<unsigned __int128>(total) * static_cast<unsigned>(r) /
                                    static_cast<unsigned>(ranks));
  };
  TextSlice out;
  out.lines_before = bound(rank);
  const std::size_t end = bound(rank + 1);
  io::LineReader reader(path);
  for (std::size_t at = 0; at < end && reader.next(line); ++at)
    if (at >= out.lines_before) {
      out.text += line;
      out.text += '\n';
      ++out.lines;
    }
  return out;
}

std::vector<std::byte> pack(const MoleculeSet& set, bool with_names) {
  std::vector<std::byte> out;
  const std::uint64_t header[3] = {set.size(), set.total_entries(), with_names ? 1u : 0u};
  put(out, header, 3);
  if (with_names)
    for (const auto& name : set.names) {
      const std::uint64_t n = name.size();
      put(out, &n, 1);
      put(out, name.data(), name.size());
    }
  put(out, set.offsets.data() + 1, set.size());
  if (set.wide_keys())
    put(out, set.keys64.data(), set.keys64.size());
  else
    put(out, set.keys32.data(), set.keys32.size());
  put(out, set.counts.data(), set.counts.size());
  put(out, set.magnitudes.data(), set.magnitudes.size());
  return out;
}
void unpack_into(MoleculeSet& set, std::span<const std::byte> bytes) {
  Unpacker in(bytes);
  std::uint64_t header[3];
  in.take(header, 3);
  for (std::uint64_t i = 0; header[2] != 0 && i < header[0]; ++i) {
    std::uint64_t n = 0;
    in.take(&n, 1);
    std::string name(static_cast<std::size_t>(n), '\0');
    in.take(name.data(), name.size());
    set.names.push_back(std::move(name));
  }
  const std::uint64_t base = set.offsets.back();
  const std::size_t first = set.offsets.size();
  in.append(set.offsets, static_cast<std::size_t>(header[0]));
  for (std::size_t i = first; i < set.offsets.size(); ++i) set.offsets[i] += base;
  if (set.wide_keys())
    in.append(set.keys64, static_cast<std::size_t>(header[1]));
  else
    in.append(set.keys32, static_cast<std::size_t>(header[1]));
  in.append(set.counts, static_cast<std::size_t>(header[1]));
  in.append(set.magnitudes, static_cast<std::size_t>(header[0]));
}

}  // namespace molaccel::lingo::detail

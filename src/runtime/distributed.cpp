// The engine-free part of distributed runs: launcher detection, the one-process communicator,
// failure agreement, per-rank device choice. The MPI communicator itself is in mpi/ and is
// compiled only when MPI was found (MOLACCEL_HAVE_MPI).
#include "molaccel/distributed.hpp"

#include "runtime/host_resources.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace molaccel {

#ifdef MOLACCEL_HAVE_MPI
namespace detail {
std::unique_ptr<Communicator> make_mpi_communicator();  // mpi/communicator.cpp
}
#endif

std::vector<std::byte> Communicator::alltoall(std::span<const std::byte> send,
                                              const std::vector<std::size_t>& send_counts,
                                              std::vector<std::size_t>* counts) {
  MOLACCEL_EXPECTS(send_counts.size() == static_cast<std::size_t>(size()), "alltoall: one count per rank");
  std::vector<std::byte> out;
  std::size_t at = 0;
  for (int to = 0; to < size(); ++to) {
    const std::size_t n = send_counts[static_cast<std::size_t>(to)];
    MOLACCEL_EXPECTS(at + n <= send.size(), "alltoall: counts exceed the send buffer");
    std::vector<std::size_t> received_counts;
    auto received = gather(send.subspan(at, n), to, &received_counts);
    if (to == rank()) {
      out = std::move(received);
      if (counts) *counts = std::move(received_counts);
    }
    at += n;
  }
  return out;
}

namespace {

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string_view kind() const override { return "single"; }
  std::vector<std::byte> allgather(std::span<const std::byte> mine,
                                   std::vector<std::size_t>* counts) override {
    if (counts) *counts = {mine.size()};
    return {mine.begin(), mine.end()};
  }
  std::vector<std::byte> gather(std::span<const std::byte> mine, int root,
                                std::vector<std::size_t>* counts) override {
    MOLACCEL_EXPECTS(root == 0, "gather: root out of range");
    return allgather(mine, counts);
  }
  void broadcast(std::vector<std::byte>&, int root) override {
    MOLACCEL_EXPECTS(root == 0, "broadcast: root out of range");
  }
  void send(std::span<const std::byte>, int) override {
    MOLACCEL_EXPECTS(false, "send: a single process has no other rank");
  }
  std::vector<std::byte> receive(int) override {
    MOLACCEL_EXPECTS(false, "receive: a single process has no other rank");
    return {};
  }
  void barrier() override {}
  [[noreturn]] void abort_all(int code, std::string_view message) override {
    std::fprintf(stderr, "molaccel: error: %.*s\n", static_cast<int>(message.size()), message.data());
    std::fflush(stderr);
    std::_Exit(code);
  }
};

int env_int(const char* value, int fallback) {
  if (!value || !*value) return fallback;
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  return end && *end == '\0' && v >= 0 && v < (1L << 30) ? static_cast<int>(v) : fallback;
}

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcess>();
}

bool mpi_compiled() {
#ifdef MOLACCEL_HAVE_MPI
  return true;
#else
  return false;
#endif
}

LaunchInfo detect_launcher() {
  // The variables each launcher sets in every process it starts (read once, for their usual
  // meaning; listed in tests/runtime/test_environment.cpp).
  LaunchInfo info;
  if (const char* size = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    info.under_launcher = true;
    info.launcher = "Open MPI (mpirun)";
    info.size = env_int(size, 1);
    info.local_rank = env_int(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"), 0);
  } else if (const char* pmi = std::getenv("PMI_SIZE")) {
    info.under_launcher = true;
    info.launcher = "PMI (srun or mpiexec)";
    info.size = env_int(pmi, 1);
  } else if (std::getenv("PMIX_RANK")) {
    info.under_launcher = true;
    info.launcher = "PMIx";
  }
  return info;
}

std::unique_ptr<Communicator> connect(bool allow_mpi) {
  const LaunchInfo launch = detect_launcher();
  if (!allow_mpi || !launch.under_launcher) return make_single_process_communicator();
#ifdef MOLACCEL_HAVE_MPI
  auto comm = detail::make_mpi_communicator();
  if (const std::string claimed = detail::claim_cpu_share(comm->local_rank(), comm->local_size());
      !claimed.empty())
    log_info("rank {}: {}", comm->rank(), claimed);
  return comm;
#else
  if (launch.size > 1)
    throw NotCompiled(fmt::format("MPI (started by {} as one of {} processes, but this molaccel was built "
                                  "without MPI, so every process would repeat the whole job; rebuild with "
                                  "libopenmpi-dev installed (MOLACCEL_MPI=AUTO or ON), or pass --no-mpi to "
                                  "run the processes independently)",
                                  launch.launcher, launch.size),
                      __FILE__, __LINE__);
  return make_single_process_communicator();
#endif
}

std::vector<std::vector<std::string>> gather_strings(Communicator& comm, const std::vector<std::string>& mine,
                                                     int root) {
  // Each rank: u64 count, then per string u64 length + bytes.
  std::vector<std::byte> packed;
  auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    packed.insert(packed.end(), b, b + n);
  };
  const std::uint64_t count = mine.size();
  put(&count, sizeof count);
  for (const auto& s : mine) {
    const std::uint64_t n = s.size();
    put(&n, sizeof n);
    put(s.data(), s.size());
  }
  std::vector<std::size_t> counts;
  const auto bytes = comm.gather(packed, root, &counts);
  std::vector<std::vector<std::string>> out(counts.size());
  std::size_t at = 0;
  auto get = [&](void* p, std::size_t n) {
    MOLACCEL_EXPECTS(at + n <= bytes.size(), "gather_strings: truncated message");
    std::memcpy(p, bytes.data() + at, n);
    at += n;
  };
  for (auto& list : out) {
    std::uint64_t n = 0;
    get(&n, sizeof n);
    list.resize(n);
    for (auto& s : list) {
      std::uint64_t len = 0;
      get(&len, sizeof len);
      s.resize(len);
      get(s.data(), len);
    }
  }
  return out;
}

namespace {

// What rank 0 tells the others about its temporary output file once the header is in it and the
// file has its final size: where the parts start (after the header), the file's inode and its path
// (so a rank opens that file and no other of the same name). No path where the output is not a
// regular file (standard output, a pipe, a device), its path is unknown or it could not be sized:
// every part then travels to rank 0.
struct DirectTarget {
  std::uint64_t base = 0, inode = 0;
  std::string path;
};

std::vector<std::byte> pack(const DirectTarget& t) {
  std::vector<std::byte> out(2 * sizeof(std::uint64_t) + t.path.size());
  std::memcpy(out.data(), &t.base, sizeof t.base);
  std::memcpy(out.data() + 8, &t.inode, sizeof t.inode);
  std::memcpy(out.data() + 16, t.path.data(), t.path.size());
  return out;
}

DirectTarget unpack(const std::vector<std::byte>& in) {
  DirectTarget t;
  MOLACCEL_EXPECTS(in.size() >= 2 * sizeof(std::uint64_t), "write_in_rank_order: truncated message");
  std::memcpy(&t.base, in.data(), sizeof t.base);
  std::memcpy(&t.inode, in.data() + 8, sizeof t.inode);
  t.path.assign(reinterpret_cast<const char*>(in.data()) + 16, in.size() - 16);
  return t;
}

// Rank 0's temporary file, flushed and extended to `size` bytes, as a target every rank writes
// into at once.
DirectTarget direct_target(std::FILE* f, std::uint64_t base, std::uint64_t size) {
  DirectTarget t;
  t.base = base;
  if (!f || std::fflush(f) != 0) return t;
  const int fd = ::fileno(f);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::ftruncate(fd, static_cast<off_t>(size)) != 0)
    return t;
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
  if (ec || !path.is_absolute()) return t;
  t.inode = static_cast<std::uint64_t>(st.st_ino);
  t.path = path.string();
  return t;
}

// Bytes [at, at + n) of the pieces taken as one run: a view where they lie in one piece, else
// copied into `staged`.
std::span<const std::byte> range_of(std::span<const std::span<const std::byte>> pieces, std::uint64_t at,
                                    std::uint64_t n, std::vector<std::byte>& staged) {
  staged.clear();
  for (const auto& piece : pieces) {
    if (n == 0) break;
    if (at >= piece.size()) {
      at -= piece.size();
      continue;
    }
    const auto take = std::min<std::uint64_t>(n, piece.size() - at);
    if (staged.empty() && take == n)
      return piece.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n));
    staged.insert(staged.end(), piece.begin() + static_cast<std::ptrdiff_t>(at),
                  piece.begin() + static_cast<std::ptrdiff_t>(at + take));
    n -= take;
    at = 0;
  }
  return staged;
}

}  // namespace

std::uint64_t write_in_rank_order(Communicator& comm, const std::filesystem::path& path,
                                  std::string_view header, std::span<const std::byte> mine) {
  const std::span<const std::byte> one[1] = {mine};
  return write_in_rank_order(comm, path, header, std::span<const std::span<const std::byte>>(one));
}

std::uint64_t write_in_rank_order(Communicator& comm, const std::filesystem::path& path,
                                  std::string_view header, std::span<const std::span<const std::byte>> mine) {
  std::uint64_t my_size = 0;
  for (const auto& piece : mine) my_size += piece.size();
  const auto sizes = allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_size, 1));
  std::uint64_t parts_size = 0;
  for (const auto& s : sizes) parts_size += s.at(0);
  constexpr std::uint64_t kPiece = std::uint64_t{256} << 20;
  std::uint64_t received = 0;
  // This rank's pieces at `offset` of `fd`, or in order through `f`.
  auto write_mine_at = [&](int fd, std::uint64_t offset) {
    bool ok = true;
    for (const auto& piece : mine) {
      ok = ok && detail::write_all_at(fd, offset, piece.data(), piece.size());
      offset += piece.size();
    }
    return ok;
  };
  auto write_mine_to = [&](std::FILE* f) {
    bool ok = true;
    for (const auto& piece : mine) ok = ok && std::fwrite(piece.data(), 1, piece.size(), f) == piece.size();
    return ok;
  };
  // Every rank takes part in the same sequence of collectives whatever happens: rank 0 sizes its
  // temporary file and broadcasts it (or that there is none to write into), every rank says
  // whether it opened it, those that did (rank 0 too) write their parts at their offsets at once,
  // the others' parts go to rank 0 piece by piece; then every rank says whether its part was
  // written. `f` is rank 0's file (null where it could not be created: rank 0 then drops what it
  // receives).
  auto distribute = [&](std::FILE* f, std::uint64_t base) {
    std::vector<std::byte> message;
    if (comm.is_root()) message = pack(direct_target(f, base, base + parts_size));
    comm.broadcast(message, 0);
    const DirectTarget target = unpack(message);
    int fd = -1;
    const bool into_file = !target.path.empty();
    if (comm.is_root() && into_file) {
      fd = ::fileno(f);
    } else if (into_file && my_size > 0) {
      fd = ::open(target.path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
      struct stat st {};
      if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
                      static_cast<std::uint64_t>(st.st_ino) != target.inode ||
                      static_cast<std::uint64_t>(st.st_size) != target.base + parts_size)) {
        ::close(fd);
        fd = -1;
      }
    }
    const std::uint8_t opened = comm.is_root() || my_size == 0 || fd >= 0 ? 1 : 0;
    const auto direct = allgather_records<std::uint8_t>(comm, std::span<const std::uint8_t>(&opened, 1));
    std::uint64_t offset = target.base;
    bool written = true;
    std::vector<std::byte> staged;
    for (int r = 0; r < comm.size(); ++r) {
      const std::uint64_t total = sizes[static_cast<std::size_t>(r)].at(0);
      if (r == comm.rank() && fd >= 0) written = write_mine_at(fd, offset);
      if (r == 0 && comm.is_root() && f && !into_file) written = write_mine_to(f);
      if (r > 0 && direct[static_cast<std::size_t>(r)].at(0) == 0) {
        for (std::uint64_t at = 0; at < total; at += kPiece) {
          const auto bytes =
              comm.gather(comm.rank() == r ? range_of(mine, at, std::min(kPiece, total - at), staged)
                                           : std::span<const std::byte>(),
                          0);
          received += bytes.size();
          // Into a regular file at the part's offset (some parts are written by their ranks);
          // else every part comes here, in order.
          if (f && written && !bytes.empty())
            written = into_file ? detail::write_all_at(::fileno(f), offset + at, bytes.data(), bytes.size())
                                : std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
        }
      }
      offset += total;
    }
    if (fd >= 0 && !comm.is_root() && ::close(fd) != 0) written = false;
    const std::uint8_t ok = written ? 1 : 0;
    bool all = true;
    for (const auto& w : allgather_records<std::uint8_t>(comm, std::span<const std::uint8_t>(&ok, 1)))
      all = all && w.at(0) == 1;
    return all;
  };
  auto write_failed = [&] { return Error(fmt::format("{}: write failed (disk full?)", path.string())); };
  std::exception_ptr failure;
  if (comm.is_root()) {
    bool distributed = false;
    try {
      write_file_atomically(path, [&](std::FILE* f) {
        const bool own = header.empty() || std::fwrite(header.data(), 1, header.size(), f) == header.size();
        distributed = true;
        if (comm.size() == 1) {
          if (!own || !write_mine_to(f)) throw write_failed();
          return;
        }
        if (!distribute(own ? f : nullptr, header.size()) || !own) throw write_failed();
      });
    } catch (...) {
      failure = std::current_exception();
    }
    if (!distributed && comm.size() > 1) distribute(nullptr, 0);  // the temporary file could not be created
  } else {
    distribute(nullptr, 0);
  }
  run_step(comm, [&] {
    if (failure) std::rethrow_exception(failure);
  });
  return received;
}

std::vector<std::byte> reduce_to_root(Communicator& comm, std::vector<std::byte> mine,
                                      const Combine& combine) {
  const int rank = comm.rank(), size = comm.size();
  for (int step = 1; step < size; step *= 2) {
    if (rank % (2 * step) != 0) {  // this rank's part goes down the tree; it is done
      comm.send(mine, rank - step);
      return {};
    }
    if (rank + step < size) mine = combine(std::move(mine), comm.receive(rank + step));
  }
  return mine;
}

void run_step(Communicator& comm, const std::function<void()>& step) {
  if (comm.size() == 1) {  // nobody to tell: the error as it is
    step();
    return;
  }
  // A failure travels as one byte of cause, then the message.
  std::string failure;
  try {
    step();
  } catch (const InputError& e) {
    failure = std::string(1, static_cast<char>(RankFailure::Cause::input)) + e.what();
  } catch (const NotCompiled& e) {
    failure = std::string(1, static_cast<char>(RankFailure::Cause::unavailable)) + e.what();
  } catch (const DeviceUnavailable& e) {
    failure = std::string(1, static_cast<char>(RankFailure::Cause::unavailable)) + e.what();
  } catch (const std::exception& e) {
    failure = std::string(1, static_cast<char>(RankFailure::Cause::other)) + e.what();
  } catch (...) {
    failure = std::string(1, static_cast<char>(RankFailure::Cause::other)) + "unknown error";
  }
  // Every rank's message (empty = fine); the lowest failed rank is the one reported.
  std::vector<std::size_t> counts;
  const auto all = comm.allgather(std::as_bytes(std::span(failure.data(), failure.size())), &counts);
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > 0) {
      const std::string text(reinterpret_cast<const char*>(all.data() + at), counts[r]);
      throw RankFailure(static_cast<int>(r), static_cast<RankFailure::Cause>(text[0]),
                        fmt::format("rank {} of {}: {}", r, comm.size(), text.substr(1)), __FILE__, __LINE__);
    }
    at += counts[r];
  }
}

Resources::Options options_for_rank(Resources::Options options, int local_rank, int local_size) {
  if (local_size <= 1) return options;
  // The CPUs this process may use now (after claim_cpu_share), at most its share of the host's.
  if (options.cpu_threads == 0)
    options.cpu_threads = std::max(1, std::min(detail::usable_cpus(), detail::online_cpus() / local_size));
  const bool every_gpu = options.device.kind == DeviceSpec::Kind::automatic ||
                         (options.device.kind == DeviceSpec::Kind::gpu && options.device.gpu_ids.empty());
  if (!every_gpu) return options;
  const auto gpus = detail::gpu_properties();  // no contexts: this rank creates those of its own GPUs only
  if (gpus.empty()) return options;            // `auto` falls back to the CPU, `gpu` fails as usual
  std::vector<int> mine;
  for (std::size_t g = static_cast<std::size_t>(local_rank); g < gpus.size(); g += local_size)
    mine.push_back(gpus[g].index);
  if (mine.empty()) mine.push_back(gpus[static_cast<std::size_t>(local_rank) % gpus.size()].index);
  options.device.kind = DeviceSpec::Kind::gpu;
  options.device.gpu_ids = mine;
  return options;
}

}  // namespace molaccel

// The MPI communicator (compiled only with MPI): MPI_COMM_WORLD, a per-host split for local ranks,
// variable-size gathers and all-to-alls built from a count exchange and MPI_(All)gatherv /
// MPI_Alltoallv. Messages above 2 GiB are not split: the records engines exchange are per-query
// top-k lists, below that per rank.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>

#include "molaccel/distributed.hpp"

namespace molaccel::detail {
namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(fmt::format("MPI: {} failed: {}", what, std::string(text, static_cast<std::size_t>(length))),
              __FILE__, __LINE__);
}

int as_count(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error(fmt::format("MPI: a message of {} bytes exceeds 2 GiB", bytes), __FILE__, __LINE__);
  return static_cast<int>(bytes);
}

// Finalises MPI at exit if molaccel initialised it (and no one aborted).
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Only the calling thread talks to MPI; worker threads never do.
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      std::atexit(finalize_at_exit);
    }
    // Errors come back as codes (turned into exceptions) instead of aborting the job at once.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_),
          "MPI_Comm_split_type");
    check(MPI_Comm_rank(local_, &local_rank_), "MPI_Comm_rank (host)");
    check(MPI_Comm_size(local_, &local_size_), "MPI_Comm_size (host)");
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string_view kind() const override { return "mpi"; }

  std::vector<std::byte> allgather(std::span<const std::byte> mine,
                                   std::vector<std::size_t>* counts) override {
    const int count = as_count(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(size_));
    check(MPI_Allgather(&count, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    const auto displs = displacements(sizes);
    std::vector<std::byte> out(static_cast<std::size_t>(displs.back()) +
                               static_cast<std::size_t>(sizes.back()));
    check(MPI_Allgatherv(mine.data(), count, MPI_BYTE, out.data(), sizes.data(), displs.data(), MPI_BYTE,
                         MPI_COMM_WORLD),
          "MPI_Allgatherv");
    if (counts) counts->assign(sizes.begin(), sizes.end());
    return out;
  }

  std::vector<std::byte> gather(std::span<const std::byte> mine, int root,
                                std::vector<std::size_t>* counts) override {
    MOLACCEL_EXPECTS(root >= 0 && root < size_, "gather: root out of range");
    const int count = as_count(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(size_));
    check(MPI_Gather(&count, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, MPI_COMM_WORLD), "MPI_Gather");
    std::vector<std::byte> out;
    std::vector<int> displs;
    if (rank_ == root) {
      displs = displacements(sizes);
      out.resize(static_cast<std::size_t>(displs.back()) + static_cast<std::size_t>(sizes.back()));
    }
    check(MPI_Gatherv(mine.data(), count, MPI_BYTE, out.data(), sizes.data(), displs.data(), MPI_BYTE, root,
                      MPI_COMM_WORLD),
          "MPI_Gatherv");
    if (counts) {
      if (rank_ == root)
        counts->assign(sizes.begin(), sizes.end());
      else
        counts->clear();
    }
    return out;
  }

  std::vector<std::byte> alltoall(std::span<const std::byte> send,
                                  const std::vector<std::size_t>& send_counts,
                                  std::vector<std::size_t>* counts) override {
    MOLACCEL_EXPECTS(send_counts.size() == static_cast<std::size_t>(size_), "alltoall: one count per rank");
    std::vector<int> sizes(send_counts.size()), received(send_counts.size());
    for (std::size_t r = 0; r < sizes.size(); ++r) sizes[r] = as_count(send_counts[r]);
    const auto send_displs = displacements(sizes);
    MOLACCEL_EXPECTS(static_cast<std::size_t>(send_displs.back()) + send_counts.back() <= send.size(),
                     "alltoall: counts exceed the send buffer");
    check(MPI_Alltoall(sizes.data(), 1, MPI_INT, received.data(), 1, MPI_INT, MPI_COMM_WORLD),
          "MPI_Alltoall");
    const auto displs = displacements(received);
    std::vector<std::byte> out(static_cast<std::size_t>(displs.back()) +
                               static_cast<std::size_t>(received.back()));
    check(MPI_Alltoallv(send.data(), sizes.data(), send_displs.data(), MPI_BYTE, out.data(), received.data(),
                        displs.data(), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Alltoallv");
    if (counts) counts->assign(received.begin(), received.end());
    return out;
  }

  void broadcast(std::vector<std::byte>& data, int root) override {
    MOLACCEL_EXPECTS(root >= 0 && root < size_, "broadcast: root out of range");
    unsigned long long n = data.size();
    check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD), "MPI_Bcast");
    data.resize(static_cast<std::size_t>(n));
    check(MPI_Bcast(data.data(), as_count(data.size()), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }

  void send(std::span<const std::byte> bytes, int to) override {
    MOLACCEL_EXPECTS(to >= 0 && to < size_ && to != rank_, "send: bad rank");
    check(MPI_Send(bytes.data(), as_count(bytes.size()), MPI_BYTE, to, kTag, MPI_COMM_WORLD), "MPI_Send");
  }
  std::vector<std::byte> receive(int from) override {
    MOLACCEL_EXPECTS(from >= 0 && from < size_ && from != rank_, "receive: bad rank");
    MPI_Status status;
    check(MPI_Probe(from, kTag, MPI_COMM_WORLD, &status), "MPI_Probe");
    int count = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    std::vector<std::byte> out(static_cast<std::size_t>(count));
    check(MPI_Recv(out.data(), count, MPI_BYTE, from, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    return out;
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  [[noreturn]] void abort_all(int code, std::string_view message) override {
    std::fprintf(stderr, "molaccel: error: rank %d of %d: %.*s\n", rank_, size_,
                 static_cast<int>(message.size()), message.data());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  static std::vector<int> displacements(const std::vector<int>& sizes) {
    std::vector<int> displs(sizes.size(), 0);
    std::size_t total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      displs[r] = as_count(total);
      total += static_cast<std::size_t>(sizes[r]);
    }
    as_count(total);
    return displs;
  }

  static constexpr int kTag = 19;  // point-to-point messages (collectives have no tags)
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

}  // namespace molaccel::detail

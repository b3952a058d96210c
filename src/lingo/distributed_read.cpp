// Reading a molecule file across MPI ranks. Each rank reads and parses only its slice (a byte
// range of a plain .smi, a range of lines of a gzip one); standard input and CSV are read whole by
// every rank. read_molecule_slice_across_ranks keeps each rank's slice (the ring forms of
// distributed_ring.cpp); read_molecules_across_ranks all-gathers the parsed slices, so every rank
// holds the whole set (the replicated forms of distributed_replicated.cpp).

#include <cstdio>
#include <limits>

#include "lingo/distributed_util.hpp"
#include "lingo/io/rank_slices.hpp"
#include "molaccel/distributed.hpp"
#include "molaccel/lingo.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::lingo {
namespace {

using detail::balanced_ranges;
using detail::iota_range;
using detail::pack;
using detail::read_gzip_slice;
using detail::read_slice;
using detail::TextSlice;
using detail::unpack_into;

// How a molecule file is read across ranks: whole by every rank (standard input, CSV, whose
// records may span lines), or each rank its slice of a plain or gzip .smi file.
enum class Reading : std::uint8_t { whole, plain_slices, gzip_slices };

Reading reading_of(const std::filesystem::path& path, const ReadOptions& read) {
  std::error_code ec;
  if (path == "-" || !read.smiles_column.empty() || !std::filesystem::is_regular_file(path, ec))
    return Reading::whole;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Reading::whole;  // read_molecules reports it
  unsigned char magic[2] = {0, 0};
  const bool gzip = std::fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  std::fclose(f);
  return gzip ? Reading::gzip_slices : Reading::plain_slices;
}

// Rank 0 decides (every rank must take the same path through the collectives).
Reading agree_reading(Communicator& comm, const std::filesystem::path& path, const ReadOptions& read) {
  std::vector<std::byte> how{std::byte{0}};
  if (comm.is_root())
    how[0] = static_cast<std::byte>(comm.size() > 1 ? reading_of(path, read) : Reading::whole);
  comm.broadcast(how, 0);
  return static_cast<Reading>(how.at(0));
}

// This rank's part of a sliced file, parsed, with every rank's molecule count and the read_molecules
// statistics of the whole file.
struct Part {
  MoleculeSet set;
  std::vector<std::uint64_t> molecules_of;  // per rank
  ReadStats total;
};
Part read_part(Communicator& comm, const std::filesystem::path& path, const LingoOptions& lingo,
               const ReadOptions& read, Reading how) {
  TextSlice slice;
  run_step(comm, [&] {
    if (how == Reading::gzip_slices) {
      slice = read_gzip_slice(path, comm.rank(), comm.size());
    } else {
      auto [text, lines] = read_slice(path, comm.rank(), comm.size());
      slice.text = std::move(text);
      slice.lines = lines;
    }
  });
  if (how == Reading::plain_slices) {  // line numbers count on from the slices before (a scan)
    const std::uint64_t my_lines = slice.lines;
    const auto lines = allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&my_lines, 1));
    for (int r = 0; r < comm.rank(); ++r) slice.lines_before += lines[static_cast<std::size_t>(r)].at(0);
  }
  ReadOptions mine = read;
  mine.slice = true;
  mine.lines_before = slice.lines_before;
  Part part;
  ReadStats stats;
  run_step(comm, [&] {
    part.set = parse_molecules(path.string(), slice.text, lingo, mine, &stats);
    std::string().swap(slice.text);
  });
  const std::uint64_t my_stats[4] = {stats.skipped_invalid, stats.first_skipped_line, stats.lines,
                                     part.set.size()};
  for (const auto& st : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(my_stats, 4))) {
    part.total.skipped_invalid += st.at(0);
    if (st.at(1) != 0 && (part.total.first_skipped_line == 0 || st.at(1) < part.total.first_skipped_line))
      part.total.first_skipped_line = st.at(1);
    part.total.lines += st.at(2);
    part.total.molecules += st.at(3);
    part.molecules_of.push_back(st.at(3));
  }
  return part;
}

}  // namespace

MoleculeSet read_molecules_across_ranks(Communicator& comm, const std::filesystem::path& path,
                                        const LingoOptions& lingo, const ReadOptions& read,
                                        ReadStats* stats) {
  MoleculeSet set;
  const Reading how = agree_reading(comm, path, read);
  if (how == Reading::whole) {
    run_step(comm, [&] { set = read_molecules(path, lingo, read, stats); });
    return set;
  }
  Part part = read_part(comm, path, lingo, read, how);
  // The parts travel in one all-gather, whose total MPI counts in int: a larger set (some 5 M
  // molecules) is read whole by every rank instead; no molecule anywhere: the file read whole
  // gives the one-process error.
  std::vector<std::byte> packed = pack(part.set);
  part.set = MoleculeSet{};
  const std::uint64_t packed_size = packed.size();
  std::uint64_t total_size = 0;
  for (const auto& size :
       allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&packed_size, 1)))
    total_size += size.at(0);
  if (part.total.molecules == 0 || total_size > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    run_step(comm, [&] { set = read_molecules(path, lingo, read, stats); });
    return set;
  }
  std::vector<std::size_t> counts;
  const auto parts = comm.allgather(packed, &counts);
  std::vector<std::byte>().swap(packed);
  run_step(comm, [&] {
    set.q = lingo.q;
    set.preprocessing = lingo.preprocessing;
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      unpack_into(set, std::span<const std::byte>(parts).subspan(at, counts[r]));
      at += counts[r];
    }
  });
  if (stats) *stats = part.total;
  return set;
}

MoleculeSlice read_molecule_slice_across_ranks(Communicator& comm, const std::filesystem::path& path,
                                               const LingoOptions& lingo, const ReadOptions& read,
                                               ReadStats* stats) {
  MoleculeSlice slice;
  const Reading how = agree_reading(comm, path, read);
  Part part;
  if (how != Reading::whole) part = read_part(comm, path, lingo, read, how);
  if (how == Reading::whole || part.total.molecules == 0) {
    // Read whole (no molecule anywhere: the one-process error), each rank keeping a range balanced
    // by Lingo count.
    run_step(comm, [&] {
      MoleculeSet set = read_molecules(path, lingo, read, stats);
      std::vector<std::uint64_t> weights(set.size());
      for (std::size_t i = 0; i < set.size(); ++i) weights[i] = std::uint64_t{set.magnitudes[i]} + 1;
      const auto bounds = balanced_ranges(weights, comm.size());
      slice.first = bounds[static_cast<std::size_t>(comm.rank())];
      slice.total = set.size();
      slice.set =
          comm.size() == 1
              ? std::move(set)
              : subset(set, iota_range(slice.first, bounds[static_cast<std::size_t>(comm.rank()) + 1]));
    });
    return slice;
  }
  for (int r = 0; r < comm.rank(); ++r) slice.first += part.molecules_of[static_cast<std::size_t>(r)];
  slice.total = part.total.molecules;
  slice.set = std::move(part.set);
  if (stats) *stats = part.total;
  return slice;
}

}  // namespace molaccel::lingo

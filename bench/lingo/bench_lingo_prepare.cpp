// The host stages before a search's first pass, on the 367k set: reading the .smi.gz (decompress,
// parse, count Lingos), encoding (vocabulary, ids; the set against itself is encoded once) and the
// GPU's feature expansion. Issue 25: these add to the compute phase of a whole command.
// Usage: bench_lingo_prepare [--data DIR] [--threads N]
#include <cstring>

#include "bench_data.hpp"
#include "common/harness.hpp"
#include "lingo/encoding.hpp"

using namespace molaccel;
using namespace molaccel::lingo;
namespace mb = molaccel::bench;

int main(int argc, char** argv) {
  std::string data;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--data") && i + 1 < argc)
      data = argv[++i];
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
  }
  set_progress_enabled(false);
  const auto path = lingo_bench::large_set_path(data);
  if (path.empty()) {
    std::printf("molecules_367k.smi.gz not found (--data DIR)\n");
    return 0;
  }
  MoleculeSet set;
  const auto read = mb::measure([&] { set = read_molecules(path, {}); }, 1, 3);
  const std::string size = fmt::format("{} molecules", set.size());
  const std::string device =
      fmt::format("{} ({} threads)", cpu_info().model, threads > 0 ? threads : cpu_info().logical_cores);
  mb::print_header();
  mb::print_row({"lingo/prepare/read", device, size, read, static_cast<double>(set.size()), "molecules", 0, 0,
                 "", path.filename().string() + ": decompress, parse, Lingo multisets"});
  detail::Encoding encoding;
  const auto self = mb::measure([&] { encoding = detail::encode(set, &set, threads); }, 1, 3);
  mb::print_row({"lingo/prepare/encode-self", device, size, self, static_cast<double>(set.size()),
                 "molecules", 0, 0, "", fmt::format("{} Lingos, one encoding", encoding.vocabulary_size)});
  const MoleculeSet copy = set;
  const auto pair = mb::measure([&] { encoding = detail::encode(set, &copy, threads); }, 1, 3);
  mb::print_row({"lingo/prepare/encode-two-sets", device, size, pair, 2.0 * static_cast<double>(set.size()),
                 "molecules", 0, 0, "", "queries and database as two sets"});
  const auto bases = detail::feature_bases(encoding);
  const auto expand = mb::measure(
      [&] { detail::expand_features(encoding.database, encoding.max_count, bases, false); }, 1, 3);
  mb::print_row({"lingo/prepare/expand-features", device, size, expand, static_cast<double>(set.size()),
                 "molecules", 0, 0, "", "the GPU's features (multiset metrics)"});
  return 0;
}

// Top-k (k = 100) search of the 367k set against itself on the GPU (the issue's <= 5 s target),
// and the CPU kernel on a slice of the queries as the baseline in the same run.
// Usage: bench_lingo_search [--quick] [--data DIR] [--queries N]
#include <cstring>

#include "bench_data.hpp"
#include "common/harness.hpp"

using namespace molaccel;
using namespace molaccel::lingo;
namespace mb = molaccel::bench;

int main(int argc, char** argv) {
  bool quick = false;
  std::string data;
  std::size_t n_queries = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--data") && i + 1 < argc)
      data = argv[++i];
    else if (!std::strcmp(argv[i], "--queries") && i + 1 < argc)
      n_queries = std::strtoull(argv[++i], nullptr, 10);
  }
  set_progress_enabled(false);
  const auto path = lingo_bench::large_set_path(data);
  if (path.empty()) {
    std::printf("molecules_367k.smi.gz not found (--data DIR)\n");
    return 0;
  }
  const double t0 = now_seconds();
  const auto db = read_molecules(path, {});
  const double read_s = now_seconds() - t0;
  if (n_queries == 0) n_queries = quick ? 16384 : db.size();
  const auto queries = molaccel::lingo::subset(
      db, lingo_bench::random_indices(db.size(), n_queries, lingo_bench::kSubsetSeed));
  std::printf("read %zu molecules in %.2f s; %zu queries (seed %llu), k = 100\n", db.size(), read_s,
              queries.size(), static_cast<unsigned long long>(lingo_bench::kSubsetSeed));
  mb::print_header();
  ComputeOptions o;
  o.job.progress_bar = false;
  const std::size_t k = 100;
  // CPU baseline on 256 queries (all threads).
  {
    std::vector<std::size_t> first(std::min<std::size_t>(256, queries.size()));
    for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
    const auto slice = molaccel::lingo::subset(queries, first);
    o.backend = Backend::cpu;
    RunInfo info;
    const auto t = mb::measure([&] { search(Resources::cpu(0), slice, db, k, o, &info); }, 0, 1);
    mb::print_row({"lingo/search-top100/cpu", cpu_info().model, fmt::format("{}x{}", slice.size(), db.size()),
                   t, static_cast<double>(slice.size()) * db.size(), "LINGOs", 0, 0, "",
                   fmt::format("{}, includes encoding the database", info.backend)});
  }
  const auto gpus = gpu_list();
  if (gpus.empty()) {
    std::printf("no GPU: %s\n", gpu_absence_reason().c_str());
    return 0;
  }
  Resources::Options ro;
  ro.device = DeviceSpec::parse("gpu");
  const Resources gpu = Resources::create(ro);
  o.backend = Backend::cuda;
  RunInfo info;
  const auto t = mb::measure([&] { search(gpu, queries, db, k, o, &info); }, 0, quick ? 1 : 2);
  mb::print_row({"lingo/search-top100/cuda", gpus.front().name,
                 fmt::format("{}x{}", queries.size(), db.size()), t,
                 static_cast<double>(queries.size()) * db.size(), "LINGOs", 0, 0, "",
                 fmt::format("{}, wall clock incl. encoding, {} tiles; target <= 5 s for 367k x 367k",
                             info.backend, info.job.tiles)});
  return 0;
}

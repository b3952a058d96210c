// The papers' protocol: the 20 standard queries (data/align/queries20.fasta) against a database,
// GCUPS = sum of query length x database residues / time. GPU: a synthetic UniProt-sized database
// (486,000 sequences, ~177 M residues, see synthetic_database.hpp), with and without loading (upload
// and layout); CPU: all cores on a 5,000-sequence database of the same distribution, in the same run.
//   bench_align_search [--quick] [--sequences N] [--cpu-sequences N] [--repeats N] [--gpu-only]
//                      [--variant INTER:ROWS[:MIN_BLOCKS]]...
// Each --variant (e.g. base:64, pf:64:3) times the GPU search again on the same database with
// MOLACCEL_ALIGN_INTER / _STRIP_ROWS / _MIN_BLOCKS set, so kernel variants are compared side by side.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "align/synthetic_database.hpp"
#include "common/harness.hpp"
#include "molaccel/align.hpp"

namespace al = molaccel::align;
namespace mb = molaccel::bench;

int main(int argc, char** argv) try {
  bool quick = false, cpu_row = true;
  std::size_t sequences = 486000, cpu_sequences = 5000;
  int repeats = 3;
  std::vector<std::string> variants;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--sequences" && i + 1 < argc)
      sequences = std::stoul(argv[++i]);
    else if (a == "--cpu-sequences" && i + 1 < argc)
      cpu_sequences = std::stoul(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::stoi(argv[++i]);
    else if (a == "--gpu-only")
      cpu_row = false;
    else if (a == "--variant" && i + 1 < argc)
      variants.push_back(argv[++i]);
    else {
      fmt::print(stderr,
                 "usage: {} [--quick] [--sequences N] [--cpu-sequences N] [--repeats N] [--gpu-only]\n",
                 argv[0]);
      return 2;
    }
  }
  // --quick keeps the whole 486k database (a smaller one fills less than one wave of the GPU and
  // measures the tail, not the kernel) but times one repeat and a small CPU row.
  if (quick) cpu_sequences = std::min<std::size_t>(cpu_sequences, 1000), repeats = 1;
  const std::filesystem::path source = MOLACCEL_SOURCE_DIR;
  const auto queries = al::read_fasta(source / "data" / "align" / "queries20.fasta");
  std::uint64_t query_residues = 0;
  for (std::size_t q = 0; q < queries.size(); ++q) query_residues += queries.sequence(q).size();
  const auto lengths = al::bench::read_lengths(source / "bench" / "align" / "db5k_lengths.txt");
  const al::Scoring scoring;  // BLOSUM62, 11/1
  mb::print_header();

  if (!molaccel::gpu_list().empty()) {
    const auto gpus = molaccel::gpu_list();
    double t0 = molaccel::now_seconds();
    const auto db = al::Database::from_sequences(al::bench::synthetic_database(sequences, lengths));
    const double build_seconds = molaccel::now_seconds() - t0;
    molaccel::Resources::Options o;
    o.device = molaccel::DeviceSpec::parse("gpu:0");
    const auto resources = molaccel::Resources::create(o);
    const double cells = static_cast<double>(query_residues) * static_cast<double>(db.residues());
    const auto run_gpu = [&] {
    al::ScoreStats stats;
    std::vector<double> device_times;
    const auto timing = mb::measure(
        [&] {
          al::score_database_batch(resources, queries, db, scoring, al::Backend::cuda, &stats);
          device_times.push_back(stats.device_seconds);
        },
        1, repeats);
    std::sort(device_times.begin(), device_times.end());
    const auto& g = gpus[0];
    // Issue-rate limit: the default (qp) inner loop spends ~6.1 instructions (SASS, counted by
    // gpu-run.sh) per packed cell pair, i.e. ~3 per cell; 4 schedulers x 32 lanes per SM issue one
    // each per clock.
    const double issue_limit = g.sm_count * 128.0 * g.clock_khz * 1e3 / 3.0;
    mb::Row row;
    row.benchmark = "align/search20/cuda (with upload+layout)";
    row.device = g.name;
    row.size = fmt::format("20 q x {} seqs, {:.1f} M res", db.size(), db.residues() / 1e6);
    row.timing = timing;
    row.work = cells;
    row.work_unit = "cells";
    row.limit = issue_limit;
    row.limit_name = "issue rate at 3 instr/cell";
    const char* strip = std::getenv("MOLACCEL_ALIGN_STRIP_ROWS");
    const char* min_blocks = std::getenv("MOLACCEL_ALIGN_MIN_BLOCKS");
    row.note = stats.kernel + fmt::format(", strip rows {}{}, rescored {}", strip ? strip : "default",
                                          min_blocks ? fmt::format(", min blocks {}", min_blocks) : "",
                                          stats.rescored);
    mb::print_row(row);
    mb::Timing kernels;
    kernels.repeats = static_cast<int>(device_times.size());
    kernels.median_s = device_times[device_times.size() / 2];
    kernels.min_s = device_times.front();
    kernels.max_s = device_times.back();
    row.benchmark = "align/search20/cuda (compute only)";
    row.timing = kernels;
    row.note = fmt::format("db build {:.2f} s (not timed)", build_seconds);
    mb::print_row(row);
    };
    if (variants.empty()) run_gpu();
    for (const auto& spec : variants) {  // INTER:ROWS[:MIN_BLOCKS]
      const auto first = spec.find(':');
      const auto second = first == std::string::npos ? first : spec.find(':', first + 1);
      setenv("MOLACCEL_ALIGN_INTER", spec.substr(0, first).c_str(), 1);
      if (first != std::string::npos)
        setenv("MOLACCEL_ALIGN_STRIP_ROWS", spec.substr(first + 1, second - first - 1).c_str(), 1);
      if (second != std::string::npos)
        setenv("MOLACCEL_ALIGN_MIN_BLOCKS", spec.substr(second + 1).c_str(), 1);
      else
        unsetenv("MOLACCEL_ALIGN_MIN_BLOCKS");
      run_gpu();
    }
  } else {
    fmt::print("no GPU ({}): GPU rows skipped\n", molaccel::gpu_absence_reason());
  }

  if (cpu_row) {
    const auto db = al::Database::from_sequences(al::bench::synthetic_database(cpu_sequences, lengths, 5000));
    const auto resources = molaccel::Resources::cpu(0);
    const double cells = static_cast<double>(query_residues) * static_cast<double>(db.residues());
    al::ScoreStats stats;
    const auto timing = mb::measure(
        [&] { al::score_database_batch(resources, queries, db, scoring, al::Backend::cpu, &stats); },
        quick ? 0 : 1, quick ? 1 : std::max(1, repeats));
    mb::Row row;
    row.benchmark = "align/search20/cpu";
    row.device = molaccel::cpu_info().model;
    row.size = fmt::format("20 q x {} seqs, {:.2f} M res", db.size(), db.residues() / 1e6);
    row.timing = timing;
    row.work = cells;
    row.work_unit = "cells";
    row.note = fmt::format("{}, {} threads", stats.kernel, resources.cpu_threads());
    mb::print_row(row);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_align_search: {}\n", e.what());
  return 1;
}

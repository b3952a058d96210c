// The papers' protocol: the 20 standard queries (data/align/queries20.fasta) against a database,
// GCUPS = sum of query length x database residues / time. GPU: a synthetic UniProt-sized database
// (486,000 sequences, ~177 M residues, see synthetic_database.hpp), for 1..N visible GPUs: compute
// only (1 GPU), with upload + layout (in-memory database), and with loading (Database::open of a
// makedb directory the bench writes once, then the search); CPU: all cores on a 5,000-sequence
// database of the same distribution, in the same run.
//   bench_align_search [--quick] [--sequences N] [--cpu-sequences N] [--repeats N] [--gpu-only]
//                      [--tuning KEY=VALUE]... [--dbdir DIR] [--max-gpus N]
// --tuning sets a GPU setting for every GPU row instead of the device's own choice:
// long_threshold=N (subjects longer than N residues go to the intra-task kernel) and
// chunk_residues=N (pipeline chunk size; 0 = automatic).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

#include "align/kernels.hpp"
#include "align/synthetic_database.hpp"
#include "common/harness.hpp"
#include "molaccel/align.hpp"

namespace al = molaccel::align;
namespace mb = molaccel::bench;

int main(int argc, char** argv) try {
  bool quick = false, cpu_row = true, repeats_given = false;
  std::size_t sequences = 486000, cpu_sequences = 5000;
  int repeats = 3;
  al::gpu_entry::Tuning tuning;
  std::vector<std::string> tuning_notes;
  std::filesystem::path dbdir;
  int max_gpus = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--sequences" && i + 1 < argc)
      sequences = std::stoul(argv[++i]);
    else if (a == "--cpu-sequences" && i + 1 < argc)
      cpu_sequences = std::stoul(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::stoi(argv[++i]), repeats_given = true;
    else if (a == "--gpu-only")
      cpu_row = false;
    else if (a == "--tuning" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const auto eq = kv.find('=');
      const std::string key = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
      if (key == "long_threshold" && !value.empty())
        tuning.long_threshold = static_cast<unsigned>(std::max(1ul, std::stoul(value)));
      else if (key == "chunk_residues" && !value.empty())
        tuning.chunk_residues = std::stoull(value);
      else {
        fmt::print(stderr, "bench_align_search: unknown tuning '{}' (long_threshold=N, chunk_residues=N)\n",
                   kv);
        return 2;
      }
      tuning_notes.push_back(kv);
    } else if (a == "--dbdir" && i + 1 < argc)
      dbdir = argv[++i];
    else if (a == "--max-gpus" && i + 1 < argc)
      max_gpus = std::stoi(argv[++i]);
    else {
      fmt::print(stderr,
                 "usage: {} [--quick] [--sequences N] [--cpu-sequences N] [--repeats N] [--gpu-only]\n"
                 "          [--tuning KEY=VALUE]... [--dbdir DIR] [--max-gpus N]\n",
                 argv[0]);
      return 2;
    }
  }
  // --quick keeps the whole 486k database (a smaller one fills less than one wave of the GPU and
  // measures the tail, not the kernel) but times one repeat (unless --repeats) and a small CPU row.
  if (quick)
    cpu_sequences = std::min<std::size_t>(cpu_sequences, 1000), repeats = repeats_given ? repeats : 1;
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
    // The makedb directory for the "with loading" rows, written once per run (then in the page
    // cache: the rows time Database::open, a memory map plus checks, not a disk read).
    const bool own_dbdir = dbdir.empty();  // --dbdir DIR is kept (e.g. for timing the CLI on it)
    if (own_dbdir)
      dbdir = std::filesystem::temp_directory_path() / fmt::format("molaccel-align-bench-{}", sequences);
    t0 = molaccel::now_seconds();
    db.write(dbdir);
    const double write_seconds = molaccel::now_seconds() - t0;
    const double cells = static_cast<double>(query_residues) * static_cast<double>(db.residues());
    const auto& g = gpus[0];
    // Issue-rate limit: the inter-task inner loop spends ~6.1 instructions (SASS, cuobjdump -sass)
    // per packed cell pair, i.e. ~3 per cell; 4 schedulers x 32 lanes per SM issue one each per clock.
    const double issue_limit = g.sm_count * 128.0 * g.clock_khz * 1e3 / 3.0;
    const auto base_row = [&](int devices) {
      mb::Row row;
      row.device = devices == 1 ? g.name : fmt::format("{} x {}", devices, g.name);
      row.size = fmt::format("20 q x {} seqs, {:.1f} M res", db.size(), db.residues() / 1e6);
      row.work = cells;
      row.work_unit = "cells";
      row.limit = issue_limit * devices;
      row.limit_name = "issue rate at 3 instr/cell";
      return row;
    };
    const al::gpu_entry::Tuning* chosen = tuning_notes.empty() ? nullptr : &tuning;
    const std::string tuning_note = tuning_notes.empty() ? std::string("default tuning")
                                                         : fmt::format("{}", fmt::join(tuning_notes, " "));
    // In-memory database: "with upload+layout" is the whole score_database_batch call; "compute
    // only" the slowest device's span from its first kernel launch to its last score on the host
    // (the layout and upload of later chunks overlap it).
    const auto run_in_memory = [&](int devices, bool compute_row) {
      const auto resources = mb::first_gpus(static_cast<std::size_t>(devices));
      al::ScoreStats stats;
      std::vector<double> device_times;
      const auto timing = mb::measure(
          [&] {
            al::detail::score_database_batch(resources, queries, db, scoring, al::Backend::cuda, &stats,
                                             chosen);
            device_times.push_back(stats.slowest_device_seconds);
          },
          1, repeats);
      std::sort(device_times.begin(), device_times.end());
      mb::Row row = base_row(devices);
      row.benchmark = fmt::format("align/search20/cuda/{}gpu (with upload+layout)", devices);
      row.timing = timing;
      row.note = fmt::format("{} [{}], rescored {}", stats.kernel, tuning_note, stats.rescored);
      mb::print_row(row);
      if (!compute_row) return;
      mb::Timing kernels;
      kernels.repeats = static_cast<int>(device_times.size());
      kernels.median_s = device_times[device_times.size() / 2];
      kernels.min_s = device_times.front();
      kernels.max_s = device_times.back();
      row.benchmark = fmt::format("align/search20/cuda/{}gpu (compute only)", devices);
      row.timing = kernels;
      row.note = fmt::format("[{}] db build {:.2f} s (not timed)", tuning_note, build_seconds);
      mb::print_row(row);
    };
    // From the makedb directory: Database::open (memory map + checks) and the search.
    const auto run_loading = [&](int devices) {
      const auto resources = mb::first_gpus(static_cast<std::size_t>(devices));
      al::ScoreStats stats;
      const auto timing = mb::measure(
          [&] {
            const auto opened = al::Database::open(dbdir);
            al::detail::score_database_batch(resources, queries, opened, scoring, al::Backend::cuda, &stats,
                                             chosen);
          },
          1, repeats);
      mb::Row row = base_row(devices);
      row.benchmark = fmt::format("align/search20/cuda/{}gpu (with loading)", devices);
      row.timing = timing;
      row.note = fmt::format("{} [{}], open {} (written once in {:.2f} s)", stats.kernel, tuning_note,
                             dbdir.filename().string(), write_seconds);
      mb::print_row(row);
    };
    const int max_devices =
        max_gpus > 0 ? std::min<int>(max_gpus, static_cast<int>(gpus.size())) : static_cast<int>(gpus.size());
    for (int devices = 1; devices <= max_devices; ++devices) {
      run_in_memory(devices, true);
      run_loading(devices);
    }
    std::error_code ec;
    if (own_dbdir) std::filesystem::remove_all(dbdir, ec);
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

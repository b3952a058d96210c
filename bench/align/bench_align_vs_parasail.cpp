// CPU per core against parasail (Debian libparasail), side by side in one run, and a cross-check:
// every score of the 20 queries against db5k.fasta must equal parasail's with the same scoring
// (BLOSUM62, parasail -o 11 -e 1 = our 11/1), on pairs without U/O (which parasail's BLOSUM62 lacks).
//   bench_align_vs_parasail [DB.fasta] [--quick]
#include <parasail.h>

#include <algorithm>
#include <string>

#include "common/harness.hpp"
#include "molaccel/align.hpp"

namespace al = molaccel::align;
namespace mb = molaccel::bench;

int main(int argc, char** argv) try {
  std::filesystem::path db_path =
      std::filesystem::path(MOLACCEL_SOURCE_DIR).parent_path() / "shared" / "data" / "align" / "db5k.fasta";
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else
      db_path = a;
  }
  auto queries =
      al::read_fasta(std::filesystem::path(MOLACCEL_SOURCE_DIR) / "data" / "align" / "queries20.fasta");
  if (quick) {
    al::SequenceSet few;
    for (std::size_t q = 0; q < 4; ++q) few.add(queries.ids[q], queries.sequence(q));
    queries = few;
  }
  const auto db_set = al::read_fasta(db_path);
  const auto db = al::Database::from_sequences(db_set);
  std::uint64_t query_residues = 0;
  for (std::size_t q = 0; q < queries.size(); ++q) query_residues += queries.sequence(q).size();
  const double cells = static_cast<double>(query_residues) * static_cast<double>(db.residues());
  auto letters = [](std::span<const std::uint8_t> codes) {
    std::string s;
    for (auto c : codes) s.push_back(al::decode_residue(c));
    return s;
  };
  std::vector<std::string> query_letters, db_letters;
  for (std::size_t q = 0; q < queries.size(); ++q) query_letters.push_back(letters(queries.sequence(q)));
  for (std::size_t i = 0; i < db.size(); ++i) db_letters.push_back(letters(db.sequence(i)));  // sorted order
  const auto* matrix = parasail_matrix_lookup("blosum62");
  const al::Scoring scoring;
  mb::print_header();

  // Ours, one thread.
  std::vector<std::vector<int>> ours;
  al::ScoreStats stats;
  const auto resources = molaccel::Resources::cpu(1);
  const auto our_timing = mb::measure(
      [&] { ours = al::score_database_batch(resources, queries, db, scoring, al::Backend::cpu, &stats); }, 0,
      quick ? 1 : 3);

  // parasail, one thread: striped with a query profile, 16-bit and saturation-checked 8/16-bit.
  struct Candidate {
    const char* name;
    parasail_profile_t* (*create)(const char*, int, const parasail_matrix_t*);
    parasail_result_t* (*align)(const parasail_profile_t*, const char*, int, int, int);
  };
  const Candidate candidates[] = {
      {"sw_striped_profile_16", parasail_profile_create_16, parasail_sw_striped_profile_16},
      {"sw_striped_profile_sat", parasail_profile_create_sat, parasail_sw_striped_profile_sat}};
  std::vector<std::vector<int>> theirs(queries.size(), std::vector<int>(db.size()));
  mb::Timing best_timing;
  std::string best_name;
  for (const auto& c : candidates) {
    const auto timing = mb::measure(
        [&] {
          for (std::size_t q = 0; q < queries.size(); ++q) {
            parasail_profile_t* profile =
                c.create(query_letters[q].c_str(), static_cast<int>(query_letters[q].size()), matrix);
            for (std::size_t i = 0; i < db.size(); ++i) {
              parasail_result_t* r =
                  c.align(profile, db_letters[i].c_str(), static_cast<int>(db_letters[i].size()), 11, 1);
              theirs[q][i] = parasail_result_get_score(r);
              parasail_result_free(r);
            }
            parasail_profile_free(profile);
          }
        },
        0, quick ? 1 : 3);
    mb::Row row;
    row.benchmark = fmt::format("align/db5k/parasail/{}", c.name);
    row.device = molaccel::cpu_info().model + " (1 core)";
    row.size = fmt::format("{} q x {} seqs", queries.size(), db.size());
    row.timing = timing;
    row.work = cells;
    row.work_unit = "cells";
    row.note = "baseline, Debian parasail 2.6";
    mb::print_row(row);
    if (best_name.empty() || timing.median_s < best_timing.median_s) best_timing = timing, best_name = c.name;
  }
  mb::Row row;
  row.benchmark = "align/db5k/molaccel/cpu";
  row.device = molaccel::cpu_info().model + " (1 core)";
  row.size = fmt::format("{} q x {} seqs", queries.size(), db.size());
  row.timing = our_timing;
  row.work = cells;
  row.work_unit = "cells";
  row.note = fmt::format("{}: {:.2f}x parasail's best ({})", stats.kernel,
                         best_timing.median_s / our_timing.median_s, best_name);
  mb::print_row(row);

  // Cross-check on pairs without U/O.
  std::size_t compared = 0, differing = 0;
  auto has_u_or_o = [](const std::string& s) { return s.find_first_of("UO") != std::string::npos; };
  for (std::size_t q = 0; q < queries.size(); ++q) {
    if (has_u_or_o(query_letters[q])) continue;
    for (std::size_t i = 0; i < db.size(); ++i) {
      if (has_u_or_o(db_letters[i])) continue;
      ++compared;
      if (ours[q][i] != theirs[q][i]) {
        if (differing < 5)
          fmt::print("score differs: query {} subject {}: molaccel {} parasail {}\n", queries.ids[q],
                     db.id_of_original(db.original_index(i)), ours[q][i], theirs[q][i]);
        ++differing;
      }
    }
  }
  fmt::print("cross-check with parasail: {} pairs compared, {} differ\n", compared, differing);
  return differing == 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_align_vs_parasail: {}\n", e.what());
  return 1;
}

// Traceback of the reported hits against the scores-only search it follows (the whole command's
// two CPU phases), one thread each: the 20 standard queries (data/align/queries20.fasta) against
// 200 long subjects, top 10 per query.
//  - align/traceback/scores: search() without traceback (what --no-traceback computes);
//  - align/traceback/align_pair: align_pair of the 200 reported hits, with their known scores;
//  - align/traceback/pass1: pass 1 alone (detail::find_end with the known scores): the end cells;
//  - align/traceback/pass2: pass 2 alone (detail::find_start from those end cells): the start cells;
//  - align/traceback/pass3: pass 3 alone (detail::trace_region) on the same hits' aligned regions.
// Each pass's work is the cells it computes (pass 1: rows up to the end x the subject; pass 2: rows
// back to the start x columns up to the end; pass 3: the region).
// Subjects: by default synthetic long homologs, 10 per query (the query mutated at 5%..50% with
// indels, inside random flanks of up to 500 residues), so the aligned regions are long; --db FASTA
// takes that file's N longest sequences instead (e.g. db5k.fasta, real proteins, see
// ../shared/data/README.md).
//   bench_align_traceback [--db FASTA] [--subjects N] [--repeats N]
//                         [--only scores|align_pair|pass1|pass2|pass3]
//                         [--tuning narrow_lanes=0] [--tuning simd=scalar|avx2]
// --tuning narrow_lanes=0 keeps every pass in 32-bit lanes; simd=scalar runs the SSE2 variant
// (16-byte vectors) on an AVX2 machine (detail::TracebackLimits).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>

#include "align/traceback.hpp"
#include "common/harness.hpp"
#include "molaccel/align.hpp"

namespace al = molaccel::align;
namespace mb = molaccel::bench;

namespace {

std::vector<std::uint8_t> random_residues(std::mt19937_64& rng, std::size_t n) {
  static const std::string kStandard = "ACDEFGHIKLMNPQRSTVWY";
  std::vector<std::uint8_t> out(n);
  for (auto& c : out) c = static_cast<std::uint8_t>(al::encode_residue(kStandard[rng() % kStandard.size()]));
  return out;
}

// `query` with each residue deleted, substituted or followed by a short insertion at rate / 3 each.
std::vector<std::uint8_t> homolog(std::mt19937_64& rng, std::span<const std::uint8_t> query, double rate) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::uint8_t> out = random_residues(rng, rng() % 501);
  for (const std::uint8_t c : query) {
    const double r = u(rng);
    if (r < rate / 3) continue;
    if (r < 2 * rate / 3)
      out.push_back(random_residues(rng, 1)[0]);
    else
      out.push_back(c);
    if (r > 1 - rate / 3)
      for (const std::uint8_t x : random_residues(rng, 1 + rng() % 3)) out.push_back(x);
  }
  for (const std::uint8_t x : random_residues(rng, rng() % 501)) out.push_back(x);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  std::filesystem::path db_path;
  std::size_t subjects = 200;
  int repeats = 3;
  std::string only;
  al::detail::TracebackLimits limits;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--db" && i + 1 < argc)
      db_path = argv[++i];
    else if (a == "--subjects" && i + 1 < argc)
      subjects = std::stoul(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::max(1, std::stoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--tuning" && i + 1 < argc && std::string(argv[i + 1]).starts_with("narrow_lanes="))
      limits.narrow_lanes = std::string(argv[++i]) != "narrow_lanes=0";
    else if (a == "--tuning" && i + 1 < argc && std::string(argv[i + 1]) == "simd=scalar")
      limits.simd = molaccel::SimdLevel::scalar, ++i;
    else if (a == "--tuning" && i + 1 < argc && std::string(argv[i + 1]) == "simd=avx2")
      limits.simd = molaccel::SimdLevel::avx2, ++i;
    else {
      fmt::print(stderr,
                 "usage: {} [--db FASTA] [--subjects N] [--repeats N]\n"
                 "          [--only scores|align_pair|pass1|pass2|pass3]\n"
                 "          [--tuning narrow_lanes=0] [--tuning simd=scalar|avx2]\n",
                 argv[0]);
      return 2;
    }
  }
  const std::filesystem::path source = MOLACCEL_SOURCE_DIR;
  const auto queries = al::read_fasta(source / "data" / "align" / "queries20.fasta");
  al::SequenceSet set;
  std::string subjects_note;
  if (db_path.empty()) {
    std::mt19937_64 rng(2027);
    for (std::size_t s = 0; s < subjects; ++s) {
      const std::size_t q = s % queries.size(), k = s / queries.size();
      set.add(fmt::format("homolog{}", s),
              homolog(rng, queries.sequence(q), 0.05 + 0.05 * static_cast<double>(k % 10)));
    }
    subjects_note = "synthetic homologs";
  } else {
    const auto all = al::read_fasta(db_path);
    std::vector<std::size_t> order(all.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return all.sequence(x).size() > all.sequence(y).size();
    });
    for (std::size_t i = 0; i < std::min(subjects, order.size()); ++i)
      set.add(all.ids[order[i]], all.sequence(order[i]));
    subjects_note = fmt::format("longest of {}", db_path.filename().string());
  }
  const auto db = al::Database::from_sequences(set);
  const auto resources = molaccel::Resources::cpu(1);
  al::SearchOptions options;  // BLOSUM62, 11/1, top 10
  options.traceback = false;
  options.evalues = false;
  options.backend = al::Backend::cpu;
  std::uint64_t query_residues = 0;
  for (std::size_t q = 0; q < queries.size(); ++q) query_residues += queries.sequence(q).size();
  const std::string size = fmt::format("20 q x {} subj", db.size());
  mb::print_header();

  // The reported hits (their subjects by FASTA position) and, from one traceback, their regions.
  al::SearchResult found = al::search(resources, queries, db, options);
  std::vector<std::uint32_t> sorted_of_original(db.size());
  for (std::size_t i = 0; i < db.size(); ++i)
    sorted_of_original[db.original_index(i)] = static_cast<std::uint32_t>(i);
  std::vector<al::Hit*> hits;
  for (auto& list : found.hits)
    for (auto& hit : list) hits.push_back(&hit);
  const auto subject_of = [&](const al::Hit& hit) { return db.sequence(sorted_of_original[hit.subject]); };
  double pair_cells = 0, end_cells = 0, start_cells = 0, region_cells = 0;
  std::vector<al::detail::EndCell> ends;
  for (al::Hit* hit : hits) {
    const auto query = queries.sequence(hit->query), subject = subject_of(*hit);
    hit->alignment = al::detail::align_pair(query, subject, options.scoring, hit->score, limits);
    const auto& a = hit->alignment;
    ends.push_back(al::detail::find_end(query, subject, options.scoring, hit->score, limits));
    pair_cells += static_cast<double>(query.size()) * static_cast<double>(subject.size());
    if (a.score == 0) continue;
    const auto start = al::detail::find_start(query, subject, options.scoring, ends.back(), limits);
    end_cells += static_cast<double>(a.query_end) * static_cast<double>(subject.size());
    start_cells += static_cast<double>(a.query_end - start.query_start + 1) * a.subject_end;
    region_cells +=
        static_cast<double>(a.query_end - a.query_start + 1) * (a.subject_end - a.subject_start + 1);
  }
  const std::string lanes = fmt::format("{}, {}", al::detail::striped_variant(limits),
                                        limits.narrow_lanes ? "16-bit lanes where they fit" : "32-bit lanes");

  double scores_seconds = 0;
  if (only.empty() || only == "scores") {
    mb::Row row;
    row.benchmark = "align/traceback/scores";
    row.device = molaccel::cpu_info().model;
    row.size = size;
    row.timing = mb::measure([&] { al::search(resources, queries, db, options); }, 1, repeats);
    row.work = static_cast<double>(query_residues) * static_cast<double>(db.residues());
    row.work_unit = "cells";
    row.note = fmt::format("min {:.3f} s, search without traceback, {}, 1 thread, {}", row.timing.min_s,
                           found.stats.kernel, subjects_note);
    mb::print_row(row);
    scores_seconds = row.timing.median_s;
  }
  if (only.empty() || only == "align_pair") {
    mb::Row row;
    row.benchmark = "align/traceback/align_pair";
    row.device = molaccel::cpu_info().model;
    row.size = fmt::format("{} hits", hits.size());
    row.timing = mb::measure(
        [&] {
          for (const al::Hit* hit : hits)
            al::detail::align_pair(queries.sequence(hit->query), subject_of(*hit), options.scoring,
                                   hit->score, limits);
        },
        1, repeats);
    row.work = pair_cells;
    row.work_unit = "cells";
    row.note = scores_seconds > 0
                   ? fmt::format("min {:.1f} ms, {:.0f}% of the scores-only search, {}",
                                 1e3 * row.timing.min_s, 100.0 * row.timing.median_s / scores_seconds, lanes)
                   : fmt::format("min {:.1f} ms, known scores, {}, 1 thread", 1e3 * row.timing.min_s, lanes);
    mb::print_row(row);
  }
  if (only.empty() || only == "pass1") {
    mb::Row row;
    row.benchmark = "align/traceback/pass1";
    row.device = molaccel::cpu_info().model;
    row.size = fmt::format("{} hits", hits.size());
    row.timing = mb::measure(
        [&] {
          for (const al::Hit* hit : hits)
            al::detail::find_end(queries.sequence(hit->query), subject_of(*hit), options.scoring, hit->score,
                                 limits);
        },
        1, repeats);
    row.work = end_cells;
    row.work_unit = "cells";
    row.note =
        fmt::format("min {:.1f} ms, end cells, known scores, {}, 1 thread", 1e3 * row.timing.min_s, lanes);
    mb::print_row(row);
  }
  if (only.empty() || only == "pass2") {
    mb::Row row;
    row.benchmark = "align/traceback/pass2";
    row.device = molaccel::cpu_info().model;
    row.size = fmt::format("{} hits", hits.size());
    row.timing = mb::measure(
        [&] {
          for (std::size_t h = 0; h < hits.size(); ++h)
            if (ends[h].score > 0)
              al::detail::find_start(queries.sequence(hits[h]->query), subject_of(*hits[h]), options.scoring,
                                     ends[h], limits);
        },
        1, repeats);
    row.work = start_cells;
    row.work_unit = "cells";
    row.note = fmt::format("min {:.1f} ms, start cells from the end cells, {}, 1 thread",
                           1e3 * row.timing.min_s, lanes);
    mb::print_row(row);
  }
  if (only.empty() || only == "pass3") {
    mb::Row row;
    row.benchmark = "align/traceback/pass3";
    row.device = molaccel::cpu_info().model;
    row.size = fmt::format("{} regions", hits.size());
    row.timing = mb::measure(
        [&] {
          for (const al::Hit* hit : hits) {
            const auto& a = hit->alignment;
            if (a.score == 0) continue;
            al::detail::trace_region(
                queries.sequence(hit->query).subspan(a.query_start - 1, a.query_end - a.query_start + 1),
                subject_of(*hit).subspan(a.subject_start - 1, a.subject_end - a.subject_start + 1),
                options.scoring, a.score, limits);
          }
        },
        1, repeats);
    row.work = region_cells;
    row.work_unit = "cells";
    row.note =
        fmt::format("min {:.1f} ms, aligned regions only, {}, 1 thread", 1e3 * row.timing.min_s, lanes);
    mb::print_row(row);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_align_traceback: {}\n", e.what());
  return 1;
}

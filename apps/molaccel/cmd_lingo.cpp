// `molaccel lingo ...`: LINGO similarity matrix, top-k search, threshold neighbours, clustering;
// and the lingo step of `molaccel demo`.
#include <array>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "cmd_lingo_common.hpp"
#include "command.hpp"
#include "lingo/io/hits_output.hpp"
#include "molaccel/lingo.hpp"
#include "runtime/host_resources.hpp"
#include "runtime/parallel_writer.hpp"
#include "runtime/resource_limits.hpp"

namespace molaccel::cli {
namespace {

namespace lg = molaccel::lingo;
using namespace lingo_cli;  // the lingo commands' shared layer

// ---- matrix ----
struct MatrixOptions {
  LingoInputOptions input;
  std::string queries, db, output;
  std::string output_type = "fp32";
};

// Across ranks (.npy only): each rank holds its slice of the queries and of the database and
// computes its rows (lg::write_similarity_matrix_across_ranks).
int run_matrix_slices(RunContext& ctx, const MatrixOptions& o) {
  Communicator& comm = *ctx.comm;
  Resources resources;
  lg::MoleculeSlice queries;
  std::optional<lg::MoleculeSlice> db;
  const double read_seconds = timed([&] {
    run_step(comm, [&] {
      if (!o.output.ends_with(".npy"))
        throw InputError("-o", 0, "across MPI ranks the matrix is written as .npy only");
      resources = ctx.resources();
    });
    queries = load_slice(ctx, o.queries, o.input, "queries");
    if (!o.db.empty()) db = load_slice(ctx, o.db, o.input, "database");
    run_step(comm, [&] {
      const double cells = double(queries.total) * double(db ? db->total : queries.total);
      detail::require_output_space(o.output,
                                   cells * double(lg::element_bytes(lg::parse_output_type(o.output_type))),
                                   "write the top hits (lingo search -k) or the pairs above a threshold "
                                   "(lingo neighbors) instead, --output-type fp16 or u8, or the matrix to a "
                                   "larger filesystem");
    });
  });
  lg::RunInfo info;
  lg::write_similarity_matrix_across_ranks(comm, resources, queries, db ? &*db : nullptr, o.output,
                                           o.input.compute(), &info, lg::parse_output_type(o.output_type));
  report_run(ctx.report, info);
  report_stages(ctx.report, read_seconds, info, 0);
  ctx.report["output"] = o.output;
  ctx.report["output_type"] = o.output_type;
  if (!ctx.common.quiet)
    std::printf("%zu x %zu %s matrix -> %s (%s, %.2f s)\n", queries.total, db ? db->total : queries.total,
                o.input.metric.c_str(), o.output.c_str(), info.backend.c_str(), info.seconds);
  return 0;
}

int run_matrix(RunContext& ctx, const MatrixOptions& o) {
  if (ctx.distributed()) return run_matrix_slices(ctx, o);
  const auto format = o.output.ends_with(".npy") ? lg::MatrixFormat::npy
                      : o.output.ends_with(".tsv")
                          ? lg::MatrixFormat::tsv
                          : throw InputError("-o", 0, "the output must end in .npy or .tsv");
  Resources resources;
  lg::MoleculeSet queries;
  std::optional<lg::MoleculeSet> db;
  const double read_seconds = timed([&] {
    const double rows = molecules_estimate(o.queries);
    resources = ctx.resources_for(cpu_seconds_for_pairs(
        ctx, o.input, o.db.empty() ? rows * rows / 2 : rows * molecules_estimate(o.db)));
    queries = load(ctx, o.queries, o.input, "queries");
    if (!o.db.empty()) db = load(ctx, o.db, o.input, "database");
    on_every_rank(ctx, [&] {
      // The file's size, known up front: every cell's element (.npy), or both names, a similarity
      // (about 10 characters), two tabs and a newline (.tsv).
      const lg::MoleculeSet& cols = db ? *db : queries;
      const double cells = double(queries.size()) * double(cols.size());
      double bytes = cells * double(lg::element_bytes(lg::parse_output_type(o.output_type)));
      if (format == lg::MatrixFormat::tsv) {
        double query_names = 0, col_names = 0;
        for (const auto& name : queries.names) query_names += double(name.size());
        for (const auto& name : cols.names) col_names += double(name.size());
        bytes = query_names * double(cols.size()) + col_names * double(queries.size()) + cells * 13.0;
      }
      detail::require_output_space(o.output, bytes,
                                   "write the top hits (lingo search -k) or the pairs above a threshold "
                                   "(lingo neighbors) instead, --output-type fp16 or u8 (.npy), or the "
                                   "matrix to a larger filesystem");
    });
  });
  lg::RunInfo info;
  const auto type = lg::parse_output_type(o.output_type);
  lg::write_similarity_matrix(resources, queries, db ? &*db : nullptr, o.output, format, o.input.compute(),
                              &info, type);
  report_run(ctx.report, info);
  report_stages(ctx.report, read_seconds, info, 0);
  ctx.report["output"] = o.output;
  ctx.report["output_type"] = o.output_type;
  if (!ctx.common.quiet)
    std::printf("%zu x %zu %s matrix -> %s (%s, %.2f s)\n", queries.size(), db ? db->size() : queries.size(),
                o.input.metric.c_str(), o.output.c_str(), info.backend.c_str(), info.seconds);
  return 0;
}

const bool matrix_registered = register_command({
    .group = "lingo",
    .name = "matrix",
    .purpose = "Dense LINGO similarity matrix (.npy float32 or .tsv), streamed to disk",
    .example = "molaccel lingo matrix mols.smi -o sim.npy",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto o = std::make_shared<MatrixOptions>();
      app.add_option("QUERIES", o->queries, "Query molecules (.smi, .smi.gz, CSV)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("DB", o->db,
                     "Database molecules; omitted: QUERIES against themselves (one triangle computed)")
          ->check(CLI::ExistingFile);
      app.add_option("-o,--output", o->output, "OUT.npy (row-major, queries x db) or OUT.tsv")->required();
      app.add_option("--output-type", o->output_type,
                     ".npy element type: fp32 (exact, bit-identical on every backend), fp16 (nearest IEEE "
                     "half) or u8 (rint(255 s)); fp16/u8 are quantised and cross PCIe in fewer bytes")
          ->default_val("fp32")
          ->check(CLI::IsMember({"fp32", "fp16", "u8"}));
      add_lingo_options(app, o->input, common);
      return [o](RunContext& ctx) { return run_matrix(ctx, *o); };
    },
    .order = 1,
    .distributed = true,
});

// ---- search ----
struct SearchOptions {
  LingoInputOptions input;
  std::string queries, db, output;
  std::size_t k = 10;
};

using lg::detail::format_hits;
using lg::detail::hits_npy_header;
using lg::detail::kHitsHeader;
using lg::detail::kHitsPerBlock;
using lg::detail::write_hits;

// Across ranks (.npy or TSV): every rank formats its block of queries' hits (its slice of the
// queries, the targets' names fetched with the hits) on its own cores, and rank 0 writes the parts
// in rank order (query order), the same bytes as write_hits. Returns the bytes rank 0 received;
// `format_seconds`: this rank's formatting, the rest of the stage being the writing.
std::uint64_t write_hits_across_ranks(Communicator& comm, const std::string& path,
                                      const lg::MoleculeSlice& queries, const lg::HitBlock& block,
                                      std::size_t per_query, int threads, double& format_seconds) {
  std::string header;
  std::vector<std::string> parts;  // formatted blocks of lines, written one after the other
  std::span<const std::byte> records;
  const std::uint64_t mine = block.hits.size();
  std::uint64_t total = 0;
  for (const auto& n : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&mine, 1)))
    total += n.at(0);
  const double format_started = now_seconds();
  run_step(comm, [&] {
    const std::size_t first = block.first_query * per_query;
    if (path.ends_with(".npy")) {
      if (comm.is_root()) header = hits_npy_header(total);
      records = std::as_bytes(std::span<const lg::Hit>(block.hits));
      return;
    }
    if (comm.is_root()) header = kHitsHeader;
    parts.resize((block.hits.size() + kHitsPerBlock - 1) / kHitsPerBlock);
    parallel_for(parts.size(), threads, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p)
        format_hits(
            parts[p], block.hits, first, p * kHitsPerBlock,
            std::min(block.hits.size(), (p + 1) * kHitsPerBlock), per_query,
            [&](std::size_t i) -> const std::string& {
              return queries.set.names[block.hits[i].query - queries.first];
            },
            [&](std::size_t i) -> const std::string& { return block.target_name(i); });
    });
  });
  format_seconds = now_seconds() - format_started;
  std::vector<std::span<const std::byte>> pieces;
  if (!records.empty()) pieces.push_back(records);
  for (const auto& part : parts) pieces.push_back(std::as_bytes(std::span<const char>(part)));
  return write_in_rank_order(comm, path, header, pieces);
}

// Rank 0's part of the merge across ranks, and every rank's.
void report_merge(RunContext& ctx, const lg::RunInfo& info, std::uint64_t output_received) {
  ctx.report["stages"]["merge"] = info.merge_seconds;
  ctx.report["merge"] = {{"seconds", info.merge_seconds},
                         {"bytes_sent", info.merge_bytes_sent},
                         {"bytes_received", info.merge_bytes_received},
                         {"output_bytes_received", output_received}};
  const std::array<double, 4> mine{info.merge_seconds, static_cast<double>(info.merge_bytes_sent),
                                   static_cast<double>(info.merge_bytes_received), info.job.seconds};
  auto& by_rank = ctx.report["merge"]["by_rank"] = nlohmann::json::array();
  for (const auto& r : gather_records<std::array<double, 4>>(*ctx.comm, std::span(&mine, 1), 0))
    if (!r.empty())
      by_rank.push_back({{"seconds", r[0][0]},
                         {"bytes_sent", static_cast<std::uint64_t>(r[0][1])},
                         {"bytes_received", static_cast<std::uint64_t>(r[0][2])},
                         {"search_seconds", r[0][3]}});
}

// Across ranks with a TSV or .npy output: no rank holds either input whole
// (lg::search_slices_across_ranks); each rank formats its own block of queries.
int run_search_slices(RunContext& ctx, const SearchOptions& o) {
  Communicator& comm = *ctx.comm;
  const double started = now_seconds();
  Resources resources;
  lg::MoleculeSlice queries, db_storage;
  std::error_code ec;
  const bool same_file = std::filesystem::equivalent(o.queries, o.db, ec);
  const double read_seconds = timed([&] {
    run_step(comm, [&] { resources = ctx.resources(); });
    queries = load_slice(ctx, o.queries, o.input, "queries");
    if (!same_file) db_storage = load_slice(ctx, o.db, o.input, "database");
  });
  const lg::MoleculeSlice& db = same_file ? queries : db_storage;
  if (same_file) ctx.report["database"] = ctx.report["queries"];
  const std::size_t per_query = std::min(o.k, db.total);
  run_step(comm, [&] {
    // This rank's block: its best hits, those arriving and the merged ones.
    detail::require_memory(double(queries.set.size()) * double(per_query) * 3.0 * double(sizeof(lg::Hit)),
                           fmt::format("lingo search -k {}: {} hits per query for {} queries of this rank",
                                       o.k, per_query, queries.set.size()),
                           "use a smaller -k, more ranks, or search fewer queries at a time");
  });
  lg::RunInfo info;
  const auto block = lg::search_slices_across_ranks(comm, resources, queries, db, o.k, o.input.compute(),
                                                    !o.output.ends_with(".npy"), &info);
  std::uint64_t output_received = 0;
  double format_seconds = 0;
  const double write_seconds = timed([&] {
    output_received = write_hits_across_ranks(comm, o.output, queries, block, per_query,
                                              resources.cpu_threads(), format_seconds);
  });
  report_run(ctx.report, info);
  report_stages(ctx.report, read_seconds, info, write_seconds);
  ctx.report["stages"]["format"] = format_seconds;
  report_merge(ctx, info, output_received);
  ctx.report["k"] = o.k;
  ctx.report["hits"] = queries.total * per_query;
  ctx.report["output"] = o.output;
  ctx.report["total_seconds"] = now_seconds() - started;
  if (!ctx.common.quiet)
    std::printf("top-%zu of %zu queries against %zu molecules -> %s (%s, %.2f s)\n", o.k, queries.total,
                db.total, o.output.c_str(), info.backend.c_str(), info.seconds);
  return 0;
}

int run_search(RunContext& ctx, const SearchOptions& o) {
  // (a .zst output without libzstd fails now, not after the search)
  if (io::compression_for(o.output) == io::Compression::none && ctx.distributed())
    return run_search_slices(ctx, o);
  const double started = now_seconds();
  Resources resources;
  lg::MoleculeSet queries, db_storage;
  // The same file as queries and database (a set against itself) is read once.
  std::error_code ec;
  const bool same_file = std::filesystem::equivalent(o.queries, o.db, ec);
  std::unique_ptr<DeviceStartup> devices;
  const double read_seconds = timed([&] {
    devices = start_devices(
        ctx, o.input,
        cpu_seconds_for_pairs(ctx, o.input, molecules_estimate(o.queries) * molecules_estimate(o.db)));
    queries = load(ctx, o.queries, o.input, "queries");
    if (!same_file) db_storage = load(ctx, o.db, o.input, "database");
    on_every_rank(ctx, [&] {
      const std::size_t per_query = std::min(o.k, same_file ? queries.size() : db_storage.size());
      detail::require_memory(
          double(queries.size()) * double(per_query) * double(sizeof(lg::Hit)),
          fmt::format("lingo search -k {}: {} hits per query for {} queries", o.k, per_query, queries.size()),
          "use a smaller -k, or search fewer queries at a time");
    });
  });
  on_every_rank(ctx, [&] { resources = devices->resources(); });
  const lg::MoleculeSet& db = same_file ? queries : db_storage;
  if (same_file) ctx.report["database"] = ctx.report["queries"];
  lg::RunInfo info;
  std::vector<lg::Hit> hits;
  double write_seconds = 0;
  std::optional<double> write_after_compute;  // set where the output is written during the search
  if (ctx.distributed()) {
    // gzip: rank 0 compresses the whole result (its blocks of members are those of one process).
    hits = lg::search_across_ranks(*ctx.comm, resources, queries, db, o.k, o.input.compute(), &info);
    write_seconds = timed([&] {
      on_root(ctx, [&] {
        write_hits(o.output, queries, db, hits, std::min(o.k, db.size()), resources.cpu_threads());
      });
    });
  } else {
    // The hits are written while the search runs: each run of final queries as it completes.
    lg::detail::StreamedHits output(o.output, queries, db, std::min(o.k, db.size()), resources.cpu_threads());
    try {
      hits = lg::search(resources, queries, db, o.k, o.input.compute(), &info,
                        [&](std::size_t first, const lg::Hit* done, std::size_t count) {
                          output.ready(first, std::span(done, count));
                        });
    } catch (...) {
      output.abort();  // the writer's own error, if it failed first, is the one reported
      throw;
    }
    const double search_end = now_seconds();
    output.finish();
    write_seconds = output.write_seconds();
    write_after_compute = now_seconds() - search_end;
  }
  report_run(ctx.report, info);
  report_stages(ctx.report, read_seconds, info, write_seconds);
  if (write_after_compute) {
    ctx.report["stages"]["write_after_compute"] = *write_after_compute;
    ctx.report["stages"]["whole"] = now_seconds() - started;
  }
  if (ctx.distributed()) report_merge(ctx, info, 0);
  ctx.report["k"] = o.k;
  ctx.report["hits"] = queries.size() * std::min(o.k, db.size());
  ctx.report["output"] = o.output;
  ctx.report["total_seconds"] = now_seconds() - started;
  if (!ctx.common.quiet)
    std::printf("top-%zu of %zu queries against %zu molecules -> %s (%s, %.2f s)\n", o.k, queries.size(),
                db.size(), o.output.c_str(), info.backend.c_str(), info.seconds);
  // The largest arrays go back on several threads (freed at the return, or at exit, on one).
  molaccel::detail::free_in_parallel(hits);
  for (lg::MoleculeSet* set : {&queries, &db_storage}) {
    molaccel::detail::free_in_parallel(set->keys32);
    molaccel::detail::free_in_parallel(set->keys64);
    molaccel::detail::free_in_parallel(set->counts);
  }
  return 0;
}

const bool search_registered = register_command({
    .group = "lingo",
    .name = "search",
    .purpose = "Top-k most similar database molecules per query (ties: lower database index)",
    .example = "molaccel lingo search queries.smi db.smi.gz -k 10 -o hits.tsv",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto o = std::make_shared<SearchOptions>();
      app.add_option("QUERIES", o->queries, "Query molecules")->required()->check(CLI::ExistingFile);
      app.add_option("DB", o->db, "Database molecules")->required()->check(CLI::ExistingFile);
      app.add_option("-k", o->k, "Hits per query")->default_val(10)->check(CLI::Range(1, 1 << 20));
      app.add_option("-o,--output", o->output,
                     "Hits: TSV (query, target, similarity, rank), .gz / .zst: gzip / Zstandard TSV, .npy: "
                     "structured array "
                     "(query, target: 0-based input indices; similarity: float32)")
          ->required();
      add_lingo_options(app, o->input, common);
      return [o](RunContext& ctx) { return run_search(ctx, *o); };
    },
    .order = 2,
    .distributed = true,
});

// ---- neighbors ----
struct NeighborOptions {
  LingoInputOptions input;
  std::string db, output;
  float threshold = 0.7f;
};

// Across ranks with a TSV or .npy output: each rank holds its slice of the molecules
// (lg::neighbors_slices_across_ranks) and formats the pairs of its rows.
int run_neighbors_slices(RunContext& ctx, const NeighborOptions& o) {
  Communicator& comm = *ctx.comm;
  Resources resources;
  lg::MoleculeSlice db;
  const double read_seconds = timed([&] {
    run_step(comm, [&] { resources = ctx.resources(); });
    db = load_slice(ctx, o.db, o.input, "database");
    run_step(comm, [&] { require_all_pairs_memory(db.total, o.threshold, "neighbors"); });
  });
  lg::RunInfo info;
  const auto block = lg::neighbors_slices_across_ranks(comm, resources, db, o.threshold, o.input.compute(),
                                                       !o.output.ends_with(".npy"), &info);
  std::uint64_t output_received = 0;
  double format_seconds = 0;
  const double write_seconds = timed([&] {
    output_received =
        write_hits_across_ranks(comm, o.output, db, block, 0, resources.cpu_threads(), format_seconds);
  });
  report_run(ctx.report, info);
  report_stages(ctx.report, read_seconds, info, write_seconds);
  ctx.report["stages"]["format"] = format_seconds;
  report_merge(ctx, info, output_received);
  const std::uint64_t mine = block.hits.size();
  std::uint64_t pairs = 0;
  for (const auto& n : allgather_records<std::uint64_t>(comm, std::span<const std::uint64_t>(&mine, 1)))
    pairs += n.at(0);
  ctx.report["threshold"] = o.threshold;
  ctx.report["neighbor_pairs"] = pairs;
  ctx.report["output"] = o.output;
  if (!ctx.common.quiet)
    std::printf("%llu pairs with similarity >= %g among %zu molecules -> %s (%s, %.2f s)\n",
                static_cast<unsigned long long>(pairs), o.threshold, db.total, o.output.c_str(),
                info.backend.c_str(), info.seconds);
  return 0;
}

int run_neighbors(RunContext& ctx, const NeighborOptions& o) {
  if (io::compression_for(o.output) == io::Compression::none && ctx.distributed())
    return run_neighbors_slices(ctx, o);
  Resources resources;
  lg::MoleculeSet db;
  std::unique_ptr<DeviceStartup> devices;
  const double read_seconds = timed([&] {
    const double n = molecules_estimate(o.db);
    devices = start_devices(ctx, o.input, cpu_seconds_for_pairs(ctx, o.input, n * n / 2));
    db = load(ctx, o.db, o.input, "database");
    on_every_rank(ctx, [&] { require_all_pairs_memory(db.size(), o.threshold, "neighbors"); });
  });
  on_every_rank(ctx, [&] { resources = devices->resources(); });
  lg::RunInfo info;
  const auto pairs = ctx.distributed() ? lg::neighbors_across_ranks(*ctx.comm, resources, db, o.threshold,
                                                                    o.input.compute(), &info)
                                       : lg::neighbors(resources, db, o.threshold, o.input.compute(), &info);
  const double write_seconds =
      timed([&] { on_root(ctx, [&] { write_hits(o.output, db, db, pairs, 0, resources.cpu_threads()); }); });
  report_run(ctx.report, info);
  report_stages(ctx.report, read_seconds, info, write_seconds);
  ctx.report["threshold"] = o.threshold;
  ctx.report["neighbor_pairs"] = pairs.size();
  ctx.report["output"] = o.output;
  if (!ctx.common.quiet)
    std::printf("%zu pairs with similarity >= %g among %zu molecules -> %s (%s, %.2f s)\n", pairs.size(),
                o.threshold, db.size(), o.output.c_str(), info.backend.c_str(), info.seconds);
  return 0;
}

const bool neighbors_registered = register_command({
    .group = "lingo",
    .name = "neighbors",
    .purpose = "All pairs i<j with similarity >= threshold (sparse output, length bound prunes pairs)",
    .example = "molaccel lingo neighbors db.smi --threshold 0.8 -o pairs.tsv",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto o = std::make_shared<NeighborOptions>();
      app.add_option("DB", o->db, "Molecules")->required()->check(CLI::ExistingFile);
      app.add_option("--threshold", o->threshold, "Minimum similarity, in [0, 1]")
          ->default_val(0.7)
          ->check(CLI::Range(0.0, 1.0));
      app.add_option(
             "-o,--output", o->output,
             "Pairs: TSV (query, target, similarity; rank column 0), .gz / .zst: gzip / Zstandard TSV, "
             ".npy: "
             "structured array (query, target: 0-based input indices; similarity: float32)")
          ->required();
      add_lingo_options(app, o->input, common);
      return [o](RunContext& ctx) { return run_neighbors(ctx, *o); };
    },
    .order = 3,
    .distributed = true,
});

// ---- cluster ----
void write_clusters(const std::string& path, const lg::MoleculeSet& db, const lg::Clustering& c) {
  std::vector<bool> is_centroid(db.size(), false);
  for (auto m : c.centroids) is_centroid[m] = true;
  write_file_atomically(path, [&](std::FILE* f) {
    std::fputs("molecule\tcluster\tis_centroid\n", f);
    for (std::size_t i = 0; i < db.size(); ++i)
      fmt::print(f, "{}\t{}\t{}\n", db.names[i], c.cluster_of[i], is_centroid[i] ? 1 : 0);
  });
}

// Across ranks: each rank holds its slice of the molecules (lg::cluster_slices_across_ranks) and
// formats its molecules' lines; rank 0 writes them in rank order.
int run_cluster_slices(RunContext& ctx, const NeighborOptions& o) {
  Communicator& comm = *ctx.comm;
  Resources resources;
  lg::MoleculeSlice db;
  run_step(comm, [&] { resources = ctx.resources(); });
  db = load_slice(ctx, o.db, o.input, "database");
  run_step(comm, [&] { require_all_pairs_memory(db.total, o.threshold, "cluster"); });
  lg::RunInfo info;
  const auto clusters =
      lg::cluster_slices_across_ranks(comm, resources, db, o.threshold, o.input.compute(), &info);
  std::string text;
  for (std::size_t i = 0; i < db.set.size(); ++i)
    fmt::format_to(std::back_inserter(text), "{}\t{}\t{}\n", db.set.names[i], clusters.cluster_of[i],
                   clusters.is_centroid[i] ? 1 : 0);
  write_in_rank_order(comm, o.output, comm.is_root() ? "molecule\tcluster\tis_centroid\n" : "",
                      std::as_bytes(std::span<const char>(text)));
  report_run(ctx.report, info);
  ctx.report["threshold"] = o.threshold;
  ctx.report["clusters"] = clusters.clusters;
  ctx.report["neighbor_pairs"] = clusters.pairs;
  ctx.report["output"] = o.output;
  if (!ctx.common.quiet)
    std::printf("%zu clusters of %zu molecules at similarity >= %g -> %s (%s, %.2f s)\n", clusters.clusters,
                db.total, o.threshold, o.output.c_str(), info.backend.c_str(), info.seconds);
  return 0;
}

int run_cluster(RunContext& ctx, const NeighborOptions& o) {
  if (ctx.distributed()) return run_cluster_slices(ctx, o);
  Resources resources;
  lg::MoleculeSet db;
  const double n = molecules_estimate(o.db);
  on_every_rank(ctx, [&] { resources = ctx.resources_for(cpu_seconds_for_pairs(ctx, o.input, n * n / 2)); });
  db = load(ctx, o.db, o.input, "database");
  on_every_rank(ctx, [&] { require_all_pairs_memory(db.size(), o.threshold, "cluster"); });
  lg::RunInfo info;
  const auto clustering =
      ctx.distributed()
          ? lg::cluster_across_ranks(*ctx.comm, resources, db, o.threshold, o.input.compute(), &info)
          : lg::cluster(resources, db, o.threshold, o.input.compute(), &info);
  on_root(ctx, [&] { write_clusters(o.output, db, clustering); });
  report_run(ctx.report, info);
  ctx.report["threshold"] = o.threshold;
  ctx.report["clusters"] = clustering.centroids.size();
  ctx.report["neighbor_pairs"] = clustering.pairs;
  ctx.report["output"] = o.output;
  if (!ctx.common.quiet)
    std::printf("%zu clusters of %zu molecules at similarity >= %g -> %s (%s, %.2f s)\n",
                clustering.centroids.size(), db.size(), o.threshold, o.output.c_str(), info.backend.c_str(),
                info.seconds);
  return 0;
}

const bool cluster_registered = register_command({
    .group = "lingo",
    .name = "cluster",
    .purpose = "Taylor-Butina clustering at a similarity threshold (no N^2 memory)",
    .example = "molaccel lingo cluster db.smi --threshold 0.7 -o clusters.tsv",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto o = std::make_shared<NeighborOptions>();
      app.add_option("DB", o->db, "Molecules")->required()->check(CLI::ExistingFile);
      app.add_option("--threshold", o->threshold, "Neighbour similarity, in [0, 1]")
          ->default_val(0.7)
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("-o,--output", o->output, "TSV: molecule, cluster (0-based), is_centroid")->required();
      add_lingo_options(app, o->input, common);
      return [o](RunContext& ctx) { return run_cluster(ctx, *o); };
    },
    .order = 4,
    .distributed = true,
});

// ---- demo: a similarity search on the bundled ZINC set ----
void run_demo_step(DemoContext& dc) {
  const auto input = dc.data_dir / "lingo" / "demo4096.smi";
  lg::LingoOptions lingo;
  auto db = lg::read_molecules(input, lingo);
  // Queries: the first five lines of the same file; each one's top hit is itself (similarity 1).
  std::ifstream in(input);
  std::string line, head;
  for (int i = 0; i < 5 && std::getline(in, line); ++i) head += line + "\n";
  auto queries = lg::parse_molecules(input.string(), head, lingo);
  const std::size_t k = 5;
  lg::RunInfo info;
  const auto hits = lg::search(dc.resources, queries, db, k, {}, &info);
  const auto out_dir = dc.output_dir / "lingo";
  std::filesystem::create_directories(out_dir);
  write_hits((out_dir / "search_hits.tsv").string(), queries, db, hits, k, 0);
  std::printf("LINGO search (q=4, multiset Tanimoto): %zu queries x %zu ZINC molecules, top %zu, on %s\n",
              queries.size(), db.size(), k, info.backend.c_str());
  for (std::size_t q = 0; q < queries.size(); ++q) {
    std::printf("  %-14s", queries.names[q].c_str());
    for (std::size_t r = 1; r < k; ++r) {  // rank 1 is the query itself
      const auto& h = hits[q * k + r];
      std::printf(" %s %.3f", db.names[h.target].c_str(), h.similarity);
    }
    std::printf("\n");
  }
  lg::RunInfo cinfo;
  const auto clusters = lg::cluster(dc.resources, db, 0.7f, {}, &cinfo);
  std::printf("Butina clustering at 0.7: %zu clusters from %zu neighbour pairs (%s)\n",
              clusters.centroids.size(), clusters.pairs, cinfo.backend.c_str());
  std::printf("hits written to %s\n", (out_dir / "search_hits.tsv").string().c_str());
  dc.report["backend"] = info.backend;
  dc.report["queries"] = queries.size();
  dc.report["database"] = db.size();
  dc.report["self_hit_similarity"] = hits.empty() ? 0.0f : hits.front().similarity;
  dc.report["clusters_at_0.7"] = clusters.centroids.size();
  dc.report["output"] = (out_dir / "search_hits.tsv").string();
}

const bool demo_registered = register_demo({.name = "lingo", .order = 10, .run = run_demo_step});

}  // namespace
}  // namespace molaccel::cli

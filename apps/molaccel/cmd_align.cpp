// `molaccel align ...`: Smith-Waterman protein database search and database building; and the
// align step of `molaccel demo`.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <sstream>

#include "command.hpp"
#include "molaccel/align.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::cli {
namespace {

namespace al = molaccel::align;

const char* kConventions =
    "\n\nConventions:\n"
    "  Scoring: local alignment (Smith-Waterman-Gotoh) with affine gaps; a gap of length k costs\n"
    "  GAP_OPEN + (k-1) x GAP_EXTEND. The defaults (BLOSUM62, 11, 1) equal BLAST's -gapopen 10\n"
    "  -gapextend 1, parasail's/SSW's -o 11 -e 1 and CUDASW++'s --gop -11 --gex -1.\n"
    "  Matrices: BLOSUM45/50/62/80/90, PAM30/70/250 (NCBI), or --matrix FILE in NCBI's text format.\n"
    "  Alphabet: the 20 amino acids and B Z X U O *, any case (U and O score as X in built-in\n"
    "  matrices); any other letter stops the run naming file, line, record and position.\n"
    "  Inputs: FASTA (also .gz); ids are the first word after '>'. DB may be a DBDIR from makedb.\n"
    "  Output TSV columns: query subject score bitscore evalue qstart qend sstart send identity alnlen\n"
    "  (1-based inclusive coordinates from a traceback of each reported hit; identity in percent of\n"
    "  alignment columns; NA where --no-traceback or --no-evalue leaves a field out). Hits: score > 0,\n"
    "  best first, ties by position in the database FASTA. E-values: Karlin-Altschul with NCBI's\n"
    "  published gapped lambda and K for the matrix and gap costs, and BLAST's length adjustment;\n"
    "  combinations without published values are an error unless --no-evalue.";

struct ScoringOptions {
  std::string matrix = "BLOSUM62";
  int gap_open = 11, gap_extend = 1;
  std::string backend = "auto";
  al::Scoring scoring() const {
    al::Scoring s;
    s.matrix = al::matrix_by_name_or_file(matrix);
    s.gap_open = gap_open;
    s.gap_extend = gap_extend;
    s.validate();
    return s;
  }
};

void add_scoring_options(CLI::App& app, ScoringOptions& o) {
  app.add_option("--matrix", o.matrix, "BLOSUM45|50|62|80|90, PAM30|70|250, or an NCBI-format matrix FILE")
      ->default_val("BLOSUM62");
  app.add_option("--gap-open", o.gap_open, "Cost of a gap of length 1")
      ->default_val(11)
      ->check(CLI::Range(1, 1000));
  app.add_option("--gap-extend", o.gap_extend, "Cost of each further gap position")
      ->default_val(1)
      ->check(CLI::Range(1, 1000));
  app.add_option("--backend", o.backend, "auto (from --device), reference (the 32-bit oracle), cpu or cuda")
      ->default_val("auto")
      ->check(CLI::IsMember({"auto", "reference", "cpu", "cuda"}));
}

// ---- search ----
struct SearchCommand {
  ScoringOptions scoring;
  std::string queries, db, output;
  int k = 10;
  bool no_traceback = false, no_evalue = false;
};

int run_search_ranks(RunContext& ctx, const SearchCommand& o);

// Seconds from the start of this process to now (its start time in /proc/self/stat, in clock ticks
// since boot, against /proc/uptime; 10 ms resolution); NaN without /proc.
double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = 0;
  if (!std::getline(stat, line) || !(uptime >> up)) return std::nan("");
  std::istringstream fields(line.substr(line.rfind(')') + 1));  // after the command name
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)  // field 22: start time
    if (i == 22) return up - std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return std::nan("");
}

// The devices start (the CUDA driver's initialisation, each GPU's context, the kernels loaded) on
// a thread of their own (std::async's default policy: at get() where no thread can be had), so
// that they overlap reading the queries and opening the database; `ready` gets the time they were.
// `cpu_only`: RunContext::small_job's choice (the CPU alone; the driver is never touched).
std::future<Resources> start_devices(RunContext& ctx, const SearchCommand& o, double* ready = nullptr,
                                     bool cpu_only = false) {
  const bool gpu_backend = o.scoring.backend == "auto" || o.scoring.backend == "cuda";
  return std::async([&ctx, gpu_backend, ready, cpu_only] {
    Resources r = cpu_only ? ctx.cpu_resources() : ctx.resources();
    if (gpu_backend) al::prepare_devices(r);
    if (ready) *ready = now_seconds();
    return r;
  });
}

// Bytes of an input's text (io::text_size_estimate), or of every file of a makedb directory.
double input_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return static_cast<double>(io::text_size_estimate(path));
  double bytes = 0;
  for (const auto& entry : fs::directory_iterator(path, ec))
    if (entry.is_regular_file(ec)) bytes += static_cast<double>(entry.file_size(ec));
  return bytes;
}

// For --device auto with --backend auto, before the inputs are read: a CPU run's seconds for the
// query residues x the database's, each taken as the input's bytes (headers and a makedb
// directory's index count as residues: the estimate errs towards more work), at 0.8 GCUPS a core:
// what the H200 host's 16 cores reach together (13 GCUPS) with the 20 standard queries against the
// 400-sequence demo database, a job too small to keep them busy (the development machine's AVX-512
// cores score 5.5 each on 2 threads).
double cpu_seconds_estimate(const RunContext& ctx, const SearchCommand& o) {
  if (o.scoring.backend != "auto") return std::numeric_limits<double>::infinity();
  return input_bytes(o.queries) * input_bytes(o.db) / (0.8e9 * ctx.common.cpu_threads());
}

int run_search(RunContext& ctx, const SearchCommand& o) {
  if (ctx.distributed()) return run_search_ranks(ctx, o);
  const double started = now_seconds();
  const double before_start = seconds_since_process_start();
  // Start-up and loading overlap; "start" is what is left of the start-up after loading.
  double devices_ready = 0;
  auto starting = start_devices(ctx, o, &devices_ready, ctx.small_job(cpu_seconds_estimate(ctx, o)));
  al::SearchOptions options;
  options.scoring = o.scoring.scoring();
  options.top_k = o.k;
  options.traceback = !o.no_traceback;
  options.evalues = !o.no_evalue;
  options.backend = parse_compute_backend(o.scoring.backend);
  const auto queries = al::read_fasta(o.queries);
  const double read = now_seconds();
  const auto db = al::Database::load(o.db);
  const double loaded = now_seconds();
  const Resources resources = starting.get();  // device errors are reported here
  const double ready = now_seconds();
  const auto result = al::search(resources, queries, db, options);
  const double searched = now_seconds();
  al::write_hits_tsv(o.output, queries, db, result);
  const double written = now_seconds();
  const double seconds = written - started;
  const double gcups = result.stats.cells / std::max(1e-9, result.stats.seconds) / 1e9;
  ctx.report["queries"] = queries.size();
  ctx.report["database"] = {{"path", o.db}, {"sequences", db.size()}, {"residues", db.residues()}};
  ctx.report["matrix"] = options.scoring.matrix.name;
  ctx.report["gap_open"] = options.scoring.gap_open;
  ctx.report["gap_extend"] = options.scoring.gap_extend;
  ctx.report["kernel"] = result.stats.kernel;
  ctx.report["cells"] = result.stats.cells;
  ctx.report["rescored_pairs"] = result.stats.rescored;
  ctx.report["scoring_seconds"] = result.stats.seconds;
  ctx.report["load_seconds"] = loaded - started;
  ctx.report["device_start_seconds"] = devices_ready - started;  // overlapped with read and load
  // From the process's start to the command's (loading the program, parsing the command line).
  ctx.report["before_start_seconds"] = before_start;
  ctx.report["total_seconds"] = seconds;
  // "start": the wait for the devices after loading; "traceback": the search's time beyond
  // scoring (top hits, traceback, statistics).
  ctx.report["stages"] = {{"read", read - started},
                          {"load", loaded - read},
                          {"start", ready - loaded},
                          {"compute", result.stats.seconds},
                          {"traceback", std::max(0.0, searched - ready - result.stats.seconds)},
                          {"write", written - searched}};
  ctx.report["gcups_scoring"] = gcups;
  ctx.report["gcups_with_loading"] = result.stats.cells / std::max(1e-9, seconds) / 1e9;
  ctx.report["output"] = o.output;
  if (!ctx.common.quiet)
    std::printf("%zu queries x %zu sequences (%llu residues): %.1f GCUPS scoring, %.2f s in all (%s) -> %s\n",
                queries.size(), db.size(), static_cast<unsigned long long>(db.residues()), gcups, seconds,
                result.stats.kernel.c_str(), o.output.c_str());
  return 0;
}

// Across MPI ranks: each rank reads its shard (only its part of a DBDIR; a FASTA is read whole and
// sharded), the ranks merge per-query top hits, rank 0 writes the same TSV as one process would.
int run_search_ranks(RunContext& ctx, const SearchCommand& o) {
  Communicator& comm = *ctx.comm;
  const double started = now_seconds();
  Resources resources;
  al::SearchOptions options;
  al::SequenceSet queries;
  al::Database shard;
  // As in one process: the rank's devices start while it reads the queries and its shard.
  std::future<Resources> starting;
  run_step(comm, [&] {
    starting = start_devices(ctx, o);
    options.scoring = o.scoring.scoring();
    options.top_k = o.k;
    options.traceback = !o.no_traceback;
    options.evalues = !o.no_evalue;
    options.backend = parse_compute_backend(o.scoring.backend);
    queries = al::read_fasta(o.queries);
    std::error_code ec;
    shard = std::filesystem::is_directory(o.db, ec)
                ? al::Database::open_shard(o.db, comm.rank(), comm.size())
                : al::Database::from_fasta(o.db).shard(comm.rank(), comm.size());
  });
  const double loaded = now_seconds();
  run_step(comm, [&] { resources = starting.get(); });  // device errors are reported here
  const double ready = now_seconds();
  const auto merged = al::search_across_ranks(comm, resources, queries, shard, options);
  const double searched = now_seconds();
  run_step(comm, [&] {
    if (comm.is_root()) al::write_hits_tsv(o.output, queries, merged);
  });
  const double written = now_seconds();
  const double seconds = now_seconds() - started;
  const auto& stats = merged.result.stats;
  ctx.report["queries"] = queries.size();
  ctx.report["database"] = {{"path", o.db},
                            {"sequences", shard.total_sequences()},
                            {"residues", shard.total_residues()},
                            {"rank0_shard_sequences", shard.size()},
                            {"rank0_shard_residues", shard.residues()}};
  ctx.report["matrix"] = options.scoring.matrix.name;
  ctx.report["gap_open"] = options.scoring.gap_open;
  ctx.report["gap_extend"] = options.scoring.gap_extend;
  ctx.report["kernel"] = stats.kernel;
  ctx.report["rank0_scoring_seconds"] = stats.seconds;
  ctx.report["scoring_seconds_by_rank"] = merged.scoring_seconds_by_rank;
  ctx.report["merge"] = {{"seconds", merged.merge.seconds},
                         {"bytes_received", merged.merge.bytes_received},
                         {"bytes_sent", merged.merge.bytes_sent},
                         {"traceback_seconds", merged.merge.traceback_seconds}};
  ctx.report["load_seconds"] = loaded - started;
  ctx.report["total_seconds"] = seconds;
  ctx.report["stages"] = {{"load", loaded - started},
                          {"start", ready - loaded},
                          {"compute", stats.seconds},
                          {"merge", merged.merge.seconds},
                          {"traceback", merged.merge.traceback_seconds},
                          {"write", written - searched}};
  ctx.report["output"] = o.output;
  if (!ctx.common.quiet)
    std::printf(
        "%zu queries x %llu sequences (%llu residues) on %d MPI ranks: %.2f s in all, merge %.1f ms (%s) -> "
        "%s\n",
        queries.size(), static_cast<unsigned long long>(shard.total_sequences()),
        static_cast<unsigned long long>(shard.total_residues()), comm.size(), seconds,
        merged.merge.seconds * 1e3, stats.kernel.c_str(), o.output.c_str());
  return 0;
}

const bool search_registered = register_command({
    .group = "align",
    .name = "search",
    .purpose = "Smith-Waterman search of protein queries against a database: best K hits per query (TSV)",
    .example = "molaccel align search queries.fasta db.fasta -k 10 -o hits.tsv",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto o = std::make_shared<SearchCommand>();
      app.add_option("QUERIES", o->queries, "Query proteins (FASTA, .gz)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("DB", o->db, "Database: FASTA (.gz) or a DBDIR from 'molaccel align makedb'")
          ->required()
          ->check(CLI::ExistingPath);
      app.add_option("-k,--top", o->k, "Hits per query")->default_val(10)->check(CLI::Range(1, 1000000));
      app.add_option("-o,--output", o->output, "Output TSV")->required();
      app.add_flag("--no-traceback", o->no_traceback, "Scores only (coordinates, identity, length = NA)");
      app.add_flag("--no-evalue", o->no_evalue,
                   "No bit scores or E-values (needed for unpublished matrix/gap sets)");
      add_scoring_options(app, o->scoring);
      common.add_device_options(app);
      app.footer(kConventions);
      return [o](RunContext& ctx) { return run_search(ctx, *o); };
    },
    .order = 1,
    .distributed = true,
});

// ---- makedb ----
struct MakedbCommand {
  std::string fasta, output;
};

const bool makedb_registered = register_command({
    .group = "align",
    .name = "makedb",
    .purpose = "Encode, length-sort and index a FASTA database into a memory-mappable DBDIR",
    .example = "molaccel align makedb uniprot.fasta.gz -o uniprot.db",
    .setup = [](CLI::App& app, CommonOptions&) -> Action {
      auto o = std::make_shared<MakedbCommand>();
      app.add_option("DB", o->fasta, "Database proteins (FASTA, .gz)")->required()->check(CLI::ExistingFile);
      app.add_option("-o,--output", o->output, "Output directory (created; files replaced atomically)")
          ->required();
      app.footer(kConventions);
      return [o](RunContext& ctx) {
        const double started = now_seconds();
        double read = 0;
        const auto db = [&] {  // the sequences as read are gone before the database is written
          const auto sequences = al::read_fasta(o->fasta);
          read = now_seconds();
          return al::Database::from_sequences(sequences);
        }();
        const double sorted = now_seconds();
        db.write(o->output);
        const double written = now_seconds();
        ctx.report["total_seconds"] = written - started;
        ctx.report["stages"] = {
            {"read", read - started}, {"sort", sorted - read}, {"write", written - sorted}};
        ctx.report["sequences"] = db.size();
        ctx.report["residues"] = db.residues();
        ctx.report["max_length"] = db.max_length();
        ctx.report["output"] = o->output;
        if (!ctx.common.quiet)
          std::printf("%zu sequences, %llu residues (longest %u) -> %s (%.2f s)\n", db.size(),
                      static_cast<unsigned long long>(db.residues()), db.max_length(), o->output.c_str(),
                      now_seconds() - started);
        return 0;
      };
    },
    .order = 2,
});

// ---- demo: three of the 20 benchmark queries against a bundled 400-protein sample ----
void run_demo_step(DemoContext& dc) {
  const auto dir = dc.data_dir / "align";
  const auto queries = al::read_fasta(dir / "demo_queries.fasta");
  const auto db = al::Database::from_fasta(dir / "demo_db.fasta");
  al::SearchOptions options;
  options.top_k = 3;
  const auto result = al::search(dc.resources, queries, db, options);
  const auto out_dir = dc.output_dir / "align";
  std::filesystem::create_directories(out_dir);
  const auto output = out_dir / "search_hits.tsv";
  al::write_hits_tsv(output, queries, db, result);
  std::printf(
      "Smith-Waterman search (BLOSUM62, gaps 11/1): %zu queries x %zu UniProt proteins, top %d, on %s\n",
      queries.size(), db.size(), options.top_k, result.stats.kernel.c_str());
  // Ids here are UniProt-style "ACC|annotations": print the accession.
  auto accession = [](const std::string& id) { return id.substr(0, id.find('|')); };
  for (std::size_t q = 0; q < queries.size(); ++q) {
    const auto& id = queries.ids[q];
    const auto parts = id.find("|sp|") != std::string::npos ? id.substr(id.find("|sp|") + 4) : id;
    std::printf("  %-12s", accession(parts).c_str());
    for (const auto& hit : result.hits[q])
      std::printf("  %s %d (E=%.2g)", accession(db.id_of_original(hit.subject)).c_str(), hit.score,
                  hit.evalue);
    std::printf("\n");
  }
  std::printf("hits written to %s\n", output.string().c_str());
  dc.report["kernel"] = result.stats.kernel;
  dc.report["queries"] = queries.size();
  dc.report["database"] = db.size();
  dc.report["best_score"] = result.hits.empty() || result.hits[0].empty() ? 0 : result.hits[0][0].score;
  dc.report["output"] = output.string();
}

const bool demo_registered = register_demo({.name = "align", .order = 20, .run = run_demo_step});

}  // namespace
}  // namespace molaccel::cli

// The lingo commands' shared layer (cmd_lingo_common.hpp).
#include "cmd_lingo_common.hpp"

#include <limits>

#include "runtime/host_resources.hpp"
#include "runtime/resource_limits.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::cli::lingo_cli {
namespace {

const char* kConventions =
    "\n\nConventions:\n"
    "  Input: .smi or .smi.gz (SMILES, whitespace, optional name; names default to line numbers), or\n"
    "  CSV with --smiles-column NAME|INDEX (a header line; a name/id/title column gives the names).\n"
    "  SMILES are used as given (no canonicalisation). A line that cannot be a SMILES (control\n"
    "  bytes, non-ASCII, unbalanced brackets or parentheses) stops the run with FILE:LINE and no\n"
    "  output, or is skipped and counted with --skip-invalid.\n"
    "  Preprocessing (default, the SIML paper's): ring-closure digits -> 0, digits after + - H [\n"
    "  kept, %nn -> %0. --digits all: every digit -> 0 (CDK). --halogens: Cl -> L, Br -> R.\n"
    "  Metrics: tanimoto (multiset, default), vidal (CDK LingoSimilarity), set (distinct Lingos);\n"
    "  fp32 from exact integer counts, bit-identical on every backend. A molecule with no Lingos\n"
    "  (shorter than q) has similarity 0 to everything, itself included.";

lg::ReadOptions read_options(const LingoInputOptions& o) {
  lg::ReadOptions read;
  read.smiles_column = o.smiles_column;
  read.csv_delimiter = o.delimiter.empty() ? ',' : o.delimiter[0];
  read.skip_invalid = o.skip_invalid;
  return read;
}
void report_read(RunContext& ctx, const std::string& path, const char* role, const lg::ReadStats& stats) {
  ctx.report[role] = {
      {"path", path}, {"molecules", stats.molecules}, {"skipped_invalid", stats.skipped_invalid}};
  if (stats.skipped_invalid > 0 && (!ctx.comm || ctx.comm->is_root()))
    log_warn("{}: skipped {} invalid line(s), the first at line {}", path, stats.skipped_invalid,
             stats.first_skipped_line);
}

}  // namespace

void add_lingo_options(CLI::App& app, LingoInputOptions& o, CommonOptions& common) {
  app.add_option("--q", o.q, "Lingo length, 1..8")->default_val(4)->check(CLI::Range(lg::kMinQ, lg::kMaxQ));
  app.add_option("--metric", o.metric, "tanimoto, vidal or set")
      ->default_val("tanimoto")
      ->check(CLI::IsMember({"tanimoto", "vidal", "set"}));
  app.add_option("--digits", o.digits, "paper (SIML/OpenEye rule) or all (every digit -> 0)")
      ->default_val("paper")
      ->check(CLI::IsMember({"paper", "all"}));
  app.add_flag("--halogens", o.halogens, "Replace Cl by L and Br by R before cutting Lingos");
  app.add_option("--smiles-column", o.smiles_column,
                 "Read CSV input: the SMILES column's name or 1-based index");
  app.add_option("--delimiter", o.delimiter, "CSV field delimiter (one character)")
      ->default_val(",")
      ->check(
          [](const std::string& v) { return v.size() == 1 ? std::string() : std::string("one character"); });
  app.add_flag("--skip-invalid", o.skip_invalid, "Skip (and count) invalid SMILES lines instead of failing");
  app.add_option("--backend", o.backend, "auto (from --device), reference (the oracle), cpu or cuda")
      ->default_val("auto")
      ->check(CLI::IsMember({"auto", "reference", "cpu", "cuda"}));
  common.add_device_options(app);
  app.footer(app.get_footer() + kConventions);
}

lg::MoleculeSet load(RunContext& ctx, const std::string& path, const LingoInputOptions& o, const char* role) {
  lg::ReadStats stats;
  auto set = ctx.distributed()
                 ? lg::read_molecules_across_ranks(*ctx.comm, path, o.lingo(), read_options(o), &stats)
                 : lg::read_molecules(path, o.lingo(), read_options(o), &stats);
  report_read(ctx, path, role, stats);
  return set;
}
lg::MoleculeSlice load_slice(RunContext& ctx, const std::string& path, const LingoInputOptions& o,
                             const char* role) {
  lg::ReadStats stats;
  auto slice = lg::read_molecule_slice_across_ranks(*ctx.comm, path, o.lingo(), read_options(o), &stats);
  report_read(ctx, path, role, stats);
  return slice;
}

void on_every_rank(RunContext& ctx, const std::function<void()>& step) {
  if (ctx.distributed())
    run_step(*ctx.comm, step);
  else
    step();
}
void on_root(RunContext& ctx, const std::function<void()>& write) {
  on_every_rank(ctx, [&] {
    if (!ctx.comm || ctx.comm->is_root()) write();
  });
}

// For --device auto, before the inputs are read: a CPU run's seconds for `pairs` similarities, at
// 5e7 pairs a second a core (in a 20 x 367k search the H200 host's cores reach 7.5e7 and the
// development machine's AVX-512 Xeon 1.2e8), taken lower so that a job on the edge keeps the GPU.
double cpu_seconds_for_pairs(const RunContext& ctx, const LingoInputOptions& o, double pairs) {
  if (o.backend != "auto") return std::numeric_limits<double>::infinity();
  return pairs / (5e7 * ctx.common.cpu_threads());
}
// The molecules of a SMILES file, from its text's size at 40 bytes a line (SMILES of drug-like
// molecules with their names take 50-70): the estimate errs towards more work. Standard input: not
// known, so many.
double molecules_estimate(const std::string& path) {
  if (path == "-") return 1e12;
  return static_cast<double>(io::text_size_estimate(path)) / 40.0;
}

std::unique_ptr<DeviceStartup> start_devices(RunContext& ctx, const LingoInputOptions& o,
                                             double cpu_seconds) {
  if (!ctx.distributed()) {
    if (ctx.small_job(cpu_seconds))
      return std::make_unique<DeviceStartup>([&ctx] { return ctx.cpu_resources(); }, o);
    return std::make_unique<DeviceStartup>([&ctx] { return ctx.resources(); }, o);
  }
  Resources resources;
  on_every_rank(ctx, [&] { resources = ctx.resources(); });
  return std::make_unique<DeviceStartup>([resources] { return resources; }, o);
}

void report_run(nlohmann::json& report, const lg::RunInfo& info) {
  report["backend"] = info.backend;
  report["pairs"] = info.pairs;
  report["pairs_skipped_by_length_bound"] = info.pairs_skipped;
  report["seconds"] = info.seconds;
  report["prepare_seconds"] = info.prepare_seconds;  // encoding and index building
  report["job_seconds"] = info.job.seconds;          // the tiles over all workers
  report["tiles_per_worker"] = info.job.tiles_per_worker;
  report["tiles"] = info.job.tiles;
  report["tile_retries"] = info.job.retries;
}

double timed(const std::function<void()>& step) {
  const double t0 = now_seconds();
  step();
  return now_seconds() - t0;
}

void report_stages(nlohmann::json& report, double read_seconds, const lg::RunInfo& info,
                   double write_seconds) {
  report["stages"] = {{"read", read_seconds},
                      {"encode", info.prepare_seconds},
                      {"compute", info.job.seconds},
                      {"write", write_seconds}};
}

// Refuses --threshold 0 on an input whose pairs cannot be held: every pair is then a neighbour
// (lg::Hit, 12 bytes, in a vector that may double while it grows; clustering adds 8 bytes of
// adjacency). Above 0 the number of pairs is not known before the run.
void require_all_pairs_memory(std::size_t molecules, float threshold, const char* command) {
  if (threshold > 0.0f) return;
  const double n = double(molecules);
  detail::require_memory(n * (n - 1) / 2 * 24.0,
                         fmt::format("lingo {} --threshold 0 of {} molecules ({:.3g} pairs, all neighbours)",
                                     command, molecules, n * (n - 1) / 2),
                         "raise --threshold (at 0 every pair is a neighbour)");
}

DeviceStartup::DeviceStartup(std::function<Resources()> make, const LingoInputOptions& o)
    : thread_([this, make = std::move(make), gpu_backend = o.backend != "cpu" && o.backend != "reference"] {
        Resources resources;
        try {
          resources = make();
          found_.set_value(resources);
        } catch (...) {
          found_.set_exception(std::current_exception());
          return;
        }
        if (gpu_backend)
          for (int gpu : resources.gpus()) molaccel::detail::gpu_free_memory(gpu);  // errors: the job's
      }) {}

}  // namespace molaccel::cli::lingo_cli

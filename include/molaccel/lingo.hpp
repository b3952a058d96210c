// LINGO chemical similarity (the SIML algorithm and its GPU successors): SMILES strings are cut
// into overlapping substrings of length q ("Lingos"); a molecule is the multiset of its Lingos and
// two molecules are compared by a multiset similarity. CUDA-free public API.
//
// Conventions (see docs/lingo.md):
//  * SMILES are used as given (no canonicalisation): the same molecule written two ways is two
//    different strings.
//  * Every similarity is computed in IEEE fp32 from exact integer counts with one expression shared
//    by all fast backends, so reference, cpu and cuda results are bit-identical.
//  * A molecule with no Lingos (SMILES shorter than q) has similarity 0 to everything, itself
//    included (the union is empty, and we report "no evidence" rather than 0/0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel {
// molaccel/distributed.hpp is C++20; this header is also read by the C++17 CUDA sources.
class Communicator;
}  // namespace molaccel

namespace molaccel::lingo {

// ---- preprocessing and Lingos -----------------------------------------------------------------
enum class DigitMode {
  paper,  // SIML/OpenEye: ring-closure digits -> '0'; digits after + - H [ kept; %nn -> %0
  all,    // CDK: every digit -> '0'
};
struct Preprocessing {
  DigitMode digits = DigitMode::paper;
  bool halogens = false;  // Cl -> L, Br -> R (Vidal's original LINGO)
};

enum class Metric {
  tanimoto,  // multiset Tanimoto: sum(min) / (|A| + |B| - sum(min)); the SIML metric
  vidal,     // CDK LingoSimilarity: mean over distinct Lingos of 1 - |a-b|/(a+b)
  set,       // Tanimoto on distinct Lingos
};

constexpr int kMinQ = 1;
constexpr int kMaxQ = 8;
constexpr std::size_t kMaxSmilesLength = std::size_t{1} << 20;  // keeps every count exact in fp32

struct LingoOptions {
  int q = 4;
  Preprocessing preprocessing;
};

// The preprocessed string whose Lingos are counted (input: one SMILES, no whitespace).
std::string preprocess(std::string_view smiles, const Preprocessing& preprocessing);

// Whether `smiles` can be a SMILES string: printable ASCII, brackets [] not nested and closed,
// parentheses balanced and not inside brackets. Returns an empty string when it can, else why not.
std::string smiles_problem(std::string_view smiles);

// Packs q characters big-endian (first character in the highest byte): sorting keys sorts the
// Lingos lexicographically. Fits 32 bits for q <= 4, 64 bits for q <= 8.
std::uint64_t pack_lingo(std::string_view lingo);
std::string unpack_lingo(std::uint64_t key, int q);

// A set of molecules as q-Lingo multisets, in compressed sparse rows: molecule i owns entries
// [offsets[i], offsets[i+1]) of keys and counts (keys sorted ascending, unique). Keys live in
// keys32 when q <= 4 and in keys64 when q > 4 (the other vector is empty).
struct MoleculeSet {
  int q = 4;
  Preprocessing preprocessing;
  std::vector<std::string> names;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> keys32;
  std::vector<std::uint64_t> keys64;
  std::vector<std::uint32_t> counts;
  std::vector<std::uint32_t> magnitudes;  // number of Lingos = max(0, length - q + 1)

  std::size_t size() const { return magnitudes.size(); }
  std::size_t distinct(std::size_t i) const { return offsets[i + 1] - offsets[i]; }
  bool wide_keys() const { return q > 4; }
  std::uint64_t key(std::size_t entry) const { return wide_keys() ? keys64[entry] : keys32[entry]; }
  std::size_t total_entries() const { return counts.size(); }
  // Appends one molecule from its preprocessed string.
  void add(std::string name, std::string_view preprocessed);
};

// The molecules `indices` of `set`, in that order (a subset, a permutation, repeats allowed).
MoleculeSet subset(const MoleculeSet& set, const std::vector<std::size_t>& indices);

// Builds a set from SMILES strings (names default to "1", "2", ...). Throws InputError naming
// `origin` and the 1-based index for an invalid SMILES.
MoleculeSet make_molecules(const std::vector<std::string>& smiles, const LingoOptions& options,
                           std::vector<std::string> names = {}, std::string_view origin = "<input>");

// ---- input ------------------------------------------------------------------------------------
struct ReadOptions {
  std::string smiles_column;  // CSV: column name or 1-based index; empty = .smi format
  char csv_delimiter = ',';
  bool skip_invalid = false;  // count and skip invalid lines instead of failing
  // parse_molecules of a slice of a .smi file (an MPI rank's part): the file's lines before it
  // (line numbers and default names count on from there); a slice may hold no molecules.
  bool slice = false;
  std::size_t lines_before = 0;
};
struct ReadStats {
  std::size_t lines = 0;
  std::size_t molecules = 0;
  std::size_t skipped_invalid = 0;
  std::size_t first_skipped_line = 0;  // 0 = none
};
// .smi / .smi.gz: "SMILES[whitespace name]" per line; blank lines ignored; names default to the
// line number. CSV (options.smiles_column set): a header line, then one record per line.
MoleculeSet read_molecules(const std::filesystem::path& path, const LingoOptions& lingo,
                           const ReadOptions& read = {}, ReadStats* stats = nullptr);
MoleculeSet parse_molecules(std::string_view name, std::string_view content, const LingoOptions& lingo,
                            const ReadOptions& read = {}, ReadStats* stats = nullptr);

// ---- similarity -------------------------------------------------------------------------------
using Backend = ComputeBackend;  // runtime: to_string, parse_compute_backend
std::string_view to_string(Metric metric);
Metric parse_metric(std::string_view text);  // throws InputError("--metric", ...)

struct ComputeOptions {
  Metric metric = Metric::tanimoto;
  Backend backend = Backend::automatic;
  std::size_t tile_rows = 0;     // queries per tile (0 = chosen by the backend)
  std::size_t tile_columns = 0;  // database molecules per tile (0 = chosen by the backend)
  JobOptions job;                // progress callback, cancellation, fault injection
};

// What ran, for logs, --json and benchmarks.
struct RunInfo {
  std::string backend;            // "reference", "cpu/avx2", "cuda:0"...
  std::size_t pairs = 0;          // similarities evaluated
  std::size_t pairs_skipped = 0;  // pairs excluded by the length bound
  double seconds = 0;             // whole call
  double prepare_seconds = 0;     // of which: encoding and index building (once per call)
  JobStats job;
  // Across MPI ranks (search): this rank's part of the merge (all-to-all, merging, gathering).
  double merge_seconds = 0;
  std::uint64_t merge_bytes_sent = 0, merge_bytes_received = 0;
};

// One pair, by the reference merge (the oracle; also handy for spot checks).
float similarity(const MoleculeSet& a, std::size_t i, const MoleculeSet& b, std::size_t j, Metric metric);

// Dense queries x database matrix in memory, row-major. db == nullptr: queries against themselves
// (one triangle computed, mirrored).
std::vector<float> similarity_matrix(const Resources& resources, const MoleculeSet& queries,
                                     const MoleculeSet* db, const ComputeOptions& options,
                                     RunInfo* info = nullptr);
// The same into `out` (queries x database floats, row-major). When `out` is page-locked memory
// (molaccel::allocate_host_buffer, cudaHostAlloc, or another framework's pinned memory) GPUs copy
// their results straight into it, overlapped with the computation: the fastest way to land a full
// matrix in host memory (no host-side copy; see docs/lingo.md).
void similarity_matrix(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
                       float* out, const ComputeOptions& options, RunInfo* info = nullptr);

enum class MatrixFormat { npy, tsv };
// Element type of a .npy matrix. fp32 is the exact (bit-identical) result; fp16 and u8 are
// quantised copies made from it: fp16 = the IEEE half nearest the fp32 value (ties to even),
// u8 = rint(255 * s) (ties to even), i.e. s within 1/510. The same on every backend.
enum class OutputType { fp32, fp16, u8 };
std::string_view to_string(OutputType type);
OutputType parse_output_type(std::string_view text);  // throws InputError("--output-type", ...)
std::size_t element_bytes(OutputType type);
// Streams the matrix to `path` (.npy row-major in `type`, or TSV query/target/similarity, fp32
// only), tile by tile, so it may exceed memory. Atomic: no file on failure.
void write_similarity_matrix(const Resources& resources, const MoleculeSet& queries, const MoleculeSet* db,
                             const std::filesystem::path& path, MatrixFormat format,
                             const ComputeOptions& options, RunInfo* info = nullptr,
                             OutputType type = OutputType::fp32);

// The pieces of that .npy: fp32 similarities as the bytes of `type`, and the header of a rows x
// cols matrix of `type` (the file is the header, then the rows).
std::vector<std::uint8_t> similarity_bytes(const std::vector<float>& values, OutputType type);
std::string npy_matrix_header(std::size_t rows, std::size_t cols, OutputType type);

struct Hit {
  std::uint32_t query = 0;
  std::uint32_t target = 0;
  float similarity = 0;
};
// Top-k database hits per query: sorted by similarity descending, ties by lower database index.
// Result: queries.size() rows of min(k, db.size()) hits, flattened (row r at [r*k', (r+1)*k')).
// `ready`, when given, is told as queries' hits become final, while the search runs (so that they
// can be written meanwhile): hits[0, count) are those of queries [first_query, first_query + count /
// min(k, db.size())), in the result that search returns (the same memory). Called from worker
// threads, in any order, once per query; an exception it throws stops the search.
using HitsReady = std::function<void(std::size_t first_query, const Hit* hits, std::size_t count)>;
std::vector<Hit> search(const Resources& resources, const MoleculeSet& queries, const MoleculeSet& db,
                        std::size_t k, const ComputeOptions& options, RunInfo* info = nullptr,
                        const HitsReady& ready = {});

// Every pair i < j of `db` with similarity >= threshold, sorted by (query, target); the
// hit's query is i and target j. The length bound min/max >= threshold skips pairs early.
std::vector<Hit> neighbors(const Resources& resources, const MoleculeSet& db, float threshold,
                           const ComputeOptions& options, RunInfo* info = nullptr);

// Taylor-Butina clustering on the threshold neighbour graph (sparse: no N^2 memory): molecules are
// visited by decreasing neighbour count (ties: lower index); each one not yet assigned becomes a
// centroid and takes its unassigned neighbours (the classic Butina / RDKit order).
struct Clustering {
  std::vector<std::uint32_t> cluster_of;  // per molecule, 0-based cluster id (by creation order)
  std::vector<std::uint32_t> centroids;   // per cluster, the centroid molecule
  std::size_t pairs = 0;                  // neighbour pairs used
};
Clustering cluster(const Resources& resources, const MoleculeSet& db, float threshold,
                   const ComputeOptions& options, RunInfo* info = nullptr);
// The Butina pass alone, over the pairs i < j of `molecules` molecules (as neighbors() returns).
Clustering butina_clusters(std::size_t molecules, const std::vector<Hit>& pairs);

// ---- across MPI ranks (docs/lingo.md, "Many nodes") -------------------------------------------
// search, neighbors and cluster with the work split over the ranks of `comm`; rank 0 gets exactly
// the single-process result, the other ranks an empty one. search: each rank a slice of the
// database balanced by Lingo count, per-query top-k lists sent by an all-to-all to the rank owning
// that block of queries, merged there and gathered by rank 0 (info->merge_*); neighbors: each rank a block of
// rows of the upper triangle balanced by pairs (dense blocks of size-sorted rows against the columns the size
// bound lets them reach); cluster: those pairs, Butina on rank 0. Every rank passes the same inputs. A rank
// that throws makes every rank throw RankFailure. `info`: this rank's part.
// A molecule file read across the ranks of `comm`, whole on every rank: a plain .smi file is cut
// into N byte ranges at line boundaries, a gzip one into N ranges of lines (each rank streams the
// decompressed file twice, holding only its lines), rank r parses its range (line numbers and
// default names counting on from the lines of the ranges before it) and the encoded parts are
// all-gathered, so each rank parses 1/N of the file. CSV and standard input are read whole by every
// rank. The molecules, names, errors and `stats` are read_molecules'. A collective; a rank that
// fails makes every rank throw RankFailure.
MoleculeSet read_molecules_across_ranks(Communicator& comm, const std::filesystem::path& path,
                                        const LingoOptions& lingo, const ReadOptions& read = {},
                                        ReadStats* stats = nullptr);
// The same reading, each rank keeping only its own range: molecules [first, first + set.size())
// of the file's `total`, the ranges in rank order (CSV and standard input: read whole, then a
// range balanced by Lingo count kept).
struct MoleculeSlice {
  MoleculeSet set;
  std::size_t first = 0, total = 0;
};
MoleculeSlice read_molecule_slice_across_ranks(Communicator& comm, const std::filesystem::path& path,
                                               const LingoOptions& lingo, const ReadOptions& read = {},
                                               ReadStats* stats = nullptr);
// search_across_ranks without the final gather: every rank returns its block of queries
// [first_query, first_query + queries) (blocks in rank order) with their merged hits, min(k,
// database size) per query; the blocks in rank order are the whole result. Hit indices are global.
struct HitBlock {
  std::size_t first_query = 0, queries = 0;
  std::vector<Hit> hits;
  // search_slices_across_ranks(target_names = true): the names of the hits' targets.
  std::vector<std::string> target_names;
  std::vector<std::uint32_t> target_name_of;  // per hit, into target_names
  const std::string& target_name(std::size_t hit) const { return target_names[target_name_of[hit]]; }
};
// search with no rank holding either input whole: each rank holds its slice of the queries and of
// the database (read_molecule_slice_across_ranks); the database slices travel a ring of the ranks,
// each rank searching its queries against every slice and merging the hits as they come, so after
// N steps every rank has its queries' top-k against the whole database.
// Returns this rank's own block of queries; target_names: with the names of its hits' targets,
// fetched from the ranks holding them. `info`: this rank's part (merge_*: the ring and the names).
HitBlock search_block_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& queries,
                                   const MoleculeSet& db, std::size_t k, const ComputeOptions& options,
                                   RunInfo* info = nullptr);
HitBlock search_slices_across_ranks(Communicator& comm, const Resources& resources,
                                    const MoleculeSlice& queries, const MoleculeSlice& db, std::size_t k,
                                    const ComputeOptions& options, bool target_names,
                                    RunInfo* info = nullptr);
std::vector<Hit> search_across_ranks(Communicator& comm, const Resources& resources,
                                     const MoleculeSet& queries, const MoleculeSet& db, std::size_t k,
                                     const ComputeOptions& options, RunInfo* info = nullptr);
std::vector<Hit> neighbors_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& db,
                                        float threshold, const ComputeOptions& options,
                                        RunInfo* info = nullptr);
Clustering cluster_across_ranks(Communicator& comm, const Resources& resources, const MoleculeSet& db,
                                float threshold, const ComputeOptions& options, RunInfo* info = nullptr);
// neighbors with each rank holding only its slice of the molecules: the slices travel a ring for
// N / 2 steps, the block of pairs between two slices computed by one of their two ranks (balanced),
// each pair sent to the rank whose slice holds its query (the lower index). Returns this rank's
// pairs, sorted (the blocks in rank order are the single-process result); target_names: with their
// targets' names.
HitBlock neighbors_slices_across_ranks(Communicator& comm, const Resources& resources,
                                       const MoleculeSlice& db, float threshold,
                                       const ComputeOptions& options, bool target_names,
                                       RunInfo* info = nullptr);
// cluster from those pairs (gathered on rank 0 for the Butina pass); every rank gets its molecules'
// clusters.
struct ClusterSlice {
  std::vector<std::uint32_t> cluster_of;  // of this rank's molecules, as Clustering's
  std::vector<std::uint8_t> is_centroid;  // of this rank's molecules
  std::size_t clusters = 0, pairs = 0;    // of the whole set
};
ClusterSlice cluster_slices_across_ranks(Communicator& comm, const Resources& resources,
                                         const MoleculeSlice& db, float threshold,
                                         const ComputeOptions& options, RunInfo* info = nullptr);
// write_similarity_matrix's .npy, each rank computing the rows of its slice of the queries (held in
// memory: rows x database floats, then as `type`) against the database slices, which travel a ring
// of the ranks (N - 1 steps; no rank holds the database whole); rank 0 receives the row blocks in
// rank order and writes the file atomically. db == nullptr: the queries against themselves.
void write_similarity_matrix_across_ranks(Communicator& comm, const Resources& resources,
                                          const MoleculeSlice& queries, const MoleculeSlice* db,
                                          const std::filesystem::path& path, const ComputeOptions& options,
                                          RunInfo* info = nullptr, OutputType type = OutputType::fp32);

}  // namespace molaccel::lingo

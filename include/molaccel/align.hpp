// molaccel align: Smith-Waterman (Gotoh, affine gaps) protein database search.
//
// Conventions
// - Local alignment with affine gaps: a gap of length k costs gap_open + (k-1) * gap_extend, so
//   the defaults (BLOSUM62, 11, 1) equal BLAST's -gapopen 10 -gapextend 1, parasail's and SSW's
//   -o 11 -e 1, and CUDASW++'s --gop -11 --gex -1.
// - Alphabet: the 20 amino acids plus B, Z, X, U, O and '*'; lower case equals upper case. Built-in
//   matrices score U and O like X (NCBI's tables have no U/O rows); a --matrix file may define them.
// - Hits are ordered by score (descending), then by position in the database FASTA (ascending), so
//   results are deterministic and shards of a database merge into exactly the same top hits.
// This header is CUDA-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel {
// molaccel/distributed.hpp is C++20; this header is also read by the C++17 CUDA sources.
class Communicator;
}  // namespace molaccel

namespace molaccel::align {

// ---------------------------------------------------------------------------------------------
// Alphabet and scoring.
// ---------------------------------------------------------------------------------------------
// Residue codes 0..25 in this order (NCBI's matrix order, then U and O); kPaddingCode pads
// kernel inputs and never occurs in a sequence.
inline constexpr std::string_view kAlphabet = "ARNDCQEGHILKMFPSTWYVBZX*UO";
inline constexpr int kAlphabetSize = 26;
inline constexpr int kMatrixStride = 32;  // rows/columns of ScoringMatrix::scores
inline constexpr std::uint8_t kPaddingCode = 31;

// Code of a residue letter (either case), or -1 when it is not in the alphabet.
int encode_residue(char letter) noexcept;
char decode_residue(std::uint8_t code) noexcept;

struct ScoringMatrix {
  std::string name;  // "BLOSUM62", or the file name for --matrix FILE
  // scores[a * kMatrixStride + b]: score of query residue a against subject residue b.
  std::array<int, kMatrixStride * kMatrixStride> scores{};
  bool builtin = false;
  int at(int a, int b) const noexcept { return scores[a * kMatrixStride + b]; }
  int max_score() const noexcept;  // over the alphabet
  int min_score() const noexcept;
};

std::vector<std::string> builtin_matrix_names();  // BLOSUM45 ... PAM250
// A built-in matrix by name (case-insensitive); throws InputError("--matrix", 0, ...) if unknown.
ScoringMatrix builtin_matrix(std::string_view name);
// A matrix in NCBI's text format: '#' comments, a header row of letters, one row per letter.
// Letters missing from the file score as the file's X row/column (or its minimum without X).
ScoringMatrix parse_matrix(std::string_view source_name, std::string_view text);
ScoringMatrix read_matrix(const std::filesystem::path& path);
// A built-in name, else a file path.
ScoringMatrix matrix_by_name_or_file(const std::string& name_or_path);

struct Scoring {
  ScoringMatrix matrix = builtin_matrix("BLOSUM62");
  int gap_open = 11;      // cost of a gap of length 1
  int gap_extend = 1;     // cost of each further gap position
  void validate() const;  // throws InputError("--gap-open"/"--gap-extend", 0, ...)
};

// Karlin-Altschul parameters of gapped local alignment (NCBI BLAST's published tables).
struct KarlinAltschul {
  double lambda = 0, K = 0, H = 0, alpha = 0, beta = 0;
};
// Parameters for a built-in matrix and gap costs (our convention), or nullopt when none are
// published for that combination.
std::optional<KarlinAltschul> published_gapped_parameters(std::string_view matrix_name, int gap_open,
                                                          int gap_extend);
double bit_score(const KarlinAltschul& ka, int raw_score);
// E-value for a query of length m against a database of n residues in `sequences` sequences,
// with BLAST's length adjustment of the search space.
double e_value(const KarlinAltschul& ka, int raw_score, std::uint64_t m, std::uint64_t n,
               std::uint64_t sequences);

// ---------------------------------------------------------------------------------------------
// Sequences and databases.
// ---------------------------------------------------------------------------------------------
// Encoded sequences in input order; ids are the first word after '>'.
struct SequenceSet {
  std::vector<std::string> ids;
  std::vector<std::uint64_t> offsets{0};  // sequence i is residues[offsets[i], offsets[i+1])
  std::vector<std::uint8_t> residues;
  std::size_t size() const noexcept { return ids.size(); }
  std::span<const std::uint8_t> sequence(std::size_t i) const {
    return {residues.data() + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i])};
  }
  void add(std::string id, std::span<const std::uint8_t> codes);
};

// FASTA (plain or gzip): an error names the file, the line, the record and the position of a bad
// letter. Empty sequences are an error (they cannot align).
SequenceSet read_fasta(const std::filesystem::path& path);
SequenceSet parse_fasta(std::string_view source_name, std::string_view text);
SequenceSet encode_sequences(const std::vector<std::pair<std::string, std::string>>& id_and_letters);

// A searchable database: sequences sorted by length (ties by input order), each remembering its
// position in the input FASTA. Backed by memory (from FASTA) or a memory-mapped DBDIR. A shard is
// a copy of parts of the sorted order (16 blocks of the subjects up to 2,048 residues, the longer
// ones dealt one by one: balanced residues and length mix, still sorted) that keeps the whole
// database's statistics, so MPI ranks can each search one shard and merge_top_hits() gives the
// single-process result.
class Database {
 public:
  Database() = default;
  static Database from_sequences(const SequenceSet& sequences);
  static Database from_fasta(const std::filesystem::path& path);
  static Database open(const std::filesystem::path& dbdir);           // a directory made by write()
  static Database load(const std::filesystem::path& fasta_or_dbdir);  // either of the above
  // Shard `rank` of `ranks` of a DBDIR, reading only that shard's part of each file (directories
  // made before ids.index.bin existed: ids.txt is scanned whole). Equal to open(dbdir).shard(...).
  static Database open_shard(const std::filesystem::path& dbdir, int rank, int ranks);
  // Writes an encoded, length-sorted database directory, built under a temporary name next to it
  // and swapped in whole (an existing database is replaced only when the new one is complete).
  void write(const std::filesystem::path& dbdir) const;

  std::size_t size() const noexcept { return end_ - begin_; }  // sequences in this view
  std::span<const std::uint8_t> sequence(std::size_t sorted_index) const;
  std::uint32_t length(std::size_t sorted_index) const;
  std::uint32_t original_index(std::size_t sorted_index) const;  // position in the input FASTA
  const std::string& id_of_original(std::uint32_t original) const;
  std::uint64_t residues() const noexcept;  // in this view
  std::uint32_t max_length() const noexcept;
  // Of the whole database (shards included), for E-values.
  std::uint64_t total_residues() const noexcept;
  std::uint64_t total_sequences() const noexcept;
  // View of sorted range [begin, end) of this view.
  Database slice(std::size_t begin, std::size_t end) const;
  // Shard `rank` of `ranks`: blocks of the sorted order with equal residues, dealt to the ranks in
  // serpentine order (src/align/io/database_shard.cpp), so each rank gets the same mix of lengths.
  Database shard(int rank, int ranks) const;
  // Raw arrays for kernels (sorted order, this view): residues are addressed by offsets().
  const std::uint8_t* residue_data() const noexcept;
  const std::uint64_t* offsets() const noexcept;  // size()+1 entries, absolute into residue_data()

  struct Storage;

 private:
  std::shared_ptr<const Storage> storage_;
  std::size_t begin_ = 0, end_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Scoring and search.
// ---------------------------------------------------------------------------------------------
using Backend = ComputeBackend;  // runtime: to_string, parse_compute_backend

// Textbook Gotoh in 32-bit integers: the test oracle.
int reference_score(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                    const Scoring& scoring);

struct ScoreStats {
  std::string kernel;                 // which code ran, e.g. "cpu/inter16/avx2", "cuda/inter16x2+intra32"
  std::uint64_t cells = 0;            // query length x subject residues
  std::uint64_t rescored = 0;         // pairs rescored exactly after 16-bit saturation
  double seconds = 0;                 // wall time, database upload and layout included
  double device_seconds = 0;          // GPU: time from kernel launch to results on the host, summed
                                      // over tiles (without upload/layout); 0 on the CPU
  double slowest_device_seconds = 0;  // GPU: the largest of those per tile (one tile per GPU:
                                      // the compute span of the slowest device)
};

// Scores of one query against every sequence of the database view, indexed by sorted position.
// `backend` automatic = GPU when `resources` has GPUs, else CPU.
std::vector<int> score_database(const Resources& resources, std::span<const std::uint8_t> query,
                                const Database& database, const Scoring& scoring,
                                Backend backend = Backend::automatic, ScoreStats* stats = nullptr);
// Many queries at once (the database is moved to each device once): result[q][sorted index].
std::vector<std::vector<int>> score_database_batch(const Resources& resources, const SequenceSet& queries,
                                                   const Database& database, const Scoring& scoring,
                                                   Backend backend = Backend::automatic,
                                                   ScoreStats* stats = nullptr);

struct Alignment {
  int score = 0;
  // 1-based inclusive coordinates; 0 when the score is 0 (no aligned residue).
  std::uint32_t query_start = 0, query_end = 0, subject_start = 0, subject_end = 0;
  std::uint32_t identities = 0;  // aligned pairs with the same residue
  std::uint32_t length = 0;      // alignment columns, gaps included
  std::string cigar;             // M/I/D run lengths (I = gap in subject, D = gap in query)
};
// Optimal local alignment with traceback. Among equal-score alignments it ends at the first
// maximal cell in row-major order (query row, then subject column) and prefers diagonal, then
// gap-in-query, then gap-in-subject moves while tracing back. Memory: bytes = aligned region size.
Alignment align_pair(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                     const Scoring& scoring);

struct Hit {
  std::uint32_t query = 0;    // index in the query set
  std::uint32_t subject = 0;  // position in the database FASTA
  int score = 0;
  double bitscore = 0, evalue = 0;  // NaN with --no-evalue
  Alignment alignment;              // filled when traceback is on
};
// Ordering of hits: score descending, then database position ascending.
bool hit_before(const Hit& a, const Hit& b) noexcept;

struct SearchOptions {
  Scoring scoring;
  int top_k = 10;
  bool traceback = true;
  bool evalues = true;  // false = --no-evalue
  Backend backend = Backend::automatic;
};

struct SearchResult {
  std::vector<std::vector<Hit>> hits;  // per query, best first
  ScoreStats stats;
  std::optional<KarlinAltschul> statistics;
};

// Every query against every database sequence; best top_k hits per query. Throws InputError when
// E-values are asked for and no published parameters exist for the scoring.
SearchResult search(const Resources& resources, const SequenceSet& queries, const Database& database,
                    const SearchOptions& options);
// Readies the GPUs of `resources` for search() ahead of it (each GPU's context, the kernels loaded
// into it, the pipeline's streams), for a caller that overlaps this with reading its inputs;
// search() does it itself otherwise. Nothing without GPUs.
void prepare_devices(const Resources& resources);
// Merges per-shard hit lists of the same queries (each best-first) into the top_k overall.
std::vector<std::vector<Hit>> merge_top_hits(const std::vector<std::vector<std::vector<Hit>>>& shards,
                                             int top_k);

// TSV with header: query subject score bitscore evalue qstart qend sstart send identity alnlen
// (identity in percent of alignment columns, as BLAST's pident). Written atomically.
void write_hits_tsv(const std::filesystem::path& path, const SequenceSet& queries, const Database& database,
                    const SearchResult& result);

// ---------------------------------------------------------------------------------------------
// Across MPI ranks (see docs/align.md, "Many nodes").
// ---------------------------------------------------------------------------------------------
// What the merge cost on this rank.
struct MergeStats {
  double seconds = 0;            // in the merge's collectives and bookkeeping (traceback excluded)
  std::uint64_t bytes_sent = 0;  // by this rank: its own records, rows and ids (the tree merge
                                 // also forwards what the rank received from its partners)
  std::uint64_t bytes_received = 0;
  double traceback_seconds = 0;  // this rank's traceback of its merged winners
};
struct DistributedSearchResult {
  SearchResult result;  // rank 0: the merged hits, exactly as search() over the whole database
  std::vector<std::vector<std::string>> subject_ids;  // rank 0: id of each hit (result.hits' shape)
  MergeStats merge;
  std::vector<double> scoring_seconds_by_rank;  // rank 0: each rank's search of its shard
};
// Every rank of `comm` searches its shard (each a Database::shard/open_shard of the same database,
// rank r holding shard r), without traceback; per-query top-k records are merged in hit_before's
// order pairwise up a binary tree to rank 0 (reduce_to_root); each winner is traced back on the
// rank that owns its subject and rank 0 receives the finished rows. A rank that throws makes every
// rank throw RankFailure.
DistributedSearchResult search_across_ranks(Communicator& comm, const Resources& resources,
                                            const SequenceSet& queries, const Database& shard,
                                            const SearchOptions& options);
// Rank 0's merged result as the same TSV as write_hits_tsv.
void write_hits_tsv(const std::filesystem::path& path, const SequenceSet& queries,
                    const DistributedSearchResult& merged);

}  // namespace molaccel::align

// Traceback: the row-block (checkpointed) path, the known-score end search and the three striped
// passes (SSE2 and AVX2 variants, 16-bit and 32-bit lanes) give exactly the alignment of the whole-region
// scalar traceback (the implementation before them, kept here as the oracle), on random pairs with fixed
// seeds and planted cases; passes 1 and 2 alone find the oracle's end and start cells, with scores
// near 2^15 and anchored values far below -2^15 among them; pass 3 alone gives the oracle's trace
// on small regions of every width and on tie-heavy scorings; and pairs traced in blocks far smaller
// than their region are optimal (CIGAR rescored independently = the reference score).
#include <limits>
#include <optional>

#include "align/align_test_util.hpp"
#include "align/traceback.hpp"
#include "testing/testing.hpp"

namespace molaccel::align {
namespace {

using testing::codes;
using testing::mutate;
using testing::random_protein;
using testing::score_of_alignment;

constexpr int kNegativeInfinity = std::numeric_limits<int>::min() / 4;
enum : std::uint8_t {
  kFromStart = 0,
  kFromDiagonal = 1,
  kFromE = 2,
  kFromF = 3,
  kEExtends = 4,
  kFExtends = 8
};

// Pass 3 of the oracle: the whole region's direction bytes at once (scalar Gotoh), traced back
// from its corner.
detail::RegionTrace whole_region_trace(std::span<const std::uint8_t> query,
                                       std::span<const std::uint8_t> subject, const Scoring& scoring) {
  const int open = scoring.gap_open, extend = scoring.gap_extend;
  const std::size_t rm = query.size(), rn = subject.size();
  detail::RegionTrace trace;
  if (rm == 0 || rn == 0) return trace;
  std::vector<std::uint8_t> direction(rm * rn);
  {
    std::vector<int> h(rn + 1, 0), e(rn + 1, kNegativeInfinity);
    for (std::size_t i = 1; i <= rm; ++i) {
      int diagonal = 0, f = kNegativeInfinity, h_left = 0;
      const auto q = query[i - 1];
      std::uint8_t* row = direction.data() + (i - 1) * rn;
      for (std::size_t j = 1; j <= rn; ++j) {
        std::uint8_t d = 0;
        const int e_open = h[j] - open, e_extend = e[j] - extend;
        // Here "e" is the vertical gap (consumes query) and "f" the horizontal one (consumes
        // subject); the direction byte names them as F and E of the public convention.
        if (e_extend >= e_open) d |= kFExtends;
        e[j] = std::max(e_open, e_extend);
        const int f_open = h_left - open, f_extend = f - extend;
        if (f_extend >= f_open) d |= kEExtends;
        f = std::max(f_open, f_extend);
        const int match = diagonal + scoring.matrix.at(q, subject[j - 1]);
        int value = 0;
        std::uint8_t source = kFromStart;
        if (match > value) value = match, source = kFromDiagonal;
        if (f > value) value = f, source = kFromE;
        if (e[j] > value) value = e[j], source = kFromF;
        row[j - 1] = d | source;
        diagonal = h[j];
        h[j] = value;
        h_left = value;
      }
    }
  }
  enum class State { h, e, f } state = State::h;
  std::size_t i = rm, j = rn;
  std::string& ops = trace.ops;  // reversed
  while (i > 0 && j > 0) {
    const std::uint8_t d = direction[(i - 1) * rn + (j - 1)];
    if (state == State::h) {
      const int source = d & 3;
      if (source == kFromStart) break;
      if (source == kFromDiagonal) {
        if (query[i - 1] == subject[j - 1]) ++trace.identities;
        ops.push_back('M');
        --i, --j;
      } else {
        state = source == kFromE ? State::e : State::f;
      }
    } else if (state == State::e) {  // gap in the query: consumes subject
      ops.push_back('D');
      if (!(d & kEExtends)) state = State::h;
      --j;
    } else {  // gap in the subject: consumes query
      ops.push_back('I');
      if (!(d & kFExtends)) state = State::h;
      --i;
    }
  }
  std::reverse(ops.begin(), ops.end());
  trace.query_offset = i;
  trace.subject_offset = j;
  return trace;
}

// Pass 1 of the oracle: best score and first end cell (1-based), scalar Smith-Waterman.
detail::EndCell oracle_end(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                           const Scoring& scoring) {
  const int open = scoring.gap_open, extend = scoring.gap_extend;
  const std::size_t m = query.size(), n = subject.size();
  detail::EndCell end;
  std::vector<int> h(n + 1, 0), e(n + 1, kNegativeInfinity);
  for (std::size_t i = 1; i <= m; ++i) {
    int diagonal = 0, f = kNegativeInfinity, h_left = 0;
    for (std::size_t j = 1; j <= n; ++j) {
      e[j] = std::max(e[j] - extend, h[j] - open);  // vertical gap (from row above)
      f = std::max(f - extend, h_left - open);      // horizontal gap (from the left)
      int value = std::max({0, diagonal + scoring.matrix.at(query[i - 1], subject[j - 1]), e[j], f});
      diagonal = h[j];
      h[j] = value;
      h_left = value;
      if (value > end.score) end = {value, i, j};
    }
  }
  return end;
}

// Pass 2 of the oracle: anchored at the end cell, walk backward over reversed prefixes (no floor:
// anchored values fall as low as the gaps take them); the alignment must begin (in reverse) with
// the pair (end_i, end_j). The nearest cell reaching `best` is the start.
detail::StartCell oracle_start(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                               const Scoring& scoring, const detail::EndCell& end) {
  const int open = scoring.gap_open, extend = scoring.gap_extend;
  const std::size_t rm = end.query_end, rn = end.subject_end;
  std::vector<int> h(rn + 1, kNegativeInfinity), e(rn + 1, kNegativeInfinity);
  h[0] = 0;  // the anchor
  for (std::size_t a = 1; a <= rm; ++a) {
    int diagonal = h[0], f = kNegativeInfinity, h_left = kNegativeInfinity;
    h[0] = kNegativeInfinity;
    for (std::size_t b = 1; b <= rn; ++b) {
      e[b] = std::max(e[b] - extend, h[b] - open);
      f = std::max(f - extend, h_left - open);
      const int match = diagonal == kNegativeInfinity
                            ? kNegativeInfinity
                            : diagonal + scoring.matrix.at(query[rm - a], subject[rn - b]);
      const int value = std::max({match, e[b], f});
      diagonal = h[b];
      h[b] = value;
      h_left = value;
      if (match == end.score) return {rm - a + 1, rn - b + 1};
    }
  }
  throw Error("oracle: no start cell reaches the best score");
}

// The whole-region traceback: one direction byte per cell of the aligned region at once.
Alignment whole_region_traceback(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                                 const Scoring& scoring) {
  Alignment result;
  if (query.empty() || subject.empty()) return result;
  const detail::EndCell end = oracle_end(query, subject, scoring);
  result.score = end.score;
  if (end.score == 0) return result;
  const detail::StartCell start = oracle_start(query, subject, scoring, end);
  const std::size_t start_i = start.query_start, start_j = start.subject_start;
  const std::size_t end_i = end.query_end, end_j = end.subject_end;

  // Pass 3: region [start_i, end_i] x [start_j, end_j] with direction bytes.
  const std::size_t rm = end_i - start_i + 1, rn = end_j - start_j + 1;
  if (static_cast<double>(rm) * static_cast<double>(rn) > 8.0e9)
    throw Error(fmt::format("traceback region {} x {} is too large", rm, rn));
  const detail::RegionTrace trace = whole_region_trace(std::span(query).subspan(start_i - 1, rm),
                                                       std::span(subject).subspan(start_j - 1, rn), scoring);
  const std::string& ops = trace.ops;
  result.query_start = static_cast<std::uint32_t>(start_i + trace.query_offset);
  result.subject_start = static_cast<std::uint32_t>(start_j + trace.subject_offset);
  result.query_end = static_cast<std::uint32_t>(end_i);
  result.subject_end = static_cast<std::uint32_t>(end_j);
  result.identities = trace.identities;
  result.length = static_cast<std::uint32_t>(ops.size());
  for (std::size_t k = 0; k < ops.size();) {
    std::size_t run = 1;
    while (k + run < ops.size() && ops[k + run] == ops[k]) ++run;
    result.cigar += fmt::format("{}{}", run, ops[k]);
    k += run;
  }
  return result;
}

void expect_same(const Alignment& a, const Alignment& b, const std::string& what) {
  EXPECT_EQ(a.score, b.score) << what;
  EXPECT_EQ(a.cigar, b.cigar) << what;
  EXPECT_EQ(a.query_start, b.query_start) << what;
  EXPECT_EQ(a.query_end, b.query_end) << what;
  EXPECT_EQ(a.subject_start, b.subject_start) << what;
  EXPECT_EQ(a.subject_end, b.subject_end) << what;
  EXPECT_EQ(a.identities, b.identities) << what;
  EXPECT_EQ(a.length, b.length) << what;
}

// Every variant of the striped passes this machine runs (SSE2 always, AVX2 where it has it), each
// in 16-bit lanes where the values fit and in 32-bit lanes only, with blocks of `bytes`.
std::vector<detail::TracebackLimits> lane_variants(std::size_t bytes = std::size_t{1} << 30) {
  std::vector<detail::TracebackLimits> variants;
  for (const SimdLevel simd : {SimdLevel::scalar, SimdLevel::avx2})
    if (simd <= cpu_info().simd)
      for (const bool narrow : {true, false})
        variants.push_back({.direction_bytes = bytes, .narrow_lanes = narrow, .simd = simd});
  return variants;
}
std::string describe(const detail::TracebackLimits& limits) {
  return fmt::format("{}, {}-bit lanes, blocks of {} bytes", detail::striped_variant(limits),
                     limits.narrow_lanes ? 16 : 32, limits.direction_bytes);
}

// Passes 1 and 2 on their own against the oracle's, in every variant: the end cell without the
// score, with it, and with one above the pair's (ignored); the start cell from the end.
void check_passes(std::span<const std::uint8_t> q, std::span<const std::uint8_t> s, const Scoring& scoring,
                  const std::string& what) {
  const detail::EndCell end = oracle_end(q, s, scoring);
  const std::optional<detail::StartCell> start =
      end.score > 0 ? std::optional(oracle_start(q, s, scoring, end)) : std::nullopt;
  for (const detail::TracebackLimits& limits : lane_variants()) {
    for (const std::optional<int> known :
         {std::optional<int>(), std::optional(end.score), std::optional(end.score + 1)}) {
      const std::string how = fmt::format("{}, {}, known score {}", what, describe(limits),
                                          known ? std::to_string(*known) : "none");
      const detail::EndCell got = detail::find_end(q, s, scoring, known, limits);
      EXPECT_EQ(got.score, end.score) << how;
      EXPECT_EQ(got.query_end, end.query_end) << how;
      EXPECT_EQ(got.subject_end, end.subject_end) << how;
    }
    if (!start) continue;
    const detail::StartCell got = detail::find_start(q, s, scoring, end, limits);
    EXPECT_EQ(got.query_start, start->query_start) << what << ", " << describe(limits);
    EXPECT_EQ(got.subject_start, start->subject_start) << what << ", " << describe(limits);
  }
}

// Every way of tracing `q` x `s` against the oracle: passes 1 and 2 alone, the public call, the
// known score, row blocks of one row, a few rows, a few hundred bytes and the whole region, each
// in every variant.
void check_pair(const std::vector<std::uint8_t>& q, const std::vector<std::uint8_t>& s,
                const Scoring& scoring, const std::string& what) {
  check_passes(q, s, scoring, what);
  const Alignment expected = whole_region_traceback(q, s, scoring);
  expect_same(align_pair(q, s, scoring), expected, what + " public");
  for (std::size_t bytes :
       {std::size_t{1}, std::size_t{64}, 3 * s.size(), std::size_t{300}, std::size_t{1} << 30})
    for (const detail::TracebackLimits& limits : lane_variants(bytes)) {
      const std::string how = fmt::format("{}, {}", what, describe(limits));
      expect_same(detail::align_pair(q, s, scoring, std::nullopt, limits), expected, how);
      expect_same(detail::align_pair(q, s, scoring, expected.score, limits), expected, how + ", known score");
    }
}

// Scores `match` on the diagonal and `mismatch` elsewhere, gaps open / extend: ties between the
// diagonal and the gaps, and between opening and extending (open = extend), in most cells.
Scoring tie_scoring(int match, int mismatch, int open, int extend) {
  Scoring scoring;
  scoring.matrix.name = fmt::format("ties{}/{}", match, mismatch);
  for (int a = 0; a < kMatrixStride; ++a)
    for (int b = 0; b < kMatrixStride; ++b)
      scoring.matrix.scores[a * kMatrixStride + b] = a == b ? match : mismatch;
  scoring.gap_open = open;
  scoring.gap_extend = extend;
  return scoring;
}

TEST(AlignTracebackBlocks, SameAlignmentsAsWholeRegion) {
  std::mt19937 rng(2026);
  for (int round = 0; round < 120; ++round) {
    Scoring scoring;
    scoring.matrix = builtin_matrix(builtin_matrix_names()[round % 8]);
    if (round % 3 == 1) scoring.gap_open = 10, scoring.gap_extend = 2;
    if (round % 3 == 2) scoring.gap_open = 4, scoring.gap_extend = 4;
    const auto base = random_protein(rng, 1 + rng() % 300);
    // Related pairs (long gapped alignments), unrelated ones, and a four-letter alphabet (ties).
    const std::string other = round % 3 == 0   ? mutate(rng, base, 0.3)
                              : round % 3 == 1 ? random_protein(rng, 1 + rng() % 300)
                                               : random_protein(rng, 1 + rng() % 300, "AGWC");
    check_pair(codes(round % 3 == 2 ? random_protein(rng, base.size(), "AGWC") : base), codes(other), scoring,
               fmt::format("round {}", round));
  }
}

TEST(AlignTracebackBlocks, PlantedCases) {
  const Scoring scoring;
  std::mt19937 rng(9);
  const std::string a = random_protein(rng, 80, "ACDEFGHIKLMNPQRSTVWY");
  const std::string b = random_protein(rng, 70, "ACDEFGHIKLMNPQRSTVWY");
  const std::string insert = random_protein(rng, 60, "ACDEFGHIKLMNPQRSTVWY");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"W", "W"},                                   // one residue each
      {"W", "A"},                                   // score 0: no alignment
      {"W", "AAAAWAAAA"},                           // a single residue inside a longer one
      {"AAAAWAAAA", "W"},                           // ... and the other way round
      {"AAAAAAAAAAAA", "AAAAAAAAAAAA"},             // ties everywhere
      {"WAWAWAWAWAWA", "AWAWAWAWAWAW"},             // shifted repeats
      {a + b, a + insert + b},                      // a full-length gap in the query
      {a + insert + b, a + b},                      // ... and in the subject
      {a + "W" + b, a + b},                         // a one-residue gap
      {std::string(50, 'W'), std::string(49, 'W')}  // equal-score end cells
  };
  for (const auto& [q, s] : cases)
    check_pair(codes(q), codes(s), scoring, q.substr(0, 20) + "/" + s.substr(0, 20));
}

// One-residue queries and subjects against long ones, on both sides and at both ends.
TEST(AlignTracebackBlocks, OneResidueAgainstLong) {
  std::mt19937 rng(12);
  const Scoring scoring;
  for (int round = 0; round < 12; ++round) {
    const std::string one(1, "WACG"[round % 4]), other = random_protein(rng, 1 + rng() % 90, "ACGWY");
    check_pair(codes(one), codes(other), scoring, fmt::format("{} / {}", one, other));
    check_pair(codes(other), codes(one), scoring, fmt::format("{} / {}", other, one));
  }
}

// Scorings full of ties (diagonal against gaps, gap opening against extending), related and
// unrelated pairs of lengths that are rarely multiples of 4 or 8.
TEST(AlignTracebackBlocks, TieHeavyScorings) {
  std::mt19937 rng(31);
  const Scoring scorings[] = {tie_scoring(1, -1, 1, 1), tie_scoring(2, -1, 3, 1), tie_scoring(3, -3, 3, 3),
                              tie_scoring(1, 0, 2, 1), tie_scoring(5, -4, 5, 5)};
  for (int round = 0; round < 60; ++round) {
    const Scoring& scoring = scorings[round % 5];
    const auto base = random_protein(rng, 1 + rng() % 150, round % 2 ? "AG" : "AGWC");
    const std::string other = round % 3 == 2 ? random_protein(rng, 1 + rng() % 150, "AGWC")
                                             : mutate(rng, base, 0.2 + 0.1 * (round % 3));
    check_pair(codes(base), codes(other), scoring, fmt::format("round {} ({})", round, scoring.matrix.name));
  }
}

void expect_same_trace(const detail::RegionTrace& a, const detail::RegionTrace& b, const std::string& what) {
  EXPECT_EQ(a.ops, b.ops) << what;
  EXPECT_EQ(a.query_offset, b.query_offset) << what;
  EXPECT_EQ(a.subject_offset, b.subject_offset) << what;
  EXPECT_EQ(a.identities, b.identities) << what;
}

// Pass 3 alone: regions of widths 1..17 (fewer columns than lanes, and a few stripes) and heights
// 1..12, traced like the oracle in every variant, whole and one or two rows per block.
TEST(AlignTracebackRegion, EveryNarrowWidthMatchesTheScalarTrace) {
  std::mt19937 rng(77);
  const Scoring scorings[] = {Scoring{}, tie_scoring(1, -1, 1, 1), tie_scoring(2, -1, 3, 1),
                              tie_scoring(3, -3, 3, 3), tie_scoring(1, 0, 2, 1)};
  for (const Scoring& scoring : scorings)
    for (std::size_t width = 1; width <= 17; ++width)
      for (std::size_t height = 1; height <= 12; ++height)
        for (int k = 0; k < 3; ++k) {
          // The same last letter: the corner's diagonal term is positive, so the trace leaves it.
          std::string q = random_protein(rng, height, "AGWC"), s = random_protein(rng, width, "AGWC");
          q.back() = s.back() = 'W';
          const auto qc = codes(q), sc = codes(s);
          const int bound = static_cast<int>(std::min(height, width)) * scoring.matrix.max_score();
          const auto expected = whole_region_trace(qc, sc, scoring);
          for (const std::size_t bytes : {std::size_t{1}, std::size_t{16}, std::size_t{1} << 30})
            for (const detail::TracebackLimits& limits : lane_variants(bytes))
              expect_same_trace(detail::trace_region(qc, sc, scoring, bound, limits), expected,
                                fmt::format("{} / {} ({}), {}", q, s, scoring.matrix.name, describe(limits)));
        }
}

// Scores at the edge of 16-bit lanes (BLOSUM62: H up to 32,767 - 11 = 32,756 fits): runs of W
// (11 each) inside other letters scoring 32,736 to 32,769, so pass 1 without the score leaves
// 16-bit lanes at the last W row or never, and pass 2 anchors near 2^15; and a long related pair
// scoring past 2^15, where pass 1 leaves them midway.
TEST(AlignTracebackBlocks, ScoresAtAndPastSixteenBits) {
  const Scoring scoring;  // W-W scores 11
  for (const std::size_t n : {std::size_t{2976}, std::size_t{2977}, std::size_t{2978}, std::size_t{2979}}) {
    const auto q = codes("AC" + std::string(n, 'W') + "GH"), s = codes("KL" + std::string(n, 'W'));
    const Alignment expected = whole_region_traceback(q, s, scoring);
    EXPECT_EQ(expected.score, static_cast<int>(11 * n));
    check_passes(q, s, scoring, fmt::format("{} W", n));
    for (const std::size_t bytes : {std::size_t{1} << 16, std::size_t{1} << 30})
      for (const std::optional<int> known : {std::optional(expected.score), std::optional<int>()})
        expect_same(
            detail::align_pair(q, s, scoring, known, {.direction_bytes = bytes}), expected,
            fmt::format("{} W, blocks of {} bytes, {}", n, bytes, known ? "known score" : "no score"));
  }
  std::mt19937 rng(5);
  const auto base = random_protein(rng, 4000, "WC");  // W-W 11, C-C 9
  const auto q = codes(base), s = codes(mutate(rng, base, 0.03));
  const Alignment expected = whole_region_traceback(q, s, scoring);
  EXPECT_GT(expected.score, 32767);
  check_passes(q, s, scoring, "4000 residues of W and C");
  expect_same(detail::align_pair(q, s, scoring, expected.score, {.direction_bytes = std::size_t{1} << 18}),
              expected, "4000 residues of W and C");
}

// Anchored values far below -2^15 (pass 2 clamps them at -1): a short alignment at the end of a
// 40,000-residue subject (pass 2's first rows cross every column), and an alignment across a
// 2,000-residue gap in the subject next to 35,000 unrelated residues, over its 4,000 rows.
TEST(AlignTracebackPasses, AnchoredValuesFarBelowSixteenBits) {
  std::mt19937 rng(41);
  const Scoring scoring;
  {
    const auto q = codes(std::string(30, 'W'));
    const auto s = codes(random_protein(rng, 40000, "ACDEFGHIKLMNPQRSTVY") + std::string(30, 'W'));
    check_passes(q, s, scoring, "30 W after 40,000 residues");
    expect_same(detail::align_pair(q, s, scoring, std::nullopt), whole_region_traceback(q, s, scoring),
                "30 W after 40,000 residues");
  }
  const std::string block = random_protein(rng, 1000, "W"), gap = random_protein(rng, 2000, "ACDEFGHIK");
  const auto q = codes(block + gap + block);
  const auto s = codes(random_protein(rng, 35000, "ACDEFGHIK") + block + block);
  const Alignment expected = whole_region_traceback(q, s, scoring);
  EXPECT_EQ(expected.score, 22000 - 11 - 1999);
  check_passes(q, s, scoring, "a 2,000-residue gap after 35,000 residues");
  for (const detail::TracebackLimits& limits : lane_variants())
    expect_same(detail::align_pair(q, s, scoring, expected.score, limits), expected,
                "a 2,000-residue gap, " + describe(limits));
}

// A long related pair (a giant protein scaled down) traced in blocks of 4 KiB, about 1/1000 of its
// region: the same alignment as the whole region, and an optimal one.
TEST(AlignTracebackBlocks, LongPairInSmallBlocks) {
  std::mt19937 rng(35);
  const Scoring scoring;
  const auto base = random_protein(rng, 2500, "ACDEFGHIKLMNPQRSTVWY");
  const auto q = codes(base), s = codes(mutate(rng, base, 0.25));
  const detail::TracebackLimits limits{.direction_bytes = 4096};
  const Alignment blocked = detail::align_pair(q, s, scoring, std::nullopt, limits);
  expect_same(blocked, whole_region_traceback(q, s, scoring), "2500 residues");
  EXPECT_EQ(blocked.score, reference_score(q, s, scoring));
  std::uint32_t identities = 0;
  EXPECT_EQ(score_of_alignment(blocked, q, s, scoring, &identities), blocked.score);
  EXPECT_EQ(identities, blocked.identities);
  EXPECT_GT(blocked.length, 2000u);
}

}  // namespace
}  // namespace molaccel::align

// Shared helpers of the align tests: random protein sequences with a fixed seed.
#pragma once

#include <cctype>
#include <random>
#include <span>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "molaccel/align.hpp"

namespace molaccel::align::testing {

// Random residues; `alphabet` limits the letters (default: the whole alphabet, X and * included).
inline std::string random_protein(std::mt19937& rng, std::size_t length,
                                  std::string_view alphabet = kAlphabet) {
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string s(length, 'A');
  for (auto& c : s) c = alphabet[pick(rng)];
  return s;
}

// A copy of `s` with about `rate` of its positions substituted, deleted or inserted: related
// sequences give long alignments with gaps, which random pairs rarely do.
inline std::string mutate(std::mt19937& rng, const std::string& s, double rate) {
  std::uniform_real_distribution<double> u(0, 1);
  std::string out;
  for (char c : s) {
    const double r = u(rng);
    if (r < rate / 3) continue;  // deletion
    if (r < 2 * rate / 3)
      out += random_protein(rng, 1, "ACDEFGHIKLMNPQRSTVWY");  // substitution
    else
      out += c;
    if (r > 1 - rate / 3) out += random_protein(rng, 1 + rng() % 3, "ACDEFGHIKLMNPQRSTVWY");  // insertion
  }
  if (out.empty()) out = "A";
  return out;
}

inline SequenceSet make_set(const std::vector<std::string>& letters) {
  std::vector<std::pair<std::string, std::string>> records;
  for (std::size_t i = 0; i < letters.size(); ++i) records.emplace_back("s" + std::to_string(i), letters[i]);
  return encode_sequences(records);
}

inline std::vector<std::uint8_t> codes(const std::string& letters) {
  std::vector<std::uint8_t> out;
  for (char c : letters) out.push_back(static_cast<std::uint8_t>(encode_residue(c)));
  return out;
}

// Score of an alignment recomputed from its CIGAR: the traceback must reproduce the DP score.
inline int score_of_alignment(const Alignment& a, std::span<const std::uint8_t> q,
                              std::span<const std::uint8_t> s, const Scoring& scoring,
                              std::uint32_t* identities) {
  std::size_t i = a.query_start - 1, j = a.subject_start - 1, k = 0;
  int score = 0;
  *identities = 0;
  while (k < a.cigar.size()) {
    std::size_t run = 0;
    while (std::isdigit(static_cast<unsigned char>(a.cigar[k]))) run = run * 10 + (a.cigar[k++] - '0');
    const char op = a.cigar[k++];
    if (op == 'M') {
      for (std::size_t r = 0; r < run; ++r, ++i, ++j) {
        score += scoring.matrix.at(q[i], s[j]);
        *identities += q[i] == s[j];
      }
    } else {
      score -= scoring.gap_open + static_cast<int>(run - 1) * scoring.gap_extend;
      (op == 'I' ? i : j) += run;
    }
  }
  EXPECT_EQ(i, a.query_end);
  EXPECT_EQ(j, a.subject_end);
  return score;
}

// BLOSUM62 with every entry multiplied by 10 (max 110), gaps 60/5: alignments of a few hundred
// residues score past 32,767, so 16-bit lanes must saturate and be rescored exactly.
inline Scoring blosum62_times_ten() {
  const auto b62 = builtin_matrix("BLOSUM62");
  std::string text = " ";
  for (int b = 0; b < 24; ++b) text += fmt::format(" {}", kAlphabet[b]);
  text += "\n";
  for (int a = 0; a < 24; ++a) {
    text += kAlphabet[a];
    for (int b = 0; b < 24; ++b) text += fmt::format(" {}", 10 * b62.at(a, b));
    text += "\n";
  }
  Scoring scoring;
  scoring.matrix = parse_matrix("blosum62x10", text);
  scoring.gap_open = 60;
  scoring.gap_extend = 5;
  return scoring;
}

}  // namespace molaccel::align::testing

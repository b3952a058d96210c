// Shared helpers of the align tests: random protein sequences with a fixed seed.
#pragma once

#include <random>
#include <string>

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

}  // namespace molaccel::align::testing

// Inputs for the LINGO tests: random SMILES-like strings (balanced by construction, with repeated
// tokens so Lingos occur more than once) and real molecules from the bundled data.
#pragma once

#include <bit>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "molaccel/lingo.hpp"
#include "testing/testing.hpp"

namespace molaccel::lingo::testing {

// A random string of SMILES tokens; `alphabet` small = many repeated Lingos (and ties).
inline std::string random_smiles(std::mt19937& rng, std::size_t min_tokens, std::size_t max_tokens,
                                 int alphabet = 16) {
  static const char* tokens[] = {"C",  "c",  "N",     "O",      "=", "1", "2",   "(C)",
                                 "Cl", "Br", "[NH+]", "[13C]",  "n", "S", "%12", "[O-]",
                                 "F",  "#",  "(=O)",  "[C@@H]", "P", "s", "o",   "3"};
  const int n_tokens = std::min<int>(alphabet, static_cast<int>(std::size(tokens)));
  std::uniform_int_distribution<std::size_t> len(min_tokens, max_tokens);
  std::uniform_int_distribution<int> pick(0, n_tokens - 1);
  std::string s;
  for (std::size_t i = 0, n = len(rng); i < n; ++i) s += tokens[pick(rng)];
  return s;
}

inline std::vector<std::string> random_smiles_set(std::uint32_t seed, std::size_t count,
                                                  std::size_t min_tokens, std::size_t max_tokens,
                                                  int alphabet = 16) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(random_smiles(rng, min_tokens, max_tokens, alphabet));
  return out;
}

// First `count` SMILES of a bundled data file (data/lingo/...).
inline std::vector<std::string> real_smiles(const std::string& file, std::size_t count,
                                            std::size_t skip = 0) {
  std::ifstream in(molaccel::testing::data_dir() / "lingo" / file);
  std::vector<std::string> out;
  std::string line;
  std::size_t seen = 0;
  while (out.size() < count && std::getline(in, line)) {
    if (seen++ < skip) continue;
    out.push_back(line.substr(0, line.find_first_of(" \t")));
  }
  return out;
}

// Bitwise float comparison, reporting the first difference with its position.
inline void expect_bit_identical(const std::vector<float>& expected, const std::vector<float>& actual,
                                 std::size_t ld, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(expected[i]) != std::bit_cast<std::uint32_t>(actual[i])) {
      ADD_FAILURE() << what << ": first difference at row " << i / ld << ", column " << i % ld
                    << ": expected " << expected[i] << ", got " << actual[i];
      return;
    }
  }
}

// Top-k by brute force from a dense matrix: (similarity desc, index asc).
inline std::vector<Hit> brute_top_k(const std::vector<float>& m, std::size_t rows, std::size_t cols,
                                    std::size_t k) {
  std::vector<Hit> out;
  for (std::size_t r = 0; r < rows; ++r) {
    std::vector<Hit> row;
    for (std::size_t c = 0; c < cols; ++c)
      row.push_back({static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(c), m[r * cols + c]});
    std::stable_sort(row.begin(), row.end(),
                     [](const Hit& a, const Hit& b) { return a.similarity > b.similarity; });
    row.resize(std::min(k, cols));
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

inline void expect_same_hits(const std::vector<Hit>& expected, const std::vector<Hit>& actual,
                             const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = expected[i];
    const auto& a = actual[i];
    if (e.query != a.query || e.target != a.target ||
        std::bit_cast<std::uint32_t>(e.similarity) != std::bit_cast<std::uint32_t>(a.similarity)) {
      ADD_FAILURE() << what << ": hit " << i << " expected (" << e.query << "," << e.target << ","
                    << e.similarity << ") got (" << a.query << "," << a.target << "," << a.similarity << ")";
      return;
    }
  }
}

}  // namespace molaccel::lingo::testing

// A synthetic protein database for benchmarks: lengths drawn from the 5,000 real lengths of
// db5k.fasta (a random sample of the 486k-sequence UniProt benchmark database), residues drawn
// from db5k's amino-acid frequencies, fixed seed. 486,000 such sequences hold about 177 M
// residues, like the real database (178.2 M); the longest is 4,700 (the real one has a few longer).
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "molaccel/align.hpp"

namespace molaccel::align::bench {

inline std::vector<std::uint32_t> read_lengths(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), 0, "cannot open");
  std::vector<std::uint32_t> lengths;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') lengths.push_back(static_cast<std::uint32_t>(std::stoul(line)));
  return lengths;
}

inline SequenceSet synthetic_database(std::size_t sequences, const std::vector<std::uint32_t>& length_sample,
                                      std::uint64_t seed = 2010) {
  static const std::pair<char, double> kFrequencies[] = {
      {'L', 0.09650}, {'A', 0.08415}, {'G', 0.07158}, {'V', 0.06907}, {'E', 0.06741},
      {'S', 0.06478}, {'I', 0.05977}, {'K', 0.05785}, {'R', 0.05587}, {'D', 0.05467},
      {'T', 0.05343}, {'P', 0.04738}, {'N', 0.04043}, {'Q', 0.03911}, {'F', 0.03842},
      {'Y', 0.02861}, {'M', 0.02431}, {'H', 0.02266}, {'C', 0.01313}, {'W', 0.01082}};
  std::vector<double> weights;
  std::vector<std::uint8_t> codes;
  for (const auto& [letter, p] : kFrequencies) {
    weights.push_back(p);
    codes.push_back(static_cast<std::uint8_t>(encode_residue(letter)));
  }
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> residue(weights.begin(), weights.end());
  std::uniform_int_distribution<std::size_t> pick(0, length_sample.size() - 1);
  SequenceSet set;
  std::vector<std::uint8_t> s;
  for (std::size_t i = 0; i < sequences; ++i) {
    s.resize(length_sample[pick(rng)]);
    for (auto& c : s) c = codes[residue(rng)];
    set.add("synthetic" + std::to_string(i), s);
  }
  return set;
}

}  // namespace molaccel::align::bench

// Benchmark inputs: the bundled 4,096 ZINC set and seeded random subsets of the 367k set.
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo_bench {

using molaccel::lingo::MoleculeSet;

// Where molecules_367k.smi.gz lives: --data DIR, .deps/lingo (carried to the GPU machine), or the
// shared data folder next to the checkout.
inline std::filesystem::path large_set_path(const std::string& data_arg) {
  namespace fs = std::filesystem;
  const std::string name = "molecules_367k.smi.gz";
  std::vector<fs::path> candidates;
  if (!data_arg.empty()) candidates.push_back(fs::path(data_arg) / name);
  candidates.push_back(fs::path(MOLACCEL_SOURCE_DIR) / ".deps" / "lingo" / name);
  candidates.push_back(fs::path(MOLACCEL_SOURCE_DIR).parent_path() / "shared" / "data" / "lingo" / name);
  for (const auto& c : candidates)
    if (fs::exists(c)) return c;
  return {};
}

inline std::filesystem::path demo_set_path() {
  return std::filesystem::path(MOLACCEL_SOURCE_DIR) / "data" / "lingo" / "demo4096.smi";
}

// A random subset of `count` molecules: partial Fisher-Yates driven by mt19937_64(seed), with
// `rng() % range` (portable, unlike std::shuffle), in the order drawn.
inline std::vector<std::size_t> random_indices(std::size_t n, std::size_t count, std::uint64_t seed) {
  std::vector<std::size_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = i;
  std::mt19937_64 rng(seed);
  count = std::min(count, n);
  for (std::size_t i = 0; i < count; ++i) std::swap(idx[i], idx[i + rng() % (n - i)]);
  idx.resize(count);
  return idx;
}

constexpr std::uint64_t kSubsetSeed = 2010;  // the SIML paper's year

inline double mean_length(const MoleculeSet& set) {
  double total = 0;
  for (auto m : set.magnitudes) total += m + set.q - 1;
  return set.size() ? total / set.size() : 0;
}
inline double mean_distinct(const MoleculeSet& set) {
  double total = 0;
  for (std::size_t i = 0; i < set.size(); ++i) total += static_cast<double>(set.distinct(i));
  return set.size() ? total / set.size() : 0;
}

}  // namespace molaccel::lingo_bench

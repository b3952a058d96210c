// Tier 2: a fast backend against the reference, bit for bit. Shared by the cpu and cuda suites so
// both are held to exactly the same checks.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

#include "lingo/similarity_math.hpp"
#include "lingo_test_util.hpp"

namespace molaccel::lingo::testing {

struct Subject {
  Resources resources;
  Backend backend;
};

inline ComputeOptions with(Backend backend, Metric metric, std::size_t tile_rows = 0,
                           std::size_t tile_cols = 0) {
  ComputeOptions o;
  o.backend = backend;
  o.metric = metric;
  o.tile_rows = tile_rows;
  o.tile_columns = tile_cols;
  return o;
}

inline std::vector<float> reference_matrix(const MoleculeSet& q, const MoleculeSet* db, Metric metric) {
  return similarity_matrix(Resources::cpu(1), q, db, with(Backend::reference, metric));
}

// Random queries x random database for every q and metric; sizes past a warp and odd.
inline void check_random_matrices(const Subject& s, std::size_t tile_rows = 0, std::size_t tile_cols = 0) {
  for (int q = 1; q <= 8; ++q) {
    LingoOptions lo;
    lo.q = q;
    const auto queries = make_molecules(random_smiles_set(100 + q, 37, 0 + 1, 24, 10), lo);
    const auto db = make_molecules(random_smiles_set(200 + q, 203, 1, 30, 10), lo);
    for (auto metric : {Metric::tanimoto, Metric::vidal, Metric::set}) {
      const auto expected = reference_matrix(queries, &db, metric);
      const auto actual =
          similarity_matrix(s.resources, queries, &db, with(s.backend, metric, tile_rows, tile_cols));
      expect_bit_identical(expected, actual, db.size(), fmt::format("q={} metric={}", q, to_string(metric)));
    }
  }
}

inline void check_real_self_matrix(const Subject& s, const std::string& file, std::size_t n, int q,
                                   Metric metric, std::size_t tile_cols = 0) {
  LingoOptions lo;
  lo.q = q;
  const auto set = make_molecules(real_smiles(file, n), lo);
  const auto expected = reference_matrix(set, nullptr, metric);
  const auto actual = similarity_matrix(s.resources, set, nullptr, with(s.backend, metric, 0, tile_cols));
  expect_bit_identical(expected, actual, set.size(), fmt::format("{} q={} {}", file, q, to_string(metric)));
}

inline void check_search(const Subject& s, std::size_t k, Metric metric, std::size_t tile_rows = 0,
                         std::size_t tile_cols = 0) {
  // A small alphabet makes many equal similarities: the tie order is what this pins.
  const auto queries = make_molecules(random_smiles_set(31, 45, 1, 12, 5), {});
  const auto db = make_molecules(random_smiles_set(32, 301, 1, 12, 5), {});
  const auto m = reference_matrix(queries, &db, metric);
  const auto expected = brute_top_k(m, queries.size(), db.size(), k);
  const auto actual = search(s.resources, queries, db, k, with(s.backend, metric, tile_rows, tile_cols));
  expect_same_hits(expected, actual, fmt::format("top-{} {}", k, to_string(metric)));
}

inline void check_neighbors(const Subject& s, const MoleculeSet& set, float threshold, Metric metric,
                            std::size_t tile_cols = 0) {
  const auto m = reference_matrix(set, nullptr, metric);
  std::vector<Hit> expected;
  for (std::size_t i = 0; i < set.size(); ++i)
    for (std::size_t j = i + 1; j < set.size(); ++j)
      if (m[i * set.size() + j] >= threshold)
        expected.push_back(
            {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), m[i * set.size() + j]});
  RunInfo info;
  const auto actual = neighbors(s.resources, set, threshold, with(s.backend, metric, 0, tile_cols), &info);
  expect_same_hits(expected, actual, fmt::format("neighbors >= {} {}", threshold, to_string(metric)));
}

// A .npy file's element bytes, checking the magic, the 64-byte alignment and the descr.
inline std::string read_npy_bytes(const std::filesystem::path& path, const std::string& descr,
                                  std::size_t& rows, std::size_t& cols) {
  const std::string bytes = molaccel::testing::read_file(path);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const std::size_t header =
      10 + (static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8));
  EXPECT_EQ(header % 64, 0u);
  const std::string dict = bytes.substr(10, header - 10);
  EXPECT_NE(dict.find("'descr': '" + descr + "'"), std::string::npos) << dict;
  std::sscanf(dict.c_str() + dict.find("'shape': (") + 10, "%zu, %zu", &rows, &cols);
  return bytes.substr(header);
}

// Expected bytes of a matrix in `type`: the reference's fp32 values, quantised on the host.
inline std::string expected_bytes(const std::vector<float>& m, OutputType type) {
  std::string out;
  for (float v : m) {
    if (type == OutputType::fp32) {
      out.append(reinterpret_cast<const char*>(&v), 4);
    } else if (type == OutputType::fp16) {
      const std::uint16_t h = detail::float_to_half_bits(v);
      out.append(reinterpret_cast<const char*>(&h), 2);
    } else {
      out.push_back(static_cast<char>(detail::similarity_to_u8(v)));
    }
  }
  return out;
}

// .npy in every element type, self and queries x database, against the reference byte for byte.
inline void check_npy_types(const Subject& s, std::size_t tile_rows = 0, std::size_t tile_cols = 0) {
  molaccel::testing::TempDir dir;
  const auto queries = make_molecules(real_smiles("demo4096.smi", 301), {});
  const auto db = make_molecules(real_smiles("nci_first5k.smi", 257), {});
  for (const MoleculeSet* d : {static_cast<const MoleculeSet*>(nullptr), &db}) {
    const auto m = reference_matrix(queries, d, Metric::tanimoto);
    for (auto type : {OutputType::fp32, OutputType::fp16, OutputType::u8}) {
      write_similarity_matrix(s.resources, queries, d, dir / "m.npy", MatrixFormat::npy,
                              with(s.backend, Metric::tanimoto, tile_rows, tile_cols), nullptr, type);
      std::size_t rows = 0, cols = 0;
      const char* descr = type == OutputType::fp32 ? "<f4" : type == OutputType::fp16 ? "<f2" : "|u1";
      const auto got = read_npy_bytes(dir / "m.npy", descr, rows, cols);
      EXPECT_EQ(rows, queries.size());
      EXPECT_EQ(cols, d ? d->size() : queries.size());
      const auto want = expected_bytes(m, type);
      ASSERT_EQ(got.size(), want.size()) << to_string(type);
      EXPECT_TRUE(got == want) << to_string(type) << (d ? " queries x db" : " self");
    }
  }
}

}  // namespace molaccel::lingo::testing

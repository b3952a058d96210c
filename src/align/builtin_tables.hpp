// Internal: the built-in substitution matrices (NCBI text) and their published gapped
// Karlin-Altschul parameters.
#pragma once

#include <span>
#include <string_view>
#include <vector>

namespace molaccel::align::detail {

struct GappedParameterRow {
  int blast_gap_existence, blast_gap_extension;  // BLAST convention: gap of length k = G + k*E
  double lambda, K, H, alpha, beta;
};

struct BuiltinMatrix {
  std::string_view name;
  std::string_view ncbi_text;
  std::span<const GappedParameterRow> gapped_parameters;
};

const std::vector<BuiltinMatrix>& builtin_matrix_table();

}  // namespace molaccel::align::detail

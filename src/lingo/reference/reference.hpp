// The oracle: the SIML paper's Figure 1 merge over the sorted Lingo keys of two molecules, one pair
// at a time. Plain and obviously right; shares no code with the cpu and cuda backends.
#pragma once

#include <cstddef>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo::reference {

float pair_similarity(const MoleculeSet& a, std::size_t i, const MoleculeSet& b, std::size_t j,
                      Metric metric);

// Rows [row_begin, row_end) of queries against columns [col_begin, col_end) of db, row-major into
// out (ld = col_end - col_begin), single-threaded.
void score_block(const MoleculeSet& queries, const MoleculeSet& db, std::size_t row_begin,
                 std::size_t row_end, std::size_t col_begin, std::size_t col_end, Metric metric, float* out);

}  // namespace molaccel::lingo::reference

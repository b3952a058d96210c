// The oracle: textbook Gotoh local alignment in 32-bit integers, one cell at a time, written
// straight from the recurrences. Shares no code with the fast paths.
//   E(i,j) = max(E(i,j-1) - extend, H(i,j-1) - open)      gap in the query (along the subject)
//   F(i,j) = max(F(i-1,j) - extend, H(i-1,j) - open)      gap in the subject (along the query)
//   H(i,j) = max(0, H(i-1,j-1) + s(q_i, s_j), E(i,j), F(i,j)),  H(0,*) = H(*,0) = 0
// A gap of length k therefore costs open + (k-1) * extend.
#include <algorithm>
#include <limits>
#include <vector>

#include "molaccel/align.hpp"

namespace molaccel::align {

int reference_score(std::span<const std::uint8_t> query, std::span<const std::uint8_t> subject,
                    const Scoring& scoring) {
  const std::size_t m = query.size(), n = subject.size();
  constexpr int kMinusInfinity = std::numeric_limits<int>::min() / 2;
  // Rows i-1 and i of H and F; E is carried along the row.
  std::vector<int> h_previous(n + 1, 0), h_current(n + 1, 0);
  std::vector<int> f_previous(n + 1, kMinusInfinity), f_current(n + 1, kMinusInfinity);
  int best = 0;
  for (std::size_t i = 1; i <= m; ++i) {
    int e = kMinusInfinity;
    h_current[0] = 0;
    for (std::size_t j = 1; j <= n; ++j) {
      e = std::max(e - scoring.gap_extend, h_current[j - 1] - scoring.gap_open);
      f_current[j] = std::max(f_previous[j] - scoring.gap_extend, h_previous[j] - scoring.gap_open);
      const int diagonal = h_previous[j - 1] + scoring.matrix.at(query[i - 1], subject[j - 1]);
      h_current[j] = std::max({0, diagonal, e, f_current[j]});
      best = std::max(best, h_current[j]);
    }
    std::swap(h_previous, h_current);
    std::swap(f_previous, f_current);
  }
  return best;
}

}  // namespace molaccel::align

// The recomputed relative residual ||b - A x|| / ||b|| (host, double) that the solver tests
// check their solutions with, independently of any solver's recurrence.
#pragma once

#include <cmath>
#include <vector>

#include "molaccel/linalg.hpp"

namespace molaccel::linalg::testing {

inline double true_residual(const HostCsr<double>& a, const std::vector<double>& b,
                            const std::vector<double>& x) {
  const auto ax = multiply(a, x);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += (b[i] - ax[i]) * (b[i] - ax[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace molaccel::linalg::testing

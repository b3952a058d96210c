// Frames of a trajectory: the same-system check, and orbital tracking by maximum overlap.
#include <cmath>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital {

void check_same_system(const std::vector<Wavefunction>& frames) {
  if (frames.empty()) return;
  const Wavefunction& first = frames.front();
  for (std::size_t f = 1; f < frames.size(); ++f) {
    const Wavefunction& w = frames[f];
    auto fail = [&](const std::string& what) {
      throw InputError(w.source, 0,
                       fmt::format("frame {} differs from frame 1 ({}): {}", f + 1, first.source, what));
    };
    if (w.atoms.size() != first.atoms.size())
      fail(fmt::format("{} atoms, frame 1 has {}", w.atoms.size(), first.atoms.size()));
    for (std::size_t a = 0; a < w.atoms.size(); ++a)
      if (w.atoms[a].atomic_number != first.atoms[a].atomic_number)
        fail(fmt::format("atom {} is Z={}, in frame 1 Z={}", a + 1, w.atoms[a].atomic_number,
                         first.atoms[a].atomic_number));
    if (w.shells.size() != first.shells.size())
      fail(fmt::format("{} basis shells, frame 1 has {}", w.shells.size(), first.shells.size()));
    for (std::size_t s = 0; s < w.shells.size(); ++s) {
      const Shell &a = w.shells[s], &b = first.shells[s];
      bool same =
          a.atom == b.atom && a.l == b.l && a.pure == b.pure && a.exponents.size() == b.exponents.size();
      for (std::size_t p = 0; same && p < a.exponents.size(); ++p)
        same = std::abs(a.exponents[p] - b.exponents[p]) <= 1e-10 * std::abs(b.exponents[p]) &&
               std::abs(a.coefficients[p] - b.coefficients[p]) <= 1e-8 * std::abs(b.coefficients[p]) + 1e-12;
      if (!same) fail(fmt::format("basis shell {} (on atom {}) is not the same", s + 1, a.atom + 1));
    }
    if (w.unrestricted() != first.unrestricted())
      fail(w.unrestricted() ? "unrestricted, frame 1 restricted" : "restricted, frame 1 unrestricted");
  }
}

std::vector<TrackedOrbital> track_orbital(const std::vector<Wavefunction>& frames, OrbitalRef start) {
  check_same_system(frames);
  std::vector<TrackedOrbital> out;
  if (frames.empty()) return out;
  const std::size_t n = static_cast<std::size_t>(frames.front().function_count());
  auto set_of = [&](const Wavefunction& w) -> const OrbitalSet& {
    return start.spin == Spin::alpha ? w.alpha : w.beta;
  };
  if (start.index >= set_of(frames.front()).count())
    throw InputError("--orbital", 0,
                     fmt::format("orbital {} is not in {}", start.index + 1, frames.front().source));
  out.push_back({start, 1.0, false});
  // The orbital followed so far, with its sign fixed: coefficients over the previous frame's basis.
  std::vector<double> followed(set_of(frames.front()).coefficients.begin() + start.index * n,
                               set_of(frames.front()).coefficients.begin() + (start.index + 1) * n);
  for (std::size_t f = 1; f < frames.size(); ++f) {
    // Mixed overlap <previous frame's functions | this frame's functions>: the off-diagonal block of
    // the overlap matrix of both frames' basis sets together.
    Wavefunction both;
    both.atoms = frames[f - 1].atoms;
    both.atoms.insert(both.atoms.end(), frames[f].atoms.begin(), frames[f].atoms.end());
    both.shells = frames[f - 1].shells;
    for (Shell s : frames[f].shells) {
      s.atom += static_cast<int>(frames[f - 1].atoms.size());
      both.shells.push_back(std::move(s));
    }
    const std::vector<double> s = overlap_matrix(both);
    std::vector<double> left(n, 0.0);  // followed^T S_mixed
    for (std::size_t mu = 0; mu < n; ++mu)
      for (std::size_t nu = 0; nu < n; ++nu) left[nu] += followed[mu] * s[mu * (2 * n) + n + nu];
    const OrbitalSet& set = set_of(frames[f]);
    double best = 0;
    std::size_t best_index = 0;
    for (std::size_t o = 0; o < set.count(); ++o) {
      double overlap = 0;
      for (std::size_t nu = 0; nu < n; ++nu) overlap += left[nu] * set.coefficients[o * n + nu];
      if (std::abs(overlap) > std::abs(best)) {
        best = overlap;
        best_index = o;
      }
    }
    const double sign = best < 0 ? -1.0 : 1.0;
    out.push_back({{start.spin, best_index}, std::abs(best), best < 0});
    for (std::size_t nu = 0; nu < n; ++nu) followed[nu] = sign * set.coefficients[best_index * n + nu];
  }
  return out;
}

}  // namespace molaccel::orbital

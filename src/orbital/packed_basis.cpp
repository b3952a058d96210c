#include "orbital/packed_basis.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <tuple>

#include "orbital/basis_functions.hpp"

namespace molaccel::orbital::detail {

namespace {

// Smallest r^2 beyond which amplitude * r^l * exp(-alpha r^2) < tolerance for good.
double screening_radius2(double amplitude, int l, double alpha, double tolerance) {
  if (tolerance <= 0) return DBL_MAX;
  amplitude = std::abs(amplitude);
  if (amplitude == 0) return 0;
  auto log_term = [&](double r) {
    return std::log(amplitude) + (l > 0 ? l * std::log(r) : 0.0) - alpha * r * r;
  };
  const double r_peak = l > 0 ? std::sqrt(l / (2.0 * alpha)) : 0.0;
  const double target = std::log(tolerance);
  if (log_term(std::max(r_peak, 1e-300)) < target && l > 0) return 0;
  if (l == 0 && std::log(amplitude) < target) return 0;
  double lo = r_peak, hi = r_peak + 1.0;
  while (log_term(hi) >= target) hi *= 2;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    (log_term(mid) >= target ? lo : hi) = mid;
  }
  return hi * hi * (1 + 1e-6);
}

}  // namespace

PackedBasis pack_basis(const Wavefunction& wfn, double tolerance) {
  return pack_basis(wfn, expand_shells(wfn), tolerance);
}

PackedBasis pack_basis(const Wavefunction& wfn, const std::vector<ExpandedShell>& expanded,
                       double tolerance) {
  PackedBasis packed;
  for (const Atom& atom : wfn.atoms)
    for (int d = 0; d < 3; ++d) packed.atom_xyz.push_back(atom.position[d]);
  // Column of each shell's first component in the coefficient matrix: basis order.
  std::vector<int> first_component(expanded.size());
  int column = 0;
  for (std::size_t s = 0; s < expanded.size(); ++s) {
    first_component[s] = column;
    column += expanded[s].components;
  }
  packed.components = column;
  // The screening radius depends on (amplitude, l, exponent) only: atoms of one element repeat them,
  // so each distinct primitive is solved once (the same computation: exact).
  std::map<std::tuple<double, int, double>, double> radius2;
  const auto cached_radius2 = [&](double amplitude, int l, double alpha) {
    const auto key = std::make_tuple(amplitude, l, alpha);
    const auto found = radius2.find(key);
    if (found != radius2.end()) return found->second;
    const double r2 = screening_radius2(amplitude, l, alpha, tolerance);
    radius2.emplace(key, r2);
    return r2;
  };
  packed.atom_first_shell.push_back(0);
  for (std::size_t a = 0; a < wfn.atoms.size(); ++a) {
    for (std::size_t s = 0; s < expanded.size(); ++s) {
      const ExpandedShell& e = expanded[s];
      if (e.atom != static_cast<int>(a)) continue;
      double angular = 0;  // largest sum_c |weight| over the shell's functions
      for (int f = 0; f < e.functions; ++f) {
        double sum = 0;
        for (int c = 0; c < e.components; ++c)
          sum += std::abs(e.weight[static_cast<std::size_t>(f * e.components + c)]);
        angular = std::max(angular, sum);
      }
      PackedShell shell;
      shell.l = e.l;
      shell.first_primitive = static_cast<int>(packed.exponent.size());
      shell.primitive_count = static_cast<int>(e.alpha.size());
      shell.first_component = first_component[s];
      double shell_cut = 0;
      for (std::size_t p = 0; p < e.alpha.size(); ++p) {
        const double cut = cached_radius2(e.radial[p] * angular, e.l, e.alpha[p]);
        packed.exponent.push_back(static_cast<float>(e.alpha[p]));
        packed.coefficient.push_back(static_cast<float>(e.radial[p]));
        packed.cutoff_r2.push_back(static_cast<float>(std::min(cut, static_cast<double>(FLT_MAX))));
        shell_cut = std::max(shell_cut, cut);
      }
      shell.cutoff_r2 = static_cast<float>(std::min(shell_cut, static_cast<double>(FLT_MAX)));
      packed.max_l = std::max(packed.max_l, e.l);
      packed.shells.push_back(shell);
    }
    packed.atom_first_shell.push_back(static_cast<int>(packed.shells.size()));
  }
  // Exponent groups per atom (CPU kernel).
  packed.primitive_group.assign(packed.exponent.size(), 0);
  packed.atom_first_group.push_back(0);
  for (std::size_t a = 0; a + 1 < packed.atom_first_shell.size(); ++a) {
    const int s0 = packed.atom_first_shell[a], s1 = packed.atom_first_shell[a + 1];
    std::vector<ExponentGroup> groups;
    std::vector<int> group_of;  // per primitive of the atom, in order
    float atom_cut = 0;
    for (int s = s0; s < s1; ++s) {
      const PackedShell& shell = packed.shells[static_cast<std::size_t>(s)];
      atom_cut = std::max(atom_cut, shell.cutoff_r2);
      for (int q = 0; q < shell.primitive_count; ++q) {
        const std::size_t p = static_cast<std::size_t>(shell.first_primitive + q);
        std::size_t g = 0;
        while (g < groups.size() && groups[g].exponent != packed.exponent[p]) ++g;
        if (g == groups.size()) groups.push_back({packed.exponent[p], 0.0f});
        groups[g].cutoff_r2 = std::max(groups[g].cutoff_r2, packed.cutoff_r2[p]);
        group_of.push_back(static_cast<int>(g));
      }
    }
    std::vector<int> order(groups.size()), rank(groups.size());
    for (std::size_t g = 0; g < order.size(); ++g) order[g] = static_cast<int>(g);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return groups[static_cast<std::size_t>(x)].cutoff_r2 > groups[static_cast<std::size_t>(y)].cutoff_r2;
    });
    for (std::size_t r = 0; r < order.size(); ++r) {
      rank[static_cast<std::size_t>(order[r])] = static_cast<int>(r);
      packed.groups.push_back(groups[static_cast<std::size_t>(order[r])]);
    }
    std::size_t k = 0;
    for (int s = s0; s < s1; ++s) {
      const PackedShell& shell = packed.shells[static_cast<std::size_t>(s)];
      for (int q = 0; q < shell.primitive_count; ++q, ++k)
        packed.primitive_group[static_cast<std::size_t>(shell.first_primitive + q)] =
            rank[static_cast<std::size_t>(group_of[k])];
    }
    packed.atom_first_group.push_back(static_cast<int>(packed.groups.size()));
    packed.atom_cutoff_r2.push_back(atom_cut);
  }
  return packed;
}

std::vector<float> cartesian_coefficients(const Wavefunction& wfn, const std::vector<OrbitalRef>& orbitals) {
  return cartesian_coefficients(wfn, expand_shells(wfn), orbitals);
}

std::vector<float> cartesian_coefficients(const Wavefunction& wfn, const std::vector<ExpandedShell>& expanded,
                                          const std::vector<OrbitalRef>& orbitals) {
  int components = 0;
  for (const auto& e : expanded) components += e.components;
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  std::vector<float> out(orbitals.size() * static_cast<std::size_t>(components), 0.0f);
  for (std::size_t o = 0; o < orbitals.size(); ++o) {
    const OrbitalSet& set = orbitals[o].spin == Spin::alpha ? wfn.alpha : wfn.beta;
    MOLACCEL_EXPECTS(orbitals[o].index < set.count(), "orbital index out of range");
    const double* c = &set.coefficients[orbitals[o].index * n];
    std::size_t function = 0, column = 0;
    for (const auto& e : expanded) {
      for (int comp = 0; comp < e.components; ++comp) {
        double sum = 0;
        for (int f = 0; f < e.functions; ++f)
          sum += c[function + static_cast<std::size_t>(f)] *
                 e.weight[static_cast<std::size_t>(f * e.components + comp)];
        out[o * static_cast<std::size_t>(components) + column + static_cast<std::size_t>(comp)] =
            static_cast<float>(sum);
      }
      function += static_cast<std::size_t>(e.functions);
      column += static_cast<std::size_t>(e.components);
    }
  }
  return out;
}

DensityTerms density_terms(const Wavefunction& wfn, DensityKind kind) {
  DensityTerms terms;
  auto add = [&](Spin spin, std::size_t index, double weight) {
    if (weight != 0) {
      terms.orbitals.push_back({spin, index});
      terms.weights.push_back(static_cast<float>(weight));
    }
  };
  if (!wfn.unrestricted()) {
    for (std::size_t o = 0; o < wfn.alpha.count(); ++o) {
      const double occ = wfn.alpha.occupations[o];
      const double a = std::min(occ, 1.0), b = std::max(occ - 1.0, 0.0);
      switch (kind) {
        case DensityKind::total:
          add(Spin::alpha, o, occ);
          break;
        case DensityKind::alpha:
          add(Spin::alpha, o, a);
          break;
        case DensityKind::beta:
          add(Spin::alpha, o, b);
          break;
        case DensityKind::spin:
          add(Spin::alpha, o, a - b);
          break;
      }
    }
  } else {
    for (std::size_t o = 0; o < wfn.alpha.count(); ++o)
      if (kind != DensityKind::beta) add(Spin::alpha, o, wfn.alpha.occupations[o]);
    for (std::size_t o = 0; o < wfn.beta.count(); ++o) {
      if (kind == DensityKind::total || kind == DensityKind::beta)
        add(Spin::beta, o, wfn.beta.occupations[o]);
      if (kind == DensityKind::spin) add(Spin::beta, o, -wfn.beta.occupations[o]);
    }
  }
  return terms;
}

double largest_coefficient(const Wavefunction& wfn, const std::vector<OrbitalRef>& orbitals) {
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  double largest = 0;
  for (const auto& ref : orbitals) {
    const OrbitalSet& set = ref.spin == Spin::alpha ? wfn.alpha : wfn.beta;
    for (std::size_t f = 0; f < n; ++f)
      largest = std::max(largest, std::abs(set.coefficients[ref.index * n + f]));
  }
  return largest;
}

double exp_per_point(const PackedBasis& basis, const GridSpec& grid) {
  const std::size_t samples_per_axis = 16;
  double total = 0;
  std::size_t count = 0;
  for (std::size_t si = 0; si < samples_per_axis; ++si)
    for (std::size_t sj = 0; sj < samples_per_axis; ++sj)
      for (std::size_t sk = 0; sk < samples_per_axis; ++sk) {
        const std::size_t idx[3] = {si * grid.counts[0] / samples_per_axis,
                                    sj * grid.counts[1] / samples_per_axis,
                                    sk * grid.counts[2] / samples_per_axis};
        double p[3];
        for (int d = 0; d < 3; ++d)
          p[d] =
              grid.origin[d] + idx[0] * grid.axes[0][d] + idx[1] * grid.axes[1][d] + idx[2] * grid.axes[2][d];
        for (std::size_t a = 0; a < basis.atom_count(); ++a) {
          const double dx = p[0] - basis.atom_xyz[3 * a], dy = p[1] - basis.atom_xyz[3 * a + 1],
                       dz = p[2] - basis.atom_xyz[3 * a + 2];
          const double r2 = dx * dx + dy * dy + dz * dz;
          for (int s = basis.atom_first_shell[a]; s < basis.atom_first_shell[a + 1]; ++s) {
            const PackedShell& shell = basis.shells[static_cast<std::size_t>(s)];
            if (r2 >= shell.cutoff_r2) continue;
            for (int q = 0; q < shell.primitive_count; ++q)
              total += r2 < basis.cutoff_r2[static_cast<std::size_t>(shell.first_primitive + q)] ? 1 : 0;
          }
        }
        ++count;
      }
  return count ? total / static_cast<double>(count) : 0;
}

}  // namespace molaccel::orbital::detail

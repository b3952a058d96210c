#include "orbital/reference/reference.hpp"

#include <cmath>
#include <numbers>

namespace molaccel::orbital::reference {

namespace {

double factorial(int n) {
  double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

double odd_double_factorial(int n) {  // (2n-1)!!
  double f = 1;
  for (int k = 1; k <= 2 * n - 1; k += 2) f *= k;
  return f;
}

// Associated Legendre function P_l^m(x), m >= 0, without the Condon-Shortley phase.
double legendre(int l, int m, double x) {
  double pmm = 1.0;
  const double s = std::sqrt(std::max(0.0, 1.0 - x * x));
  for (int i = 1; i <= m; ++i) pmm *= (2.0 * i - 1.0) * s;
  if (l == m) return pmm;
  double pm1 = x * (2.0 * m + 1.0) * pmm;
  if (l == m + 1) return pm1;
  double pl = 0;
  for (int ll = m + 2; ll <= l; ++ll) {
    pl = ((2.0 * ll - 1.0) * x * pm1 - (ll + m - 1.0) * pmm) / (ll - m);
    pmm = pm1;
    pm1 = pl;
  }
  return pl;
}

// r^l times the unit-normalised real spherical harmonic, m in Molden order position `row`.
double solid_harmonic(int l, int row, double x, double y, double z) {
  const int m = row == 0 ? 0 : ((row % 2 == 1) ? (row + 1) / 2 : -(row / 2));
  const int am = std::abs(m);
  const double r = std::sqrt(x * x + y * y + z * z);
  if (r == 0) return l == 0 ? std::sqrt(1.0 / (4 * std::numbers::pi)) : 0.0;
  const double cos_theta = z / r;
  const double phi = std::atan2(y, x);
  double norm = std::sqrt((2.0 * l + 1.0) / (4.0 * std::numbers::pi) * factorial(l - am) / factorial(l + am));
  double angular = legendre(l, am, cos_theta);
  if (m > 0) angular *= std::sqrt(2.0) * std::cos(am * phi);
  if (m < 0) angular *= std::sqrt(2.0) * std::sin(am * phi);
  return norm * angular * std::pow(r, l);
}

struct Component {
  int x, y, z;
};

// Cartesian components in the order the readers use (include/molaccel/orbital.hpp).
std::vector<Component> molden_cartesian_order(int l) {
  switch (l) {
    case 0:
      return {{0, 0, 0}};
    case 1:
      return {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    case 2:
      return {{2, 0, 0}, {0, 2, 0}, {0, 0, 2}, {1, 1, 0}, {1, 0, 1}, {0, 1, 1}};
    case 3:
      return {{3, 0, 0}, {0, 3, 0}, {0, 0, 3}, {1, 2, 0}, {2, 1, 0},
              {2, 0, 1}, {1, 0, 2}, {0, 1, 2}, {0, 2, 1}, {1, 1, 1}};
    case 4:
      return {{4, 0, 0}, {0, 4, 0}, {0, 0, 4}, {3, 1, 0}, {3, 0, 1}, {1, 3, 0}, {0, 3, 1}, {1, 0, 3},
              {0, 1, 3}, {2, 2, 0}, {2, 0, 2}, {0, 2, 2}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}};
  }
  if (l > 6) throw Error("reference: angular momentum above i");
  // h and i: Gaussian's order, zzzzz yzzzz yyzzz ... xxxxy xxxxx (x power ascending, then y).
  std::vector<Component> order;
  for (int x = 0; x <= l; ++x)
    for (int y = 0; x + y <= l; ++y) order.push_back({x, y, l - x - y});
  return order;
}

// Contracted radial part sum_p d_p N_p exp(-a_p r^2), normalised so that the whole function has
// unit norm. For pure functions N_p normalises r^l exp(-a r^2) against a unit spherical harmonic;
// for a Cartesian component it normalises x^i y^j z^k exp(-a r^2) directly.
double pure_contraction(const Shell& shell, double r2) {
  const int l = shell.l;
  const double gamma = std::tgamma(l + 1.5);
  auto prim_norm = [&](double a) { return std::sqrt(2.0 * std::pow(2.0 * a, l + 1.5) / gamma); };
  double self = 0;
  for (std::size_t p = 0; p < shell.exponents.size(); ++p)
    for (std::size_t q = 0; q < shell.exponents.size(); ++q) {
      const double a = shell.exponents[p], b = shell.exponents[q];
      self += shell.coefficients[p] * shell.coefficients[q] * prim_norm(a) * prim_norm(b) * gamma /
              (2.0 * std::pow(a + b, l + 1.5));
    }
  double value = 0;
  for (std::size_t p = 0; p < shell.exponents.size(); ++p)
    value += shell.coefficients[p] * prim_norm(shell.exponents[p]) * std::exp(-shell.exponents[p] * r2);
  return value / std::sqrt(self);
}

double cartesian_contraction(const Shell& shell, const Component& c, double r2) {
  const int l = c.x + c.y + c.z;
  const double dfact = odd_double_factorial(c.x) * odd_double_factorial(c.y) * odd_double_factorial(c.z);
  auto prim_norm = [&](double a) {
    return std::sqrt(std::pow(2.0 * a / std::numbers::pi, 1.5) * std::pow(4.0 * a, l) / dfact);
  };
  double self = 0;
  for (std::size_t p = 0; p < shell.exponents.size(); ++p)
    for (std::size_t q = 0; q < shell.exponents.size(); ++q) {
      const double a = shell.exponents[p], b = shell.exponents[q];
      const double integral = dfact / std::pow(2.0 * (a + b), l) * std::pow(std::numbers::pi / (a + b), 1.5);
      self += shell.coefficients[p] * shell.coefficients[q] * prim_norm(a) * prim_norm(b) * integral;
    }
  double value = 0;
  for (std::size_t p = 0; p < shell.exponents.size(); ++p)
    value += shell.coefficients[p] * prim_norm(shell.exponents[p]) * std::exp(-shell.exponents[p] * r2);
  return value / std::sqrt(self);
}

std::array<double, 3> grid_point(const GridSpec& g, std::size_t i, std::size_t j, std::size_t k) {
  std::array<double, 3> p;
  for (int d = 0; d < 3; ++d)
    p[d] = g.origin[d] + static_cast<double>(i) * g.axes[0][d] + static_cast<double>(j) * g.axes[1][d] +
           static_cast<double>(k) * g.axes[2][d];
  return p;
}

}  // namespace

std::vector<double> basis_values(const Wavefunction& wfn, const std::array<double, 3>& point) {
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(wfn.function_count()));
  for (const Shell& shell : wfn.shells) {
    const auto& center = wfn.atoms.at(static_cast<std::size_t>(shell.atom)).position;
    const double x = point[0] - center[0], y = point[1] - center[1], z = point[2] - center[2];
    const double r2 = x * x + y * y + z * z;
    if (shell.pure) {
      const double radial = pure_contraction(shell, r2);
      for (int row = 0; row < 2 * shell.l + 1; ++row)
        values.push_back(radial * solid_harmonic(shell.l, row, x, y, z));
    } else {
      for (const Component& c : molden_cartesian_order(shell.l))
        values.push_back(cartesian_contraction(shell, c, r2) * std::pow(x, c.x) * std::pow(y, c.y) *
                         std::pow(z, c.z));
    }
  }
  return values;
}

std::vector<double> evaluate_orbitals(const Wavefunction& wfn, const GridSpec& grid,
                                      const std::vector<OrbitalRef>& orbitals, int threads) {
  const std::size_t n_points = grid.point_count();
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  std::vector<double> out(n_points * orbitals.size(), 0.0);
  const std::size_t rows = grid.counts[0] * grid.counts[1];
  parallel_for(rows, threads, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t row = begin; row < end; ++row)
      for (std::size_t k = 0; k < grid.counts[2]; ++k) {
        const auto chi = basis_values(wfn, grid_point(grid, row / grid.counts[1], row % grid.counts[1], k));
        for (std::size_t o = 0; o < orbitals.size(); ++o) {
          const OrbitalSet& set = orbitals[o].spin == Spin::alpha ? wfn.alpha : wfn.beta;
          const double* c = &set.coefficients.at(orbitals[o].index * n);
          double psi = 0;
          for (std::size_t f = 0; f < n; ++f) psi += c[f] * chi[f];
          out[o * n_points + row * grid.counts[2] + k] = psi;
        }
      }
  });
  return out;
}

std::vector<double> evaluate_density(const Wavefunction& wfn, const GridSpec& grid, DensityKind kind,
                                     int threads) {
  const std::size_t n_points = grid.point_count();
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  std::vector<double> out(n_points, 0.0);
  const std::size_t rows = grid.counts[0] * grid.counts[1];
  parallel_for(rows, threads, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t row = begin; row < end; ++row)
      for (std::size_t k = 0; k < grid.counts[2]; ++k) {
        const auto chi = basis_values(wfn, grid_point(grid, row / grid.counts[1], row % grid.counts[1], k));
        double rho = 0;
        auto add = [&](const OrbitalSet& set, double sign) {
          for (std::size_t o = 0; o < set.count(); ++o) {
            if (set.occupations[o] == 0) continue;
            double psi = 0;
            for (std::size_t f = 0; f < n; ++f) psi += set.coefficients[o * n + f] * chi[f];
            rho += sign * set.occupations[o] * psi * psi;
          }
        };
        if (!wfn.unrestricted()) {
          // Restricted: occupations count both spins (2 = doubly occupied, 1 = singly: alpha).
          if (kind == DensityKind::total)
            add(wfn.alpha, 1.0);
          else {
            for (std::size_t o = 0; o < wfn.alpha.count(); ++o) {
              const double occ = wfn.alpha.occupations[o];
              if (occ == 0) continue;
              double psi = 0;
              for (std::size_t f = 0; f < n; ++f) psi += wfn.alpha.coefficients[o * n + f] * chi[f];
              const double alpha_occ = std::min(occ, 1.0), beta_occ = std::max(occ - 1.0, 0.0);
              const double w = kind == DensityKind::alpha  ? alpha_occ
                               : kind == DensityKind::beta ? beta_occ
                                                           : alpha_occ - beta_occ;
              rho += w * psi * psi;
            }
          }
        } else {
          if (kind != DensityKind::beta) add(wfn.alpha, 1.0);
          if (kind == DensityKind::total || kind == DensityKind::beta) add(wfn.beta, 1.0);
          if (kind == DensityKind::spin) add(wfn.beta, -1.0);
        }
        out[row * grid.counts[2] + k] = rho;
      }
  });
  return out;
}

}  // namespace molaccel::orbital::reference

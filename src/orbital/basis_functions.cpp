#include "orbital/basis_functions.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <unordered_map>

namespace molaccel::orbital::detail {

const std::vector<CartesianPower>& cartesian_powers(int l) {
  constexpr std::size_t kTypes = max_angular_momentum + 1;
  static const std::array<std::vector<CartesianPower>, kTypes> table = [] {
    std::array<std::vector<CartesianPower>, kTypes> t;
    for (int k = 0; k < static_cast<int>(kTypes); ++k)
      for (int c = 0; c < cartesian_count(k); ++c)
        t[std::size_t(k)].push_back(
            {kCartesianPowers[k][c][0], kCartesianPowers[k][c][1], kCartesianPowers[k][c][2]});
    return t;
  }();
  MOLACCEL_EXPECTS(l >= 0 && l <= max_angular_momentum, "angular momentum out of range");
  return table[static_cast<std::size_t>(l)];
}

double double_factorial_odd(int n) {  // (2n-1)!!
  double result = 1;
  for (int k = 2 * n - 1; k > 1; k -= 2) result *= k;
  return result;
}

namespace {

double binomial(int n, int k) {
  if (k < 0 || k > n) return 0;
  double result = 1;
  for (int i = 1; i <= k; ++i) result = result * (n - k + i) / i;
  return result;
}

int component_index(int l, int px, int py, int pz) {
  const auto& powers = cartesian_powers(l);
  for (std::size_t c = 0; c < powers.size(); ++c)
    if (powers[c].x == px && powers[c].y == py && powers[c].z == pz) return static_cast<int>(c);
  return -1;
}

constexpr int kPowers = max_angular_momentum + 1;

// Obara-Saika overlap of 1-D Gaussians x_A^i exp(-a x_A^2) and x_B^j exp(-b x_B^2), all i, j <= 6.
void overlap_1d(double a, double b, double xa, double xb, double table[kPowers][kPowers]) {
  const double p = a + b;
  const double xp = (a * xa + b * xb) / p;
  const double pa = xp - xa, pb = xp - xb;
  const double ab = xa - xb;
  const double half_p = 0.5 / p;
  table[0][0] = std::sqrt(std::numbers::pi / p) * std::exp(-a * b / p * ab * ab);
  for (int i = 0; i < kPowers; ++i) {
    for (int j = 0; j < kPowers; ++j) {
      if (i == 0 && j == 0) continue;
      double value;
      if (i > 0) {
        value = pa * table[i - 1][j];
        if (i > 1) value += half_p * (i - 1) * table[i - 2][j];
        if (j > 0) value += half_p * j * table[i - 1][j - 1];
      } else {
        value = pb * table[i][j - 1];
        if (j > 1) value += half_p * (j - 1) * table[i][j - 2];
      }
      table[i][j] = value;
    }
  }
}

}  // namespace

std::vector<double> solid_harmonic_expansion(int l) {
  const int n_cart = cartesian_count(l);
  std::vector<double> expansion(static_cast<std::size_t>((2 * l + 1) * n_cart), 0.0);
  for (int row = 0; row < 2 * l + 1; ++row) {
    // Molden order: 0, +1, -1, +2, -2, ...
    const int m = row == 0 ? 0 : ((row % 2 == 1) ? (row + 1) / 2 : -(row / 2));
    const int am = std::abs(m);
    const int v2_start = m >= 0 ? 0 : 1;  // 2*v runs over even (m >= 0) or odd (m < 0) values
    for (int t = 0; t <= (l - am) / 2; ++t) {
      for (int u = 0; u <= t; ++u) {
        for (int v2 = v2_start; v2 <= am; v2 += 2) {
          const int sign_exponent = t + (v2 - v2_start) / 2;
          const double c = ((sign_exponent % 2) ? -1.0 : 1.0) * std::pow(0.25, t) * binomial(l, t) *
                           binomial(l - t, am + t) * binomial(t, u) * binomial(am, v2);
          const int px = 2 * t + am - 2 * u - v2;
          const int py = 2 * u + v2;
          const int pz = l - 2 * t - am;
          const int index = component_index(l, px, py, pz);
          MOLACCEL_EXPECTS(index >= 0, "solid harmonic expansion: bad component");
          expansion[static_cast<std::size_t>(row * n_cart + index)] += c;
        }
      }
    }
  }
  return expansion;
}

double axis_primitive_norm(double alpha, int l) {
  return std::pow(2.0 * alpha / std::numbers::pi, 0.75) * std::pow(4.0 * alpha, 0.5 * l) /
         std::sqrt(double_factorial_odd(l));
}

std::vector<double> shell_overlap(const ExpandedShell& a, const ExpandedShell& b) {
  const auto& pa = cartesian_powers(a.l);
  const auto& pb = cartesian_powers(b.l);
  std::vector<double> cart(static_cast<std::size_t>(a.components * b.components), 0.0);
  double tx[kPowers][kPowers], ty[kPowers][kPowers], tz[kPowers][kPowers];
  for (std::size_t i = 0; i < a.alpha.size(); ++i) {
    for (std::size_t j = 0; j < b.alpha.size(); ++j) {
      overlap_1d(a.alpha[i], b.alpha[j], a.center[0], b.center[0], tx);
      overlap_1d(a.alpha[i], b.alpha[j], a.center[1], b.center[1], ty);
      overlap_1d(a.alpha[i], b.alpha[j], a.center[2], b.center[2], tz);
      const double scale = a.radial[i] * b.radial[j];
      for (int c = 0; c < a.components; ++c)
        for (int d = 0; d < b.components; ++d)
          cart[static_cast<std::size_t>(c * b.components + d)] +=
              scale * tx[pa[c].x][pb[d].x] * ty[pa[c].y][pb[d].y] * tz[pa[c].z][pb[d].z];
    }
  }
  std::vector<double> result(static_cast<std::size_t>(a.functions * b.functions), 0.0);
  for (int f = 0; f < a.functions; ++f)
    for (int g = 0; g < b.functions; ++g) {
      double sum = 0;
      for (int c = 0; c < a.components; ++c) {
        const double wf = a.weight[static_cast<std::size_t>(f * a.components + c)];
        if (wf == 0) continue;
        for (int d = 0; d < b.components; ++d)
          sum += wf * cart[static_cast<std::size_t>(c * b.components + d)] *
                 b.weight[static_cast<std::size_t>(g * b.components + d)];
      }
      result[static_cast<std::size_t>(f * b.functions + g)] = sum;
    }
  return result;
}

std::vector<ExpandedShell> expand_shells(const Wavefunction& wavefunction) {
  std::vector<ExpandedShell> expanded;
  expanded.reserve(wavefunction.shells.size());
  // Atoms of one element carry the same shells, and a shell's normalised weights depend only on l,
  // pure, exponents and contraction coefficients: each distinct shell is normalised once (C60:
  // 9 of 540), the others copy its weights. Exact: the same computation, done once.
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> seen;  // shell hash -> expanded indices
  const auto same_shell = [](const Shell& a, const Shell& b) {
    return a.l == b.l && a.pure == b.pure && a.exponents == b.exponents && a.coefficients == b.coefficients;
  };
  for (const Shell& shell : wavefunction.shells) {
    ExpandedShell e;
    e.atom = shell.atom;
    e.l = shell.l;
    e.center = wavefunction.atoms.at(static_cast<std::size_t>(shell.atom)).position;
    e.alpha = shell.exponents;
    e.radial.resize(shell.exponents.size());
    for (std::size_t p = 0; p < shell.exponents.size(); ++p)
      e.radial[p] = shell.coefficients[p] * axis_primitive_norm(shell.exponents[p], shell.l);
    e.components = cartesian_count(shell.l);
    e.functions = shell.function_count();
    std::uint64_t key =
        1469598103934665603ull ^ static_cast<std::uint64_t>(shell.l * 2 + (shell.pure ? 1 : 0));
    for (const auto* values : {&shell.exponents, &shell.coefficients})
      for (const double v : *values) {
        std::uint64_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        key = (key ^ bits) * 1099511628211ull;
      }
    auto& candidates = seen[key];
    const std::size_t* twin = nullptr;
    for (const std::size_t& i : candidates)
      if (same_shell(wavefunction.shells[i], shell)) twin = &i;
    if (twin) {
      e.weight = expanded[*twin].weight;
      expanded.push_back(std::move(e));
      continue;
    }
    candidates.push_back(expanded.size());
    if (shell.pure) {
      e.weight = solid_harmonic_expansion(shell.l);
    } else {
      e.weight.assign(static_cast<std::size_t>(e.functions * e.components), 0.0);
      for (int c = 0; c < e.components; ++c) e.weight[static_cast<std::size_t>(c * e.components + c)] = 1.0;
    }
    // Unit self-overlap for every function.
    const std::vector<double> self = shell_overlap(e, e);
    for (int f = 0; f < e.functions; ++f) {
      const double norm2 = self[static_cast<std::size_t>(f * e.functions + f)];
      const double scale = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0;
      for (int c = 0; c < e.components; ++c)
        e.weight[static_cast<std::size_t>(f * e.components + c)] *= scale;
    }
    expanded.push_back(std::move(e));
  }
  return expanded;
}

}  // namespace molaccel::orbital::detail

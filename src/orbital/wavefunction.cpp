// Wavefunction helpers: the overlap matrix, the orthonormality check with writer fixes, and
// orbital names (homo, lumo+1, beta:12).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "orbital/basis_functions.hpp"

namespace molaccel::orbital {

int Wavefunction::function_count() const {
  int n = 0;
  for (const Shell& shell : shells) n += shell.function_count();
  return n;
}

double Wavefunction::electron_count() const {
  double n = 0;
  for (double occ : alpha.occupations) n += occ;
  for (double occ : beta.occupations) n += occ;
  return n;
}

std::vector<double> overlap_matrix(const Wavefunction& wavefunction) {
  const auto shells = detail::expand_shells(wavefunction);
  const std::size_t n = static_cast<std::size_t>(wavefunction.function_count());
  std::vector<double> s(n * n, 0.0);
  std::size_t row = 0;
  for (std::size_t a = 0; a < shells.size(); ++a) {
    std::size_t col = row;
    for (std::size_t b = a; b < shells.size(); ++b) {
      const auto block = detail::shell_overlap(shells[a], shells[b]);
      for (int f = 0; f < shells[a].functions; ++f)
        for (int g = 0; g < shells[b].functions; ++g) {
          const double v = block[static_cast<std::size_t>(f * shells[b].functions + g)];
          s[(row + f) * n + col + g] = v;
          s[(col + g) * n + row + f] = v;
        }
      col += static_cast<std::size_t>(shells[b].functions);
    }
    row += static_cast<std::size_t>(shells[a].functions);
  }
  return s;
}

namespace {

double deviation_with(const std::vector<double>& s, std::size_t n, const OrbitalSet& orbitals) {
  const std::size_t m = orbitals.count();
  if (m == 0) return 0;
  // sc[o][i] = sum_j S[i][j] C[o][j]; then D[o][q] = sum_i C[o][i] sc[q][i].
  std::vector<double> sc(m * n, 0.0);
  for (std::size_t o = 0; o < m; ++o) {
    const double* c = &orbitals.coefficients[o * n];
    double* out = &sc[o * n];
    for (std::size_t i = 0; i < n; ++i) {
      const double* srow = &s[i * n];
      double sum = 0;
      for (std::size_t j = 0; j < n; ++j) sum += srow[j] * c[j];
      out[i] = sum;
    }
  }
  double worst = 0;
  for (std::size_t o = 0; o < m; ++o)
    for (std::size_t q = o; q < m; ++q) {
      const double* c = &orbitals.coefficients[o * n];
      const double* t = &sc[q * n];
      double sum = 0;
      for (std::size_t i = 0; i < n; ++i) sum += c[i] * t[i];
      worst = std::max(worst, std::abs(sum - (o == q ? 1.0 : 0.0)));
      if (!std::isfinite(sum)) return INFINITY;
    }
  return worst;
}

double wavefunction_deviation(const Wavefunction& wfn) {
  const auto s = overlap_matrix(wfn);
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  return std::max(deviation_with(s, n, wfn.alpha), deviation_with(s, n, wfn.beta));
}

// The writer conventions we know how to undo. Each is a combination of independent changes.
enum FixFlags : unsigned {
  kCartesianAxisNorm = 1,         // Cartesian components normalised like x^l (Psi4 <= 1.3.2, CFOUR)
  kCartesianAxisNormInverse = 2,  // the opposite scaling
  kOrcaSigns = 4,                 // ORCA: m = +-3 and +-4 spherical functions with opposite sign
  kUnnormalisedContraction = 8,   // MOs refer to the contraction before its renormalisation
  kRawPrimitives = 16,            // contraction coefficients refer to unnormalised primitives
  // Turbomole (tm2molden): the MO coefficients of every component of a Cartesian shell of l >= 2
  // are too small by sqrt((2l-1)!!) (sqrt 3, sqrt 15, sqrt 105 for d, f, g), the same factor for
  // xx and xy; iodata's Molden loader and Molden2AIM scale Turbomole's Cartesian d/f/g by it.
  kTurbomoleCartesian = 32,
};

struct Fix {
  const char* name;
  unsigned flags;
  const char* description;
};

constexpr Fix kFixes[] = {
    {"none", 0, "MO coefficients orthonormal as read"},
    {"cartesian-axis-normalisation", kCartesianAxisNorm,
     "Cartesian functions all normalised like x^l (Psi4 <= 1.3.2 Cartesian output, CFOUR)"},
    {"cartesian-component-normalisation", kCartesianAxisNormInverse,
     "Cartesian components scaled by the inverse axis ratio"},
    {"orca", kOrcaSigns, "ORCA: spherical f/g functions with m = +-3, +-4 have the opposite sign"},
    {"orca-raw-primitives", kOrcaSigns | kRawPrimitives,
     "ORCA: signs of m = +-3, +-4 and contraction coefficients over unnormalised primitives"},
    {"unnormalised-contractions", kUnnormalisedContraction,
     "MO coefficients refer to contractions that were not renormalised (Turbomole, Molpro)"},
    {"raw-primitives", kRawPrimitives,
     "contraction coefficients refer to unnormalised primitives (CFOUR, some NWChem output)"},
    {"unnormalised-contractions+cartesian-axis", kUnnormalisedContraction | kCartesianAxisNorm,
     "contractions not renormalised and Cartesian functions normalised like x^l"},
    {"raw-primitives+cartesian-axis", kRawPrimitives | kCartesianAxisNorm,
     "unnormalised primitives and Cartesian functions normalised like x^l (CFOUR Cartesian)"},
    // Last: on files without Cartesian shells of l >= 2 these equal earlier entries.
    {"turbomole", kTurbomoleCartesian,
     "Turbomole: Cartesian d, f, g, ... MO coefficients smaller by sqrt((2l-1)!!) (sqrt 3, sqrt 15, sqrt "
     "105)"},
    {"turbomole+unnormalised-contractions", kTurbomoleCartesian | kUnnormalisedContraction,
     "Turbomole's Cartesian factor and contractions that were not renormalised"},
};

void scale_orbitals(OrbitalSet& set, std::size_t n, std::size_t function, double factor) {
  for (std::size_t o = 0; o < set.count(); ++o) set.coefficients[o * n + function] *= factor;
}

Wavefunction apply_fix(const Wavefunction& input, unsigned flags) {
  Wavefunction wfn = input;
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  std::size_t first = 0;
  for (Shell& shell : wfn.shells) {
    const int nf = shell.function_count();
    if (flags & kRawPrimitives) {
      for (std::size_t p = 0; p < shell.exponents.size(); ++p)
        shell.coefficients[p] /= detail::axis_primitive_norm(shell.exponents[p], shell.l);
    }
    if (flags & kUnnormalisedContraction) {
      double norm2 = 0;  // self-overlap of sum_p d_p g_p with normalised primitives g_p
      for (std::size_t p = 0; p < shell.exponents.size(); ++p)
        for (std::size_t q = 0; q < shell.exponents.size(); ++q) {
          const double a = shell.exponents[p], b = shell.exponents[q];
          norm2 += shell.coefficients[p] * shell.coefficients[q] *
                   std::pow(2.0 * std::sqrt(a * b) / (a + b), shell.l + 1.5);
        }
      for (int f = 0; f < nf; ++f) {
        scale_orbitals(wfn.alpha, n, first + f, std::sqrt(norm2));
        scale_orbitals(wfn.beta, n, first + f, std::sqrt(norm2));
      }
    }
    if (!shell.pure && shell.l >= 2 && (flags & (kCartesianAxisNorm | kCartesianAxisNormInverse))) {
      const auto& powers = detail::cartesian_powers(shell.l);
      for (int f = 0; f < nf; ++f) {
        const double ratio =
            detail::double_factorial_odd(powers[f].x) * detail::double_factorial_odd(powers[f].y) *
            detail::double_factorial_odd(powers[f].z) / detail::double_factorial_odd(shell.l);
        const double factor = (flags & kCartesianAxisNorm) ? std::sqrt(ratio) : 1.0 / std::sqrt(ratio);
        scale_orbitals(wfn.alpha, n, first + f, factor);
        scale_orbitals(wfn.beta, n, first + f, factor);
      }
    }
    if (!shell.pure && shell.l >= 2 && (flags & kTurbomoleCartesian)) {
      const double factor = std::sqrt(detail::double_factorial_odd(shell.l));
      for (int f = 0; f < nf; ++f) {
        scale_orbitals(wfn.alpha, n, first + f, factor);
        scale_orbitals(wfn.beta, n, first + f, factor);
      }
    }
    if (shell.pure && shell.l >= 3 && (flags & kOrcaSigns)) {
      for (int f = 5; f < nf; ++f) {  // rows 5, 6 are m = +-3; rows 7, 8 are m = +-4
        scale_orbitals(wfn.alpha, n, first + f, -1.0);
        scale_orbitals(wfn.beta, n, first + f, -1.0);
      }
    }
    first += static_cast<std::size_t>(nf);
  }
  return wfn;
}

}  // namespace

double orthonormality_deviation(const Wavefunction& wavefunction, const OrbitalSet& orbitals) {
  const auto s = overlap_matrix(wavefunction);
  return deviation_with(s, static_cast<std::size_t>(wavefunction.function_count()), orbitals);
}

void check_and_fix_normalisation(Wavefunction& wavefunction, double tolerance) {
  NormalisationReport report;
  for (const Fix& fix : kFixes) {
    Wavefunction candidate = fix.flags ? apply_fix(wavefunction, fix.flags) : wavefunction;
    const double deviation = wavefunction_deviation(candidate);
    if (fix.flags == 0) report.deviation_as_read = deviation;
    report.tried.push_back(fmt::format("{}: {:.3g}", fix.name, deviation));
    if (deviation <= tolerance) {
      report.fix = fix.name;
      report.fix_description = fix.description;
      report.deviation_after_fix = deviation;
      if (fix.flags) wavefunction = std::move(candidate);
      wavefunction.normalisation = std::move(report);
      if (fix.flags)
        log_info("{}: applied normalisation fix '{}' ({}); max |C^T S C - I| {:.3g} -> {:.3g}",
                 wavefunction.source, fix.name, fix.description, wavefunction.normalisation.deviation_as_read,
                 deviation);
      return;
    }
  }
  std::string tried;
  for (const auto& t : report.tried) tried += (tried.empty() ? "" : ", ") + t;
  throw InputError(wavefunction.source, 0,
                   fmt::format("molecular orbitals are not orthonormal (max |C^T S C - I| = {:.3g} > "
                               "{:.3g}) and no known writer fix repairs them; tried {}",
                               report.deviation_as_read, tolerance, tried));
}

// ---------------------------------------------------------------------------------------------
// Orbital names.
// ---------------------------------------------------------------------------------------------
OrbitalRef parse_orbital(std::string_view text, const Wavefunction& wfn) {
  const std::string original(text);
  auto fail = [&](const std::string& why) -> OrbitalRef {
    throw InputError("--orbital", 0, fmt::format("'{}': {}", original, why));
  };
  OrbitalRef ref;
  auto strip_prefix = [&](std::string_view prefix) {
    if (text.substr(0, prefix.size()) == prefix) {
      text.remove_prefix(prefix.size());
      return true;
    }
    return false;
  };
  if (strip_prefix("alpha:") || strip_prefix("a:"))
    ref.spin = Spin::alpha;
  else if (strip_prefix("beta:") || strip_prefix("b:"))
    ref.spin = Spin::beta;
  const OrbitalSet& set = ref.spin == Spin::alpha ? wfn.alpha : wfn.beta;
  if (ref.spin == Spin::beta && !wfn.unrestricted())
    return fail("this wavefunction is restricted (no beta orbitals)");
  if (set.count() == 0) return fail("no orbitals in the file");

  auto parse_int = [&](std::string_view digits, long& value) {
    if (digits.empty()) return false;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return ec == std::errc() && ptr == digits.data() + digits.size();
  };
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.rfind("homo", 0) == 0 || lower.rfind("lumo", 0) == 0) {
    // Order by energy: files need not list orbitals sorted.
    std::vector<std::size_t> order(set.count());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return set.energies[a] < set.energies[b]; });
    long homo = -1;
    for (std::size_t k = 0; k < order.size(); ++k)
      if (set.occupations[order[k]] > 1e-8) homo = static_cast<long>(k);
    long offset = 0;
    std::string_view rest = std::string_view(lower).substr(4);
    if (!rest.empty()) {
      const char sign = rest.front();
      if ((sign != '+' && sign != '-') || !parse_int(rest.substr(1), offset))
        return fail("expected homo, homo-N, lumo or lumo+N");
      if (sign == '-') offset = -offset;
    }
    const bool is_homo = lower[0] == 'h';
    if (is_homo && homo < 0) return fail("no occupied orbital");
    const long position = (is_homo ? homo : homo + 1) + offset;
    if (position < 0 || position >= static_cast<long>(order.size()))
      return fail(fmt::format("out of range (the file has {} orbitals, HOMO at {})", order.size(),
                              homo >= 0 ? order[static_cast<std::size_t>(homo)] + 1 : 0));
    ref.index = order[static_cast<std::size_t>(position)];
    return ref;
  }
  long index = 0;
  if (!parse_int(lower, index)) return fail("expected homo, lumo, homo-N, lumo+N or a 1-based index");
  if (index < 1 || index > static_cast<long>(set.count()))
    return fail(fmt::format("index out of range 1..{}", set.count()));
  ref.index = static_cast<std::size_t>(index - 1);
  return ref;
}

std::string describe_orbital(const OrbitalRef& ref, const Wavefunction& wfn) {
  const OrbitalSet& set = ref.spin == Spin::alpha ? wfn.alpha : wfn.beta;
  return fmt::format("{}{} (E = {:.6f} Eh, occ = {:.3f})",
                     wfn.unrestricted() ? (ref.spin == Spin::alpha ? "alpha " : "beta ") : "", ref.index + 1,
                     set.energies.at(ref.index), set.occupations.at(ref.index));
}

// ---------------------------------------------------------------------------------------------
// Grids.
// ---------------------------------------------------------------------------------------------
double GridSpec::voxel_volume() const {
  const auto& a = axes;
  return std::abs(a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
                  a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
                  a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]));
}

GridSpec explicit_grid(std::array<double, 3> origin_angstrom, std::array<double, 3> size_angstrom,
                       double spacing_angstrom) {
  if (!(spacing_angstrom > 0) || !std::isfinite(spacing_angstrom))
    throw InputError("--spacing", 0,
                     fmt::format("spacing must be a positive number (got {})", spacing_angstrom));
  GridSpec grid;
  const double h = spacing_angstrom / bohr_in_angstrom;
  for (int d = 0; d < 3; ++d) {
    if (!std::isfinite(origin_angstrom[d]))
      throw InputError("--origin", 0, fmt::format("origin must be finite (got {})", origin_angstrom[d]));
    if (!(size_angstrom[d] >= 0) || !std::isfinite(size_angstrom[d]))
      throw InputError("--size", 0,
                       fmt::format("size must be a non-negative number (got {})", size_angstrom[d]));
    grid.origin[d] = origin_angstrom[d] / bohr_in_angstrom;
    grid.axes[d] = {0, 0, 0};
    grid.axes[d][d] = h;
    // Counted in double first: a tiny spacing must be refused, not overflow the integer count.
    const double points = std::floor(size_angstrom[d] / spacing_angstrom + 1e-9) + 1;
    if (!(points <= 1e6))
      throw InputError(
          "--spacing", 0,
          fmt::format("{:.3g} points along one axis ({} A at spacing {} A): use a larger --spacing", points,
                      size_angstrom[d], spacing_angstrom));
    grid.counts[d] = static_cast<std::size_t>(points);
  }
  const double points = static_cast<double>(grid.counts[0]) * grid.counts[1] * grid.counts[2];
  if (points > 4e9)
    throw InputError("--spacing", 0, fmt::format("grid of {:.3g} points is too large", points));
  return grid;
}

GridSpec automatic_grid(const Wavefunction& wfn, double padding_angstrom, double spacing_angstrom) {
  if (wfn.atoms.empty()) throw InputError(wfn.source, 0, "no atoms: cannot size a grid");
  if (!(padding_angstrom >= 0)) throw InputError("--padding", 0, "padding must be non-negative");
  std::array<double, 3> lo, hi;
  lo.fill(INFINITY);
  hi.fill(-INFINITY);
  for (const Atom& atom : wfn.atoms)
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::min(lo[d], atom.position[d] * bohr_in_angstrom);
      hi[d] = std::max(hi[d], atom.position[d] * bohr_in_angstrom);
    }
  std::array<double, 3> origin, size;
  for (int d = 0; d < 3; ++d) {
    origin[d] = lo[d] - padding_angstrom;
    size[d] = hi[d] - lo[d] + 2 * padding_angstrom;
    // Round the size up to a whole number of steps so the box covers the padding on both sides.
    size[d] = std::ceil(size[d] / spacing_angstrom - 1e-9) * spacing_angstrom;
  }
  return explicit_grid(origin, size, spacing_angstrom);
}

GridSpec grid_of_cube(const std::filesystem::path& cube_path) {
  return read_cube(cube_path).grid;
}

// ---------------------------------------------------------------------------------------------
// Names.
// ---------------------------------------------------------------------------------------------
std::string_view to_string(Backend backend) {
  switch (backend) {
    case Backend::automatic:
      return "auto";
    case Backend::reference:
      return "reference";
    case Backend::cpu:
      return "cpu";
    case Backend::cuda_generic:
      return "cuda-generic";
    case Backend::cuda_jit:
      return "cuda-jit";
  }
  return "?";
}

Backend parse_backend(std::string_view text) {
  for (Backend b :
       {Backend::automatic, Backend::reference, Backend::cpu, Backend::cuda_generic, Backend::cuda_jit})
    if (text == to_string(b)) return b;
  throw InputError("--backend", 0,
                   fmt::format("unknown backend '{}' (auto, reference, cpu, cuda-generic, cuda-jit)", text));
}

std::string_view to_string(DensityKind kind) {
  switch (kind) {
    case DensityKind::total:
      return "total";
    case DensityKind::spin:
      return "spin";
    case DensityKind::alpha:
      return "alpha";
    case DensityKind::beta:
      return "beta";
  }
  return "?";
}

}  // namespace molaccel::orbital

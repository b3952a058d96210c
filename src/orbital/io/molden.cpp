// Molden reader. Sections: [Atoms] (AU|Angs), [GTO], [MO], flags [5D] [5D7F] [5D10F] [7F] [9G]
// [11H] [13I]; anything else ([Title], [Program], [FREQ], ...) is skipped. Fortran 'D' exponents
// are accepted (Molpro, older Turbomole). Shells of the same l share one pure/Cartesian setting, as
// the format defines: no flag = Cartesian; [5D] = [5D7F] = pure d and f; [5D10F] = pure d,
// Cartesian f; [7F] = Cartesian d, pure f; [9G] = pure g. The format defines no flag for h and i
// shells (l = 5, 6), and writers differ: [11H] / [13I] make them pure; without these flags they
// are pure when the orbitals list exactly as many functions as pure h and i shells give (and
// Cartesian otherwise), so both kinds of file read without a guess.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "molaccel/orbital.hpp"
#include "orbital/io/parse_util.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::orbital {

namespace {

using io_util::lower;
using io_util::parse_double;
using io_util::parse_long;
using io_util::split;

struct PendingShell {
  int atom_number = 0;  // 1-based as in the file
  int l = 0;
  std::vector<double> exponents, coefficients;
  std::size_t line = 0;
};

struct PendingOrbital {
  double energy = 0, occupation = 0;
  bool has_occupation = false;
  bool beta = false;
  std::string symmetry;
  std::vector<std::pair<long, double>> coefficients;
  std::size_t line = 0;
};

int angular_momentum_of(std::string_view label) {
  static const std::string_view names = "spdfghi";
  if (label.size() == 1) {
    const auto pos = names.find(static_cast<char>(std::tolower(static_cast<unsigned char>(label[0]))));
    if (pos != std::string_view::npos) return static_cast<int>(pos);
  }
  return -1;
}

Wavefunction parse_molden(io::LineReader& in, const ReadOptions& options) {
  Wavefunction wfn;
  wfn.source = in.name();
  wfn.format = "molden";
  std::vector<PendingShell> shells;
  std::vector<PendingOrbital> orbitals;
  std::map<int, int> atom_number_to_index;  // [Atoms] second column -> index
  bool pure_d = false, pure_f = false, pure_g = false, pure_h = false, pure_i = false;
  bool seen_header = false, seen_atoms = false, seen_gto = false, seen_mo = false;
  enum class Section { none, atoms, gto, mo, other } section = Section::none;
  double atom_unit = 1.0;

  // [GTO] state
  int gto_atom = 0;
  PendingShell* open_shell = nullptr;
  std::size_t primitives_left = 0;
  bool sp_shell = false;
  double scale = 1.0;
  // [MO] state
  PendingOrbital* open_orbital = nullptr;
  bool orbital_has_coefficients = false;

  std::string_view line;
  while (in.next(line)) {
    const std::string_view trimmed = io_util::trim(line);
    if (trimmed.empty()) continue;
    if (trimmed.front() == '[') {
      if (primitives_left > 0)
        in.fail(fmt::format("shell ends early: {} primitive line(s) missing", primitives_left));
      const auto close = trimmed.find(']');
      if (close == std::string_view::npos) in.fail("section header without ']'");
      const std::string name = lower(trimmed.substr(1, close - 1));
      const std::string rest = lower(io_util::trim(trimmed.substr(close + 1)));
      section = Section::other;
      if (name == "molden format") {
        seen_header = true;
      } else if (name == "atoms") {
        if (seen_atoms) in.fail("second [Atoms] section");
        seen_atoms = true;
        section = Section::atoms;
        if (rest.find("angs") != std::string::npos)
          atom_unit = 1.0 / bohr_in_angstrom;
        else if (rest.find("au") != std::string::npos || rest.empty())
          atom_unit = 1.0;
        else
          in.fail(fmt::format("unknown [Atoms] unit '{}' (AU or Angs)", rest));
      } else if (name == "gto") {
        seen_gto = true;
        section = Section::gto;
      } else if (name == "mo") {
        seen_mo = true;
        section = Section::mo;
      } else if (name == "5d" || name == "5d7f") {
        pure_d = pure_f = true;
      } else if (name == "5d10f") {
        pure_d = true;
        pure_f = false;
      } else if (name == "7f") {
        pure_f = true;
      } else if (name == "9g") {
        pure_g = true;
      } else if (name == "11h") {
        pure_h = true;
      } else if (name == "13i") {
        pure_i = true;
      } else if (name == "sto") {
        in.fail("Slater-type orbitals ([STO]) are not supported");
      } else if (name == "program") {
        wfn.writer = std::string(io_util::trim(trimmed.substr(close + 1)));
      }
      continue;
    }
    switch (section) {
      case Section::none:
        if (!seen_header) in.fail("not a Molden file (expected '[Molden Format]')");
        break;
      case Section::other:
        if (wfn.writer.empty()) {
          const std::string l = lower(trimmed);
          for (const char* writer :
               {"psi4", "orca", "molpro", "turbomole", "nwchem", "pyscf", "cfour", "gaussian"})
            if (l.find(writer) != std::string::npos) {
              wfn.writer = writer;
              break;
            }
        }
        break;
      case Section::atoms: {
        const auto fields = split(trimmed);
        if (fields.size() < 6) in.fail("atom line needs: label number Z x y z");
        Atom atom;
        atom.label = std::string(fields[0]);
        long number = 0, z = 0;
        if (!parse_long(fields[1], number)) in.fail(fmt::format("bad atom number '{}'", fields[1]));
        if (!parse_long(fields[2], z) || z < 0 || z > 200)
          in.fail(fmt::format("bad atomic number '{}'", fields[2]));
        atom.atomic_number = static_cast<int>(z);
        atom.charge = static_cast<double>(z);
        for (int d = 0; d < 3; ++d) {
          double v = 0;
          if (!parse_double(fields[3 + d], v)) in.fail(fmt::format("bad coordinate '{}'", fields[3 + d]));
          atom.position[d] = v * atom_unit;
        }
        if (!atom_number_to_index.emplace(static_cast<int>(number), static_cast<int>(wfn.atoms.size()))
                 .second)
          in.fail(fmt::format("atom number {} appears twice", number));
        wfn.atoms.push_back(std::move(atom));
        break;
      }
      case Section::gto: {
        const auto fields = split(trimmed);
        if (primitives_left > 0) {
          if (fields.size() < (sp_shell ? 3u : 2u)) in.fail("primitive line needs: exponent coefficient");
          double exponent = 0, c1 = 0, c2 = 0;
          if (!parse_double(fields[0], exponent) || !(exponent > 0))
            in.fail(fmt::format("bad exponent '{}'", fields[0]));
          if (!parse_double(fields[1], c1)) in.fail(fmt::format("bad coefficient '{}'", fields[1]));
          if (sp_shell && !parse_double(fields[2], c2))
            in.fail(fmt::format("bad coefficient '{}'", fields[2]));
          exponent *= scale * scale;
          open_shell->exponents.push_back(exponent);
          open_shell->coefficients.push_back(c1);
          if (sp_shell) {
            shells.back().exponents.push_back(exponent);
            shells.back().coefficients.push_back(c2);
          }
          --primitives_left;
          break;
        }
        long first = 0;
        if (fields.size() >= 1 && fields.size() <= 2 && parse_long(fields[0], first)) {
          gto_atom = static_cast<int>(first);  // "atom-number 0"
          break;
        }
        if (fields.size() < 2) in.fail("shell line needs: type primitive-count [scale]");
        if (gto_atom == 0) in.fail("shell before an atom number line in [GTO]");
        const std::string type = lower(fields[0]);
        long count = 0;
        if (!parse_long(fields[1], count) || count < 1 || count > 1000)
          in.fail(fmt::format("bad primitive count '{}'", fields[1]));
        scale = 1.0;
        if (fields.size() >= 3 && (!parse_double(fields[2], scale) || !(scale > 0)))
          in.fail(fmt::format("bad scale factor '{}'", fields[2]));
        sp_shell = type == "sp";
        const int l = sp_shell ? 0 : angular_momentum_of(type);
        if (l < 0) in.fail(fmt::format("unsupported shell type '{}' (s, p, sp, d, f, g, h, i)", fields[0]));
        shells.push_back({gto_atom, l, {}, {}, in.line_number()});
        if (sp_shell) shells.push_back({gto_atom, 1, {}, {}, in.line_number()});
        open_shell = &shells[shells.size() - (sp_shell ? 2 : 1)];
        primitives_left = static_cast<std::size_t>(count);
        break;
      }
      case Section::mo: {
        const auto eq = trimmed.find('=');
        if (eq != std::string_view::npos) {
          if (open_orbital == nullptr || orbital_has_coefficients) {
            orbitals.emplace_back();
            open_orbital = &orbitals.back();
            open_orbital->line = in.line_number();
            orbital_has_coefficients = false;
          }
          const std::string key = lower(io_util::trim(trimmed.substr(0, eq)));
          const std::string_view value = io_util::trim(trimmed.substr(eq + 1));
          if (key == "ene") {
            if (!parse_double(value, open_orbital->energy)) in.fail(fmt::format("bad energy '{}'", value));
          } else if (key == "occup") {
            if (!parse_double(value, open_orbital->occupation) || open_orbital->occupation < -1e-6)
              in.fail(fmt::format("bad occupation '{}'", value));
            open_orbital->has_occupation = true;
          } else if (key == "spin") {
            const std::string spin = lower(value);
            if (spin == "alpha")
              open_orbital->beta = false;
            else if (spin == "beta")
              open_orbital->beta = true;
            else
              in.fail(fmt::format("bad spin '{}' (Alpha or Beta)", value));
          } else if (key == "sym") {
            open_orbital->symmetry = std::string(value);
          }
          break;
        }
        const auto fields = split(trimmed);
        if (open_orbital == nullptr) in.fail("coefficient line before Ene=/Spin=/Occup=");
        long index = 0;
        double value = 0;
        if (fields.size() < 2 || !parse_long(fields[0], index) || index < 1)
          in.fail("coefficient line needs: function-number coefficient");
        if (!parse_double(fields[1], value)) in.fail(fmt::format("bad coefficient '{}'", fields[1]));
        open_orbital->coefficients.emplace_back(index, value);
        orbital_has_coefficients = true;
        break;
      }
    }
  }
  if (primitives_left > 0)
    in.fail(fmt::format("file ends inside a shell ({} primitive line(s) missing)", primitives_left));
  if (!seen_header) in.fail("not a Molden file (no '[Molden Format]' line)");
  if (!seen_atoms || wfn.atoms.empty()) in.fail("no [Atoms] section");
  if (!seen_gto || shells.empty()) in.fail("no [GTO] section (only Gaussian basis sets are supported)");
  if (!seen_mo || orbitals.empty()) in.fail("no [MO] section");

  // h and i shells without [11H] / [13I]: pure when the orbitals list exactly the functions that
  // pure h and i shells give.
  if (!pure_h && !pure_i) {
    long listed = 0, with_cartesian = 0, high = 0;
    for (const PendingOrbital& pending : orbitals)
      for (const auto& entry : pending.coefficients) listed = std::max(listed, entry.first);
    for (const PendingShell& pending : shells) {
      const int l = pending.l;
      const bool pure = (l == 2 && pure_d) || (l == 3 && pure_f) || (l == 4 && pure_g);
      with_cartesian += pure ? 2 * l + 1 : (l + 1) * (l + 2) / 2;
      if (l >= 5) high += (l + 1) * (l + 2) / 2 - (2 * l + 1);
    }
    if (high > 0 && listed == with_cartesian - high) pure_h = pure_i = true;
  }
  for (const PendingShell& pending : shells) {
    const auto atom = atom_number_to_index.find(pending.atom_number);
    if (atom == atom_number_to_index.end())
      throw InputError(wfn.source, pending.line,
                       fmt::format("[GTO] refers to atom {} not in [Atoms]", pending.atom_number));
    Shell shell;
    shell.atom = atom->second;
    shell.l = pending.l;
    shell.pure = (pending.l == 2 && pure_d) || (pending.l == 3 && pure_f) || (pending.l == 4 && pure_g) ||
                 (pending.l == 5 && pure_h) || (pending.l == 6 && pure_i);
    shell.exponents = pending.exponents;
    shell.coefficients = pending.coefficients;
    if (std::all_of(shell.coefficients.begin(), shell.coefficients.end(), [](double c) { return c == 0; }))
      throw InputError(wfn.source, pending.line, "shell with all contraction coefficients zero");
    wfn.shells.push_back(std::move(shell));
  }
  const std::size_t n = static_cast<std::size_t>(wfn.function_count());
  for (const PendingOrbital& pending : orbitals) {
    OrbitalSet& set = pending.beta ? wfn.beta : wfn.alpha;
    set.energies.push_back(pending.energy);
    set.occupations.push_back(pending.occupation);
    set.symmetries.push_back(pending.symmetry);
    const std::size_t base = set.coefficients.size();
    set.coefficients.resize(base + n, 0.0);
    long highest = 0;
    if (pending.coefficients.empty())
      throw InputError(wfn.source, pending.line, "molecular orbital without coefficients (truncated file?)");
    // No default occupation: guessing one (0, or from the energies) would silently give wrong
    // densities and electron counts.
    if (!pending.has_occupation)
      throw InputError(wfn.source, pending.line, "molecular orbital without an 'Occup=' line");
    for (const auto& [index, value] : pending.coefficients) {
      if (static_cast<std::size_t>(index) > n)
        throw InputError(wfn.source, pending.line,
                         fmt::format("coefficient for function {} but the basis has {} functions "
                                     "(wrong [5D]/[7F]/[9G]/[11H]/[13I] flags?)",
                                     index, n));
      set.coefficients[base + static_cast<std::size_t>(index) - 1] = value;
      highest = std::max(highest, index);
    }
    if (static_cast<std::size_t>(highest) != n)
      throw InputError(wfn.source, pending.line,
                       fmt::format("molecular orbital lists functions only up to {} of {} (truncated file "
                                   "or wrong [5D]/[7F]/[9G]/[11H]/[13I] flags?)",
                                   highest, n));
  }
  if (wfn.alpha.count() == 0) in.fail("no alpha orbitals in [MO]");
  if (options.check_normalisation) check_and_fix_normalisation(wfn, options.orthonormality_tolerance);
  return wfn;
}

}  // namespace

Wavefunction read_molden(const std::filesystem::path& path, const ReadOptions& options) {
  io::LineReader in(path);
  return parse_molden(in, options);
}

Wavefunction read_molden_text(std::string_view name, std::string_view content, const ReadOptions& options) {
  io::LineReader in(name, content);
  return parse_molden(in, options);
}

}  // namespace molaccel::orbital

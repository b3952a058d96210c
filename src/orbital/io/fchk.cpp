// Gaussian formatted checkpoint (.fchk) reader. Shell types: 0 s, 1 p, -1 sp, 2/-2 Cartesian/pure
// d, 3/-3 f, 4/-4 g, 5/-5 h, 6/-6 i. Gaussian's pure order (0, +1, -1, +2, -2, ...) and its
// Cartesian s..f orders equal Molden's; Cartesian g is reordered (Gaussian lists zzzz first);
// Cartesian h and i are in Gaussian's order already (ours for l >= 5, basis_functions.hpp). Occupations come
// from the electron counts (restricted: 2 per doubly occupied orbital, 1 for open-shell ROHF orbitals). Blank
// lines between fields and at the end of the file (as real runs write) are skipped; a field that appears
// twice and negative electron counts are errors.
#include <map>

#include "orbital/basis_functions.hpp"
#include "orbital/io/parse_util.hpp"
#include "runtime/text_input.hpp"

namespace molaccel::orbital {

namespace {

using io_util::parse_double;
using io_util::parse_long;
using io_util::split;
using io_util::trim;

struct Field {
  char type = 'R';
  std::vector<double> reals;
  std::vector<long> integers;
  std::size_t line = 0;
};

// Gaussian's Cartesian g order as (x, y, z) powers.
constexpr int kGaussianCartesianG[15][3] = {{0, 0, 4}, {0, 1, 3}, {0, 2, 2}, {0, 3, 1}, {0, 4, 0},
                                            {1, 0, 3}, {1, 1, 2}, {1, 2, 1}, {1, 3, 0}, {2, 0, 2},
                                            {2, 1, 1}, {2, 2, 0}, {3, 0, 1}, {3, 1, 0}, {4, 0, 0}};

// `sniffed`: the format was guessed from the content (read_wavefunction), so a file that is not
// an fchk at its first field header is reported as neither Molden nor fchk.
Wavefunction parse_fchk(io::LineReader& in, const ReadOptions& options, bool sniffed = false) {
  Wavefunction wfn;
  wfn.source = in.name();
  wfn.format = "fchk";
  wfn.writer = "Gaussian";
  std::map<std::string, Field> fields;
  std::string_view line;
  const std::string not_fchk =
      sniffed ? "not a Molden or fchk file (a Molden file starts with '[Molden Format]', an fchk file has a "
                "title line, a job line and then field headers)"
              : "not an fchk file (a title line, a job line and then field headers expected)";
  if (!in.next(line)) in.fail(sniffed ? not_fchk : "empty file");
  if (!in.next(line)) in.fail(sniffed ? not_fchk : "truncated: no job-type line");
  while (in.next(line)) {
    if (trim(line).empty()) continue;  // blank lines, e.g. at the end of files from real runs
    const auto rest =
        line.size() < 44 || line[0] == ' ' ? std::vector<std::string_view>{} : split(line.substr(40));
    const bool header = !rest.empty() && rest[0].size() == 1 &&
                        std::string_view("IRCL").find(rest[0][0]) != std::string_view::npos;
    if (!header && fields.empty() && (sniffed || !io_util::is_text(line))) in.fail(not_fchk);
    if (line.size() < 44 || line[0] == ' ') in.fail("expected a field header (name, type, value or N=count)");
    if (rest.empty()) in.fail("field header without type");
    if (!header) in.fail(fmt::format("unknown field type '{}'", io_util::printable(rest[0])));
    const std::string name(trim(line.substr(0, 40)));
    if (const auto it = fields.find(name); it != fields.end())
      in.fail(fmt::format("field '{}' appears twice (first at line {})", io_util::printable(name),
                          it->second.line));
    Field field;
    field.line = in.line_number();
    const std::string_view type = rest[0];
    field.type = type[0];
    if (rest.size() >= 3 && rest[1] == "N=") {
      long count = 0;
      if (!parse_long(rest[2], count) || count < 0 || count > 500'000'000) in.fail("bad array length");
      std::size_t got = 0;
      const bool numeric = field.type == 'I' || field.type == 'R';
      while (got < static_cast<std::size_t>(count)) {
        if (!in.next(line))
          in.fail(fmt::format("truncated: field '{}' has {} of {} values", name, got, count));
        if (!numeric) {  // character (5 per line) and logical (72 per line) arrays: not needed
          got += field.type == 'C' ? 5 : 72;
          continue;
        }
        for (std::string_view token : split(line)) {
          if (got >= static_cast<std::size_t>(count)) in.fail("more values than N= announced");
          if (field.type == 'I') {
            long v = 0;
            if (!parse_long(token, v)) in.fail(fmt::format("bad integer '{}'", io_util::printable(token)));
            field.integers.push_back(v);
          } else {
            double v = 0;
            if (!parse_double(token, v)) in.fail(fmt::format("bad real '{}'", io_util::printable(token)));
            field.reals.push_back(v);
          }
          ++got;
        }
      }
    } else if (rest.size() >= 2) {
      if (field.type == 'I') {
        long v = 0;
        if (!parse_long(rest[1], v)) in.fail(fmt::format("bad integer '{}'", io_util::printable(rest[1])));
        field.integers.push_back(v);
      } else if (field.type == 'R') {
        double v = 0;
        if (!parse_double(rest[1], v)) in.fail(fmt::format("bad real '{}'", io_util::printable(rest[1])));
        field.reals.push_back(v);
      }
    }
    fields[name] = std::move(field);
  }

  auto need = [&](const std::string& name, char type) -> const Field& {
    const auto it = fields.find(name);
    if (it == fields.end()) throw InputError(wfn.source, 0, fmt::format("missing field '{}'", name));
    if (it->second.type != type)
      throw InputError(wfn.source, it->second.line, fmt::format("field '{}' has the wrong type", name));
    return it->second;
  };
  auto fail_at = [&](const Field& f, const std::string& message) -> void {
    throw InputError(wfn.source, f.line, message);
  };

  const Field& numbers = need("Atomic numbers", 'I');
  const Field& coordinates = need("Current cartesian coordinates", 'R');
  if (coordinates.reals.size() != 3 * numbers.integers.size())
    fail_at(coordinates, "coordinates do not match the atom count");
  const auto charges_it = fields.find("Nuclear charges");
  for (std::size_t a = 0; a < numbers.integers.size(); ++a) {
    Atom atom;
    atom.atomic_number = static_cast<int>(numbers.integers[a]);
    if (atom.atomic_number < 0 || atom.atomic_number > 200) fail_at(numbers, "bad atomic number");
    atom.label = std::to_string(atom.atomic_number);
    atom.charge = atom.atomic_number;
    if (charges_it != fields.end() && charges_it->second.reals.size() == numbers.integers.size())
      atom.charge = charges_it->second.reals[a];
    for (int d = 0; d < 3; ++d) atom.position[d] = coordinates.reals[3 * a + d];
    wfn.atoms.push_back(std::move(atom));
  }

  const Field& types = need("Shell types", 'I');
  const Field& primitives = need("Number of primitives per shell", 'I');
  const Field& to_atom = need("Shell to atom map", 'I');
  const Field& exponents = need("Primitive exponents", 'R');
  const Field& contraction = need("Contraction coefficients", 'R');
  const auto sp_it = fields.find("P(S=P) Contraction coefficients");
  if (primitives.integers.size() != types.integers.size() || to_atom.integers.size() != types.integers.size())
    fail_at(types, "shell arrays have different lengths");
  if (contraction.reals.size() != exponents.reals.size())
    fail_at(contraction, "contraction and exponent counts differ");

  // Per shell in the file: which of our shells it became, and how its functions map to ours.
  std::vector<int> function_map;  // file function index -> our function index
  std::size_t next_primitive = 0;
  int our_functions = 0;
  for (std::size_t s = 0; s < types.integers.size(); ++s) {
    const long type = types.integers[s];
    const long count = primitives.integers[s];
    const long atom = to_atom.integers[s];
    if (type < -max_angular_momentum || type > max_angular_momentum)
      fail_at(types, fmt::format("unsupported shell type {} (-6..6: s, p, sp, d..i)", type));
    if (count < 1 || next_primitive + static_cast<std::size_t>(count) > exponents.reals.size())
      fail_at(primitives, "primitive counts exceed the exponent array");
    if (atom < 1 || atom > static_cast<long>(wfn.atoms.size()))
      fail_at(to_atom, "shell on a non-existent atom");
    auto make = [&](int l, bool pure, const std::vector<double>& coefs) {
      Shell shell;
      shell.atom = static_cast<int>(atom - 1);
      shell.l = l;
      shell.pure = pure && l >= 2;
      shell.exponents.assign(exponents.reals.begin() + static_cast<long>(next_primitive),
                             exponents.reals.begin() + static_cast<long>(next_primitive) + count);
      shell.coefficients.assign(coefs.begin() + static_cast<long>(next_primitive),
                                coefs.begin() + static_cast<long>(next_primitive) + count);
      for (double e : shell.exponents)
        if (!(e > 0)) fail_at(exponents, "non-positive exponent");
      const int n = shell.function_count();
      if (l == 4 && !shell.pure) {
        for (int f = 0; f < 15; ++f) {
          const auto& powers = detail::cartesian_powers(4);
          int ours = -1;
          for (int c = 0; c < 15; ++c)
            if (powers[c].x == kGaussianCartesianG[f][0] && powers[c].y == kGaussianCartesianG[f][1] &&
                powers[c].z == kGaussianCartesianG[f][2])
              ours = c;
          function_map.push_back(our_functions + ours);
        }
      } else {
        for (int f = 0; f < n; ++f) function_map.push_back(our_functions + f);
      }
      our_functions += n;
      wfn.shells.push_back(std::move(shell));
    };
    if (type == -1) {
      if (sp_it == fields.end() || sp_it->second.reals.size() != exponents.reals.size())
        fail_at(types, "SP shell without matching 'P(S=P) Contraction coefficients'");
      make(0, false, contraction.reals);
      make(1, false, sp_it->second.reals);
    } else {
      const int l = static_cast<int>(type < 0 ? -type : type);
      make(l, type < 0, contraction.reals);
    }
    next_primitive += static_cast<std::size_t>(count);
  }
  const std::size_t n = static_cast<std::size_t>(our_functions);
  const auto nbf_it = fields.find("Number of basis functions");
  if (nbf_it != fields.end() && !nbf_it->second.integers.empty() &&
      static_cast<std::size_t>(nbf_it->second.integers[0]) != n)
    fail_at(nbf_it->second, fmt::format("'Number of basis functions' is {} but the shells give {}",
                                        nbf_it->second.integers[0], n));

  long n_alpha = 0, n_beta = 0;
  if (auto it = fields.find("Number of alpha electrons");
      it != fields.end() && !it->second.integers.empty()) {
    n_alpha = it->second.integers[0];
    if (n_alpha < 0) fail_at(it->second, fmt::format("negative number of alpha electrons ({})", n_alpha));
  }
  if (auto it = fields.find("Number of beta electrons"); it != fields.end() && !it->second.integers.empty()) {
    n_beta = it->second.integers[0];
    if (n_beta < 0) fail_at(it->second, fmt::format("negative number of beta electrons ({})", n_beta));
  }
  const bool unrestricted = fields.count("Beta MO coefficients") > 0;

  auto read_set = [&](const char* energies_name, const char* coefficients_name, OrbitalSet& set, bool beta) {
    const Field& energies = need(energies_name, 'R');
    const Field& coefficients = need(coefficients_name, 'R');
    const std::size_t m = energies.reals.size();
    if (coefficients.reals.size() != m * n)
      fail_at(coefficients,
              fmt::format("{} values, expected {} orbitals x {} functions", coefficients.reals.size(), m, n));
    set.energies = energies.reals;
    set.symmetries.assign(m, "");
    set.coefficients.assign(m * n, 0.0);
    set.occupations.assign(m, 0.0);
    for (std::size_t o = 0; o < m; ++o) {
      for (std::size_t f = 0; f < n; ++f)
        set.coefficients[o * n + static_cast<std::size_t>(function_map[f])] = coefficients.reals[o * n + f];
      const long index = static_cast<long>(o);
      if (unrestricted)
        set.occupations[o] = index < (beta ? n_beta : n_alpha) ? 1.0 : 0.0;
      else
        set.occupations[o] = index < n_beta ? 2.0 : (index < n_alpha ? 1.0 : 0.0);
    }
  };
  read_set("Alpha Orbital Energies", "Alpha MO coefficients", wfn.alpha, false);
  if (unrestricted) read_set("Beta Orbital Energies", "Beta MO coefficients", wfn.beta, true);
  if (options.check_normalisation) check_and_fix_normalisation(wfn, options.orthonormality_tolerance);
  return wfn;
}

}  // namespace

Wavefunction read_fchk(const std::filesystem::path& path, const ReadOptions& options) {
  io::LineReader in(path);
  return parse_fchk(in, options);
}

Wavefunction read_fchk_text(std::string_view name, std::string_view content, const ReadOptions& options) {
  io::LineReader in(name, content);
  return parse_fchk(in, options);
}

Wavefunction read_wavefunction(const std::filesystem::path& path, const ReadOptions& options) {
  // Sniff the first non-empty line: Molden files start with [Molden Format].
  io::LineReader in(path);
  std::string_view line;
  bool molden = false;
  while (in.next(line)) {
    const auto t = trim(line);
    if (t.empty()) continue;
    molden = !t.empty() && t.front() == '[';
    break;
  }
  if (molden) return read_molden(path, options);
  io::LineReader fchk(path);
  return parse_fchk(fchk, options, true);
}

}  // namespace molaccel::orbital

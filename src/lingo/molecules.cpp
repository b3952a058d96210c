// SMILES preprocessing and the q-Lingo multiset of a molecule.
#include <algorithm>
#include <cctype>

#include "molaccel/lingo.hpp"

namespace molaccel::lingo {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

std::string preprocess(std::string_view smiles, const Preprocessing& preprocessing) {
  std::string out;
  out.reserve(smiles.size());
  // Halogens first, so that "Cl1" becomes "L0" and the digit rule sees the letter before it.
  std::string halogen_free;
  if (preprocessing.halogens) {
    halogen_free.reserve(smiles.size());
    for (std::size_t i = 0; i < smiles.size(); ++i) {
      if (i + 1 < smiles.size() && smiles[i] == 'C' && smiles[i + 1] == 'l') {
        halogen_free += 'L';
        ++i;
      } else if (i + 1 < smiles.size() && smiles[i] == 'B' && smiles[i + 1] == 'r') {
        halogen_free += 'R';
        ++i;
      } else {
        halogen_free += smiles[i];
      }
    }
    smiles = halogen_free;
  }
  if (preprocessing.digits == DigitMode::all) {
    for (char c : smiles) out += is_digit(c) ? '0' : c;
    return out;
  }
  // Paper rule: a run of digits is kept as written when the character before the run is '+',
  // '-', 'H' or '[' (charge, hydrogen count, isotope); otherwise every digit of the run is a ring
  // closure and becomes '0'. "%nn" (two-digit ring closure) becomes "%0".
  std::size_t i = 0;
  while (i < smiles.size()) {
    const char c = smiles[i];
    if (c == '%' && i + 1 < smiles.size() && is_digit(smiles[i + 1])) {
      out += "%0";
      i += 2;
      if (i < smiles.size() && is_digit(smiles[i])) ++i;  // second digit of %nn
      continue;
    }
    if (!is_digit(c)) {
      out += c;
      ++i;
      continue;
    }
    const char before = i == 0 ? '\0' : smiles[i - 1];
    const bool keep = before == '+' || before == '-' || before == 'H' || before == '[';
    while (i < smiles.size() && is_digit(smiles[i])) {
      out += keep ? smiles[i] : '0';
      ++i;
    }
  }
  return out;
}

std::string smiles_problem(std::string_view smiles) {
  if (smiles.empty()) return "empty SMILES";
  if (smiles.size() > kMaxSmilesLength)
    return fmt::format("SMILES longer than {} characters", kMaxSmilesLength);
  int depth = 0;
  bool in_bracket = false;
  for (std::size_t i = 0; i < smiles.size(); ++i) {
    const auto c = static_cast<unsigned char>(smiles[i]);
    if (c < 0x21 || c > 0x7e) {
      return c >= 0x80 ? fmt::format("non-ASCII byte 0x{:02x} at column {}", c, i + 1)
                       : fmt::format("control byte 0x{:02x} at column {}", c, i + 1);
    }
    switch (c) {
      case '[':
        if (in_bracket) return fmt::format("nested '[' at column {}", i + 1);
        in_bracket = true;
        break;
      case ']':
        if (!in_bracket) return fmt::format("']' without '[' at column {}", i + 1);
        in_bracket = false;
        break;
      case '(':
      case ')':
        if (in_bracket) return fmt::format("'{}' inside brackets at column {}", char(c), i + 1);
        depth += c == '(' ? 1 : -1;
        if (depth < 0) return fmt::format("')' without '(' at column {}", i + 1);
        break;
      default:
        break;
    }
  }
  if (in_bracket) return "unclosed '['";
  if (depth != 0) return fmt::format("{} unclosed '('", depth);
  return {};
}

std::uint64_t pack_lingo(std::string_view lingo) {
  std::uint64_t key = 0;
  for (char c : lingo) key = (key << 8) | static_cast<unsigned char>(c);
  return key;
}

std::string unpack_lingo(std::uint64_t key, int q) {
  std::string s(static_cast<std::size_t>(q), '\0');
  for (int i = q - 1; i >= 0; --i, key >>= 8) s[static_cast<std::size_t>(i)] = static_cast<char>(key & 0xff);
  return s;
}

MoleculeSet subset(const MoleculeSet& set, const std::vector<std::size_t>& indices) {
  MoleculeSet out;
  out.q = set.q;
  out.preprocessing = set.preprocessing;
  out.names.reserve(indices.size());
  out.offsets.reserve(indices.size() + 1);
  out.magnitudes.reserve(indices.size());
  for (const std::size_t i : indices) {
    if (i >= set.size())
      throw Error(fmt::format("subset: index {} of a set of {}", i, set.size()), __FILE__, __LINE__);
    if (i < set.names.size()) out.names.push_back(set.names[i]);
    for (std::uint64_t e = set.offsets[i]; e < set.offsets[i + 1]; ++e) {
      if (set.wide_keys())
        out.keys64.push_back(set.keys64[e]);
      else
        out.keys32.push_back(set.keys32[e]);
      out.counts.push_back(set.counts[e]);
    }
    out.offsets.push_back(out.counts.size());
    out.magnitudes.push_back(set.magnitudes[i]);
  }
  return out;
}

namespace {

// The sorted multiset of `text`'s q-Lingos appended to `keys` and `counts` (Key: 32 bits for q <= 4,
// sorting half the bytes); returns the number of Lingos.
template <class Key>
std::size_t add_lingos(std::string_view text, int q, std::vector<Key>& keys,
                       std::vector<std::uint32_t>& counts) {
  const std::size_t n = text.size() >= static_cast<std::size_t>(q) ? text.size() - q + 1 : 0;
  // Rolling pack of the window, then sort + run-length count: the multiset in sorted-array form.
  thread_local std::vector<Key> window_keys;  // reused: no allocation per molecule
  window_keys.resize(n);
  const std::uint64_t mask = q == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * q)) - 1;
  std::uint64_t key = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    key = ((key << 8) | static_cast<unsigned char>(text[i])) & mask;
    if (i + 1 >= static_cast<std::size_t>(q)) window_keys[i + 1 - q] = static_cast<Key>(key);
  }
  std::sort(window_keys.begin(), window_keys.end());
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && window_keys[j] == window_keys[i]) ++j;
    keys.push_back(window_keys[i]);
    counts.push_back(static_cast<std::uint32_t>(j - i));
    i = j;
  }
  return n;
}

}  // namespace

void MoleculeSet::add(std::string name, std::string_view text) {
  MOLACCEL_EXPECTS(q >= kMinQ && q <= kMaxQ, "q must be in 1..8");
  const std::size_t n =
      wide_keys() ? add_lingos(text, q, keys64, counts) : add_lingos(text, q, keys32, counts);
  offsets.push_back(counts.size());
  magnitudes.push_back(static_cast<std::uint32_t>(n));
  names.push_back(std::move(name));
}

MoleculeSet make_molecules(const std::vector<std::string>& smiles, const LingoOptions& options,
                           std::vector<std::string> names, std::string_view origin) {
  if (options.q < kMinQ || options.q > kMaxQ)
    throw InputError("--q", 0, fmt::format("q must be between {} and {}, got {}", kMinQ, kMaxQ, options.q));
  MOLACCEL_EXPECTS(names.empty() || names.size() == smiles.size(), "one name per SMILES");
  MoleculeSet set;
  set.q = options.q;
  set.preprocessing = options.preprocessing;
  for (std::size_t i = 0; i < smiles.size(); ++i) {
    if (auto problem = smiles_problem(smiles[i]); !problem.empty())
      throw InputError(std::string(origin), i + 1, problem);
    set.add(names.empty() ? std::to_string(i + 1) : std::move(names[i]),
            preprocess(smiles[i], options.preprocessing));
  }
  return set;
}

std::string_view to_string(Metric metric) {
  switch (metric) {
    case Metric::tanimoto:
      return "tanimoto";
    case Metric::vidal:
      return "vidal";
    case Metric::set:
      return "set";
  }
  return "?";
}

Metric parse_metric(std::string_view text) {
  if (text == "tanimoto") return Metric::tanimoto;
  if (text == "vidal") return Metric::vidal;
  if (text == "set") return Metric::set;
  throw InputError("--metric", 0, fmt::format("unknown metric '{}' (tanimoto, vidal, set)", text));
}

}  // namespace molaccel::lingo

// Orbital selections of the display commands: "all", ranges "homo-5:lumo+5", or one name.
#include <algorithm>
#include <cctype>
#include <numeric>

#include "molaccel/orbital.hpp"

namespace molaccel::orbital {

std::vector<OrbitalRef> parse_orbital_selection(std::string_view text, const Wavefunction& wfn) {
  const std::string original(text);
  std::string prefix;
  for (std::string_view p : {"alpha:", "beta:", "a:", "b:"})
    if (text.substr(0, p.size()) == p) {
      prefix = std::string(p);
      text.remove_prefix(p.size());
      break;
    }
  const Spin spin = prefix.empty() || prefix[0] == 'a' ? Spin::alpha : Spin::beta;
  if (spin == Spin::beta && !wfn.unrestricted())
    throw InputError("--orbital", 0,
                     fmt::format("'{}': this wavefunction is restricted (no beta orbitals)", original));
  const OrbitalSet& set = spin == Spin::alpha ? wfn.alpha : wfn.beta;
  if (set.count() == 0)
    throw InputError("--orbital", 0, fmt::format("'{}': no orbitals in the file", original));
  // Energy order (files need not list orbitals sorted), as parse_orbital's homo/lumo.
  std::vector<std::size_t> order(set.count());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return set.energies[a] < set.energies[b]; });
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::vector<OrbitalRef> refs;
  if (lower == "all") {
    for (std::size_t o : order) refs.push_back({spin, o});
    return refs;
  }
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return {parse_orbital(original, wfn)};
  const std::string_view first = text.substr(0, colon), last = text.substr(colon + 1);
  if (first.empty() || last.empty() || last.find(':') != std::string_view::npos)
    throw InputError(
        "--orbital", 0,
        fmt::format("'{}': a range is FROM:TO, e.g. homo-5:lumo+5 or 3:12 (both ends included)", original));
  auto rank = [&](std::string_view name) {
    const OrbitalRef r = parse_orbital(prefix + std::string(name), wfn);
    return static_cast<std::size_t>(std::find(order.begin(), order.end(), r.index) - order.begin());
  };
  std::size_t from = rank(first), to = rank(last);
  if (from > to) std::swap(from, to);
  for (std::size_t k = from; k <= to; ++k) refs.push_back({spin, order[k]});
  return refs;
}

}  // namespace molaccel::orbital

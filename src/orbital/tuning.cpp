#include "orbital/tuning.hpp"

#include <charconv>

#include "molaccel/runtime.hpp"

namespace molaccel::orbital::detail {

Tuning tuning_for(int /*device*/, const Problem& problem) {
  Tuning t;
  t.basis_matrix = problem.density || problem.orbitals > 4;
  return t;
}

void set_tuning(Tuning& tuning, const std::string& setting) {
  const std::size_t eq = setting.find('=');
  const std::string key = setting.substr(0, eq);
  const std::string value = eq == std::string::npos ? std::string() : setting.substr(eq + 1);
  auto number = [&](long low, long high) {
    long n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < low || n > high)
      throw Error(fmt::format("orbital tuning '{}': expected an integer from {} to {}", setting, low, high));
    return n;
  };
  if (key == "basis_matrix")
    tuning.basis_matrix = number(0, 1) != 0;
  else if (key == "jit_brick")
    tuning.jit_brick = parse_cull_layout(value);
  else if (key == "chunks")
    tuning.chunks_per_grid = static_cast<std::size_t>(number(1, 1 << 20));
  else if (key == "drain_threads")
    tuning.drain_threads = static_cast<int>(number(1, 1024));
  else if (key == "drain_piece_mib")
    tuning.drain_piece_mib = static_cast<std::size_t>(number(1, 64));
  else
    throw Error(
        fmt::format("orbital tuning '{}': expected basis_matrix, jit_brick, chunks, drain_threads or "
                    "drain_piece_mib=VALUE",
                    setting));
}

}  // namespace molaccel::orbital::detail

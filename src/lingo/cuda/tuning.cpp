#include "lingo/cuda/tuning.hpp"

#include <charconv>
#include <string>

#include "molaccel/runtime.hpp"

namespace molaccel::lingo::cuda_backend {

Tuning tuning_for(int /*device*/, const Problem& /*problem*/) {
  return Tuning{};
}

void set_tuning(Tuning& tuning, std::string_view name_value) {
  const std::size_t eq = name_value.find('=');
  const std::string_view name = name_value.substr(0, eq);
  const std::string_view text = eq == std::string_view::npos ? std::string_view{} : name_value.substr(eq + 1);
  unsigned long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (eq == std::string_view::npos || error != std::errc{} || end != text.data() + text.size())
    throw Error("lingo tuning: expected name=number, got '" + std::string(name_value) + "'");
  if (name == "staged_pass_elements" && value > 0)
    tuning.staged_pass_elements = value;
  else if (name == "direct_pass_elements" && value > 0)
    tuning.direct_pass_elements = value;
  else if (name == "grow_passes" && value <= 1)
    tuning.grow_passes = value == 1;
  else if (name == "block_steps" && value > 0)
    tuning.block_steps = value;
  else if (name == "device_pass_elements")
    tuning.device_pass_elements = value;
  else if (name == "drain_threads" && value <= 1024)
    tuning.drain_threads = static_cast<int>(value);
  else
    throw Error("lingo tuning: unknown setting or value out of range: '" + std::string(name_value) + "'");
}

}  // namespace molaccel::lingo::cuda_backend

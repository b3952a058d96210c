// `--device opencl[:N]`, in every build (a build without OpenCL then says it has none).
#include <charconv>

#include "molaccel/opencl.hpp"

namespace molaccel {

std::optional<int> parse_opencl_device(std::string_view device) {
  if (device == "opencl") return 0;
  if (device.rfind("opencl:", 0) != 0) return std::nullopt;
  const auto item = device.substr(7);
  int index = -1;
  auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
  if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || index < 0)
    throw InputError("--device", 0,
                     fmt::format("'{}' has a bad OpenCL device index; expected opencl or opencl:N", device),
                     __FILE__, __LINE__);
  return index;
}

}  // namespace molaccel

// Memory and disk checks before a job starts (resource_limits.hpp).
#include "runtime/resource_limits.hpp"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "molaccel/runtime.hpp"
#include "runtime/secure_file.hpp"

namespace molaccel::detail {

namespace {

std::function<std::optional<std::uint64_t>()>& memory_probe() {
  static std::function<std::optional<std::uint64_t>()> probe;
  return probe;
}
std::function<std::optional<std::uint64_t>(const std::filesystem::path&)>& space_probe() {
  static std::function<std::optional<std::uint64_t>(const std::filesystem::path&)> probe;
  return probe;
}

// The soft limit `resource` sets, nullopt when unlimited.
std::optional<std::uint64_t> soft_limit(int resource) {
  struct rlimit limit {};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<std::uint64_t>(limit.rlim_cur);
}

std::optional<std::uint64_t> at_most(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// "12.3 GiB", "456.0 MiB", "8.0 KiB", "100 bytes".
std::string size_in_words(double bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{:.0f} bytes", bytes);
  int unit = 0;
  for (bytes /= 1024; bytes >= 1024 && unit < 4; ++unit) bytes /= 1024;
  return fmt::format("{:.1f} {}", bytes, units[unit]);
}

}  // namespace

std::optional<std::uint64_t> available_memory() {
  if (memory_probe()) return memory_probe()();
  std::optional<std::uint64_t> available;
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  // An address-space or data limit bounds what this process can allocate (whatever it uses already
  // is not subtracted: the estimates are of the large arrays, far above it when they matter).
  return at_most(available, at_most(soft_limit(RLIMIT_AS), soft_limit(RLIMIT_DATA)));
}

std::optional<std::uint64_t> output_space(const std::filesystem::path& output) {
  if (space_probe()) return space_probe()(output);
  const OutputTarget target = resolve_output_target(output);
  if (target.kind != OutputTarget::Kind::replace) return std::nullopt;
  const auto dir = target.path.has_parent_path() ? target.path.parent_path() : std::filesystem::path(".");
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

void require_memory(double bytes, std::string_view what, std::string_view hint) {
  const auto available = available_memory();
  if (!available || bytes <= static_cast<double>(*available)) return;
  throw InputError(std::string(what), 0,
                   fmt::format("needs about {} of memory and {} are available; {}", size_in_words(bytes),
                               size_in_words(static_cast<double>(*available)), hint),
                   __FILE__, __LINE__);
}

void require_output_space(const std::filesystem::path& output, double bytes, std::string_view hint) {
  const auto space = output_space(output);
  if (!space || bytes <= static_cast<double>(*space)) return;
  throw InputError(output.string(), 0,
                   fmt::format("the output would take about {} and its filesystem has {} free; {}",
                               size_in_words(bytes), size_in_words(static_cast<double>(*space)), hint),
                   __FILE__, __LINE__);
}

void set_resource_probes_for_testing(
    std::function<std::optional<std::uint64_t>()> memory,
    std::function<std::optional<std::uint64_t>(const std::filesystem::path&)> space) {
  memory_probe() = std::move(memory);
  space_probe() = std::move(space);
}

}  // namespace molaccel::detail

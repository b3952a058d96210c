#include "common/harness.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "molaccel/opencl.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::bench {

Timing summarise(std::vector<double> t) {
  Timing r;
  std::sort(t.begin(), t.end());
  r.repeats = static_cast<int>(t.size());
  r.min_s = t.front();
  r.max_s = t.back();
  const std::size_t n = t.size();
  r.median_s = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return r;
}

int opencl_device_or_first_gpu(int requested, const char* program) {
  if (requested >= 0) return requested;
  const auto devices = opencl_devices();
  for (const auto& d : devices)
    if (d.gpu) return d.index;
  std::printf("%s: no OpenCL GPU (%s); --device N runs on another OpenCL device\n", program,
              devices.empty() ? opencl_absence_reason().c_str()
                              : fmt::format("{} OpenCL device(s), none a GPU", devices.size()).c_str());
  return -1;
}

Timing measure(const std::function<void()>& fn, int warmup, int repeats) {
  return measure_with(
      [&] {
        const double t0 = now_seconds();
        fn();
        return now_seconds() - t0;
      },
      warmup, repeats);
}

Timing measure_with(const std::function<double()>& timed_fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) timed_fn();
  std::vector<double> t;
  for (int i = 0; i < std::max(1, repeats); ++i) t.push_back(timed_fn());
  return summarise(std::move(t));
}

std::string human_rate(double per_second, const std::string& unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (per_second >= 1000.0 && p < 5) {
    per_second /= 1000.0;
    ++p;
  }
  return fmt::format("{:.3g} {}{}/s", per_second, prefixes[p], unit);
}

namespace {
std::string human_time(double s) {
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (s < 1.0) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}
}  // namespace

void print_header() {
  std::printf("%-38s %-16s %12s %16s %12s %s\n", "benchmark", "size", "median", "throughput", "of limit",
              "note");
}

void print_row(const Row& row) {
  const double rate = row.timing.median_s > 0 ? row.work / row.timing.median_s : 0;
  std::string of_limit = row.limit > 0 ? fmt::format("{:.1f}%", 100.0 * rate / row.limit) : "-";
  std::printf("%-38s %-16s %12s %16s %12s %s\n", row.benchmark.c_str(), row.size.c_str(),
              human_time(row.timing.median_s).c_str(),
              row.work > 0 ? human_rate(rate, row.work_unit).c_str() : "-", of_limit.c_str(),
              row.note.c_str());
  std::fflush(stdout);
  if (const char* path = std::getenv("MOLACCEL_BENCH_JSON"); path && *path) {
    nlohmann::json j = {{"benchmark", row.benchmark},
                        {"device", row.device},
                        {"size", row.size},
                        {"median_s", row.timing.median_s},
                        {"min_s", row.timing.min_s},
                        {"max_s", row.timing.max_s},
                        {"repeats", row.timing.repeats},
                        {"work", row.work},
                        {"work_unit", row.work_unit},
                        {"rate", rate},
                        {"bytes", row.bytes},
                        {"limit", row.limit},
                        {"limit_name", row.limit_name},
                        {"note", row.note}};
    std::ofstream(path, std::ios::app) << j.dump() << "\n";
  }
}

Resources first_gpus(std::size_t n) {
  const auto gpus = gpu_list();
  std::string spec = "gpu:";
  for (std::size_t i = 0; i < n && i < gpus.size(); ++i)
    spec += (i ? "," : "") + std::to_string(gpus[i].index);
  Resources::Options options;
  options.device = DeviceSpec::parse(spec);
  return Resources::create(options);
}

}  // namespace molaccel::bench

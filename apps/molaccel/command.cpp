#include "command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace molaccel::cli {

namespace {
std::vector<Command>& command_table() {
  static std::vector<Command> table;
  return table;
}
std::vector<DemoStep>& demo_table() {
  static std::vector<DemoStep> table;
  return table;
}
}  // namespace

bool register_command(Command command) {
  command_table().push_back(std::move(command));
  return true;
}

const std::vector<Command>& commands() {
  auto& t = command_table();
  std::stable_sort(t.begin(), t.end(), [](const Command& a, const Command& b) {
    if (a.group != b.group) return a.group < b.group;
    return a.order < b.order;
  });
  return t;
}

bool register_demo(DemoStep step) {
  demo_table().push_back(std::move(step));
  return true;
}

const std::vector<DemoStep>& demo_steps() {
  auto& t = demo_table();
  std::stable_sort(t.begin(), t.end(),
                   [](const DemoStep& a, const DemoStep& b) { return a.order < b.order; });
  return t;
}

void CommonOptions::add_device_options(CLI::App& app) {
  app.add_option("--device", device,
                 "Where to run: auto (a GPU if present and the job is large enough to gain from it, else the "
                 "CPU), cpu, gpu (all GPUs) or gpu:0,2")
      ->default_val("auto")
      ->check([](const std::string& v) -> std::string {
        try {
          DeviceSpec::parse(v);
          return {};
        } catch (const InputError& e) {
          return e.detail();
        }
      });
  app.add_option("--threads", threads, "CPU threads (0 = all cores)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
}

Resources CommonOptions::make_resources() const {
  Resources::Options o;
  o.device = DeviceSpec::parse(device);
  o.cpu_threads = threads;
  o.show_progress = !quiet;
  return Resources::create(options_for_rank(o, local_rank, local_size));
}

int CommonOptions::cpu_threads() const {
  return threads > 0 ? threads : cpu_info().logical_cores;
}

bool RunContext::small_job(double cpu_seconds) const {
  const bool automatic = DeviceSpec::parse(common.device).kind == DeviceSpec::Kind::automatic;
  if (!automatic || distributed() || !std::isfinite(cpu_seconds)) return false;
  report["cpu_seconds_estimate"] = cpu_seconds;
  if (!(cpu_seconds < kGpuStartAndExitSeconds)) return false;
  log_info("--device auto: the CPU (this job's estimate there, {:.3f} s, is less than starting a GPU)",
           cpu_seconds);
  report["device_choice"] = "cpu: a small job (--device gpu runs it on a GPU)";
  return true;
}

Resources RunContext::cpu_resources() const {
  CommonOptions cpu = common;
  cpu.device = "cpu";
  return cpu.make_resources();
}

Resources RunContext::resources_for(double cpu_seconds) const {
  return small_job(cpu_seconds) ? cpu_resources() : resources();
}

std::filesystem::path find_data_dir() {
  namespace fs = std::filesystem;
  if (const char* d = std::getenv("MOLACCEL_DATA_DIR"); d && *d) return d;
  std::error_code ec;
  // Next to the executable's install prefix, then the source tree it was built from.
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "molaccel" / "data";
    if (fs::is_directory(installed, ec)) return installed;
  }
#ifdef MOLACCEL_SOURCE_DIR
  if (fs::is_directory(fs::path(MOLACCEL_SOURCE_DIR) / "data", ec))
    return fs::path(MOLACCEL_SOURCE_DIR) / "data";
#endif
#ifdef MOLACCEL_INSTALL_DATADIR
  if (fs::is_directory(MOLACCEL_INSTALL_DATADIR, ec)) return MOLACCEL_INSTALL_DATADIR;
#endif
  return "data";
}

}  // namespace molaccel::cli

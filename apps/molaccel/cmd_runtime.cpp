// Top-level commands of the runtime: `molaccel info` and `molaccel demo`.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "command.hpp"
#include "molaccel/opencl.hpp"

namespace molaccel::cli {
namespace {

int run_info(RunContext& ctx) {
  const auto& b = build_info();
  const auto& c = cpu_info();
  const auto gpus = gpu_list();
  std::printf("molaccel %s\n", b.version.c_str());
  std::printf("build:  %s, %s, CUDA %s\n", b.compiler.c_str(), b.build_type.c_str(),
              b.cuda ? fmt::format("{} (sm_{})", b.cuda_version, b.cuda_archs).c_str() : "not compiled in");
  std::printf("nvrtc:  %s\n",
              nvrtc_available()
                  ? fmt::format("{}.{}", nvrtc_version() / 1000, (nvrtc_version() % 1000) / 10).c_str()
                  : "not found (run-time compiled kernels unavailable)");
  std::printf("cpu:    %s, %d logical cores, SIMD %s\n", c.model.c_str(), c.logical_cores,
              std::string(to_string(c.simd)).c_str());
  nlohmann::json jg = nlohmann::json::array();
  if (gpus.empty()) {
    std::printf("gpu:    no GPU (%s)\n", gpu_absence_reason().c_str());
  } else {
    for (const auto& g : gpus) {
      std::printf("gpu %d:  %s, compute capability %d.%d, %d SMs, %.1f GiB (%.1f GiB free), L2 %.0f MiB\n",
                  g.index, g.name.c_str(), g.cc_major, g.cc_minor, g.sm_count, g.total_memory / 1073741824.0,
                  g.free_memory / 1073741824.0, g.l2_bytes / 1048576.0);
      jg.push_back({{"index", g.index},
                    {"name", g.name},
                    {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)},
                    {"sm_count", g.sm_count},
                    {"memory_bytes", g.total_memory},
                    {"free_bytes", g.free_memory}});
    }
  }
  // OpenCL devices (`--device opencl:N` of linalg solve and orbital grid).
  const auto cl_devices = opencl_devices();
  nlohmann::json jcl = nlohmann::json::array();
  if (cl_devices.empty()) std::printf("opencl: no device (%s)\n", opencl_absence_reason().c_str());
  for (const auto& d : cl_devices) {
    std::printf("opencl %d: %s (%s), %s, %s, %d compute units, %.1f GiB, fp64 %s\n", d.index, d.name.c_str(),
                d.platform.c_str(), d.gpu ? "GPU" : "not a GPU", d.version.c_str(), d.compute_units,
                d.global_memory / 1073741824.0, d.fp64 ? "yes" : "no");
    jcl.push_back({{"index", d.index},
                   {"name", d.name},
                   {"platform", d.platform},
                   {"version", d.version},
                   {"driver_version", d.driver_version},
                   {"gpu", d.gpu},
                   {"fp64", d.fp64},
                   {"compute_units", d.compute_units},
                   {"memory_bytes", d.global_memory}});
  }
  std::printf("cache:  %s\n", default_jit_cache().directory().string().c_str());
  ctx.report["build"] = {{"version", b.version},
                         {"cuda", b.cuda},
                         {"cuda_version", b.cuda_version},
                         {"cuda_archs", b.cuda_archs},
                         {"compiler", b.compiler}};
  ctx.report["nvrtc"] = nvrtc_version();
  ctx.report["cpu"] = {
      {"model", c.model}, {"logical_cores", c.logical_cores}, {"simd", std::string(to_string(c.simd))}};
  ctx.report["gpus"] = jg;
  if (gpus.empty()) ctx.report["no_gpu_reason"] = gpu_absence_reason();
  ctx.report["opencl_devices"] = jcl;
  if (cl_devices.empty()) ctx.report["no_opencl_reason"] = opencl_absence_reason();
  return 0;
}

const bool info_registered = register_command({
    .group = "",
    .name = "info",
    .purpose = "Show this build's features, the CPU and every GPU (or 'no GPU')",
    .example = "molaccel info --json info.json",
    .setup = [](CLI::App&, CommonOptions&) -> Action { return run_info; },
    .order = 1,
});

struct DemoOptions {
  std::string output_dir = "molaccel-demo";
  std::string only;
};

// With -q the demo's report (standard output) goes nowhere while the engines run, leaving only its
// last line; its files are still written, warnings and errors still reach standard error, and
// `--json -` keeps its own stream.
class QuietStdout {
 public:
  explicit QuietStdout(bool quiet) {
    if (!quiet) return;
    std::fflush(stdout);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return;
    saved_ = ::dup(STDOUT_FILENO);
    if (saved_ >= 0) ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  ~QuietStdout() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;

 private:
  int saved_ = -1;
};

int run_demo(RunContext& ctx, const DemoOptions& opts) {
  auto quiet = std::make_unique<QuietStdout>(ctx.common.quiet);
  const auto data = find_data_dir();
  const std::filesystem::path out = opts.output_dir;
  std::filesystem::create_directories(out);
  Resources resources = ctx.resources();
  std::printf("molaccel demo: running on %s\n", resources.describe().c_str());
  std::printf("bundled data: %s\noutputs:      %s\n", data.string().c_str(),
              std::filesystem::absolute(out).string().c_str());
  ctx.report["device"] = resources.describe();
  ctx.report["output_dir"] = std::filesystem::absolute(out).string();
  const auto& steps = demo_steps();
  if (steps.empty()) std::printf("\nThis build contains no engines yet.\n");
  int ran = 0;
  for (const auto& step : steps) {
    if (!opts.only.empty() && step.name != opts.only) continue;
    std::printf("\n== %s ==\n", step.name.c_str());
    std::fflush(stdout);
    nlohmann::json& section = ctx.report["engines"][step.name];
    section = nlohmann::json::object();
    DemoContext dc{resources, data, out, section};
    const double t0 = now_seconds();
    step.run(dc);
    section["seconds"] = now_seconds() - t0;
    std::printf("(%s: %.2f s)\n", step.name.c_str(), now_seconds() - t0);
    std::fflush(stdout);
    ++ran;
  }
  if (!opts.only.empty() && ran == 0)
    throw InputError("--only", 0, "no engine named '" + opts.only + "' in this build");
  quiet.reset();
  std::printf("%sDemo finished: %d engine%s; output files are in %s\n", ctx.common.quiet ? "" : "\n", ran,
              ran == 1 ? "" : "s", std::filesystem::absolute(out).string().c_str());
  return 0;
}

const bool demo_registered = register_command({
    .group = "",
    .name = "demo",
    .purpose = "Run every engine on the bundled data and report (GPU if present, else CPU)",
    .example = "molaccel demo --output-dir demo-out",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto opts = std::make_shared<DemoOptions>();
      app.add_option("-o,--output-dir", opts->output_dir, "Where the demo writes its files")
          ->default_val("molaccel-demo");
      app.add_option("--only", opts->only, "Run only this engine's demo (lingo, align, orbital, linalg)");
      common.add_device_options(app);
      return [opts](RunContext& ctx) { return run_demo(ctx, *opts); };
    },
    .order = 2,
});

}  // namespace
}  // namespace molaccel::cli

// `molaccel orbital info|grid`: molecular orbitals and densities on grids, and the demo step.
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>

#include "command.hpp"
#include "molaccel/orbital.hpp"
#include "opencl_device.hpp"
#include "runtime/resource_limits.hpp"

namespace molaccel::cli {
namespace {

using namespace molaccel::orbital;

const char* const kConventions =
    "Conventions: input files are Molden ([Atoms] AU or Angs, [GTO], [MO], [5D] [5D7F] [5D10F] [7F] [9G]) "
    "or Gaussian .fchk, plain or gzip. Lengths on the command line are in angstrom; cube files are "
    "written in bohr. Orbitals: homo, lumo, homo-N, lumo+N or a 1-based index, optionally prefixed "
    "alpha: or beta:. The MO coefficients are checked for orthonormality against the overlap matrix "
    "and a known writer convention is applied when needed (reported by `orbital info`).\n";

const char* shell_letter(int l) {
  return &"s\0p\0d\0f\0g\0h\0i"[2 * l];
}

// ------------------------------------------------------------------------------------------
// orbital info
// ------------------------------------------------------------------------------------------
struct InfoOptions {
  std::string input;
  bool all = false;
};

int run_info(RunContext& ctx, const InfoOptions& opts) {
  const Wavefunction wfn = read_wavefunction(opts.input);
  std::printf("%s: %s file%s\n", wfn.source.c_str(), wfn.format.c_str(),
              wfn.writer.empty() ? "" : fmt::format(" (written by {})", wfn.writer).c_str());
  std::printf("atoms: %zu\n", wfn.atoms.size());
  for (std::size_t a = 0; a < wfn.atoms.size(); ++a) {
    const Atom& atom = wfn.atoms[a];
    std::printf("  %3zu %-4s Z=%-3d %12.6f %12.6f %12.6f  (angstrom)\n", a + 1, atom.label.c_str(),
                atom.atomic_number, atom.position[0] * bohr_in_angstrom, atom.position[1] * bohr_in_angstrom,
                atom.position[2] * bohr_in_angstrom);
  }
  std::map<std::string, int> shell_counts;
  std::size_t primitives = 0;
  for (const Shell& s : wfn.shells) {
    ++shell_counts[fmt::format("{}{}", shell_letter(s.l),
                               s.l >= 2 ? (s.pure ? " (pure)" : " (Cartesian)") : "")];
    primitives += s.exponents.size();
  }
  std::string shells_text;
  for (const auto& [name, count] : shell_counts)
    shells_text += fmt::format("{}{} {}", shells_text.empty() ? "" : ", ", count, name);
  std::printf("basis: %d functions, %zu shells (%s), %zu primitives\n", wfn.function_count(),
              wfn.shells.size(), shells_text.c_str(), primitives);
  std::printf("electrons: %.3f%s\n", wfn.electron_count(), wfn.unrestricted() ? " (unrestricted)" : "");
  const auto& norm = wfn.normalisation;
  std::printf(
      "normalisation: max |C^T S C - I| = %.2e as read; fix applied: %s%s\n", norm.deviation_as_read,
      norm.fix.c_str(),
      norm.fix == "none"
          ? ""
          : fmt::format(" ({}), after fix {:.2e}", norm.fix_description, norm.deviation_after_fix).c_str());
  nlohmann::json orbitals = nlohmann::json::array();
  auto list = [&](const OrbitalSet& set, Spin spin, const char* name) {
    if (set.count() == 0) return;
    const OrbitalRef homo = parse_orbital(spin == Spin::alpha ? "alpha:homo" : "beta:homo", wfn);
    std::printf("%s orbitals: %zu, HOMO = %zu (%.6f Eh)", name, set.count(), homo.index + 1,
                set.energies[homo.index]);
    if (homo.index + 1 < set.count())
      std::printf(", LUMO = %zu (%.6f Eh)", homo.index + 2, set.energies[homo.index + 1]);
    std::printf("\n   #   energy (Eh)   occupation  symmetry\n");
    for (std::size_t o = 0; o < set.count(); ++o) {
      const bool near = o + 5 >= homo.index && o <= homo.index + 5;
      if (opts.all || near)
        std::printf("%5zu %13.6f %11.4f  %s%s\n", o + 1, set.energies[o], set.occupations[o],
                    set.symmetries[o].c_str(),
                    o == homo.index ? "  <- HOMO" : (o == homo.index + 1 ? "  <- LUMO" : ""));
      orbitals.push_back({{"spin", name},
                          {"index", o + 1},
                          {"energy", set.energies[o]},
                          {"occupation", set.occupations[o]},
                          {"symmetry", set.symmetries[o]}});
    }
  };
  list(wfn.alpha, Spin::alpha, wfn.unrestricted() ? "alpha" : "molecular");
  list(wfn.beta, Spin::beta, "beta");
  ctx.report["file"] = wfn.source;
  ctx.report["format"] = wfn.format;
  ctx.report["writer"] = wfn.writer;
  ctx.report["atoms"] = wfn.atoms.size();
  ctx.report["basis_functions"] = wfn.function_count();
  ctx.report["shells"] = wfn.shells.size();
  ctx.report["primitives"] = primitives;
  ctx.report["electrons"] = wfn.electron_count();
  ctx.report["normalisation"] = {{"fix", norm.fix},
                                 {"deviation_as_read", norm.deviation_as_read},
                                 {"deviation_after_fix", norm.deviation_after_fix},
                                 {"tried", norm.tried}};
  ctx.report["orbitals"] = orbitals;
  return 0;
}

// ------------------------------------------------------------------------------------------
// orbital grid
// ------------------------------------------------------------------------------------------
struct GridOptions {
  std::string input;
  std::vector<std::string> orbitals;
  std::string density;
  std::string output;
  bool multi = false;
  double padding = 3.0, spacing = 0.1;
  std::vector<double> origin, size;
  std::string grid_like;
  std::string backend = "auto";
  double screening = 1e-9;
};

GridSpec make_grid(const GridOptions& o, const Wavefunction& wfn) {
  if (!o.grid_like.empty()) return grid_of_cube(o.grid_like);
  if (!o.origin.empty() || !o.size.empty()) {
    if (o.origin.size() != 3 || o.size.size() != 3)
      throw InputError("--origin/--size", 0, "give both --origin X Y Z and --size X Y Z (angstrom)");
    return explicit_grid({o.origin[0], o.origin[1], o.origin[2]}, {o.size[0], o.size[1], o.size[2]},
                         o.spacing);
  }
  return automatic_grid(wfn, o.padding, o.spacing);
}

std::filesystem::path numbered_output(const std::filesystem::path& output, const std::string& label) {
  std::string safe;
  for (char c : label)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+') ? c : '_';
  return output.parent_path() / (output.stem().string() + "." + safe + output.extension().string());
}

// Seconds the CPU engine takes for `orbitals` orbitals and, with `density`, a density on `grid`
// with `threads` threads: points x (primitives + basis functions) x (orbitals + 5 for a density),
// at 3e9 of these a second a core. Fitted on the development machine's AVX-512 Xeon (2026-11, two
// threads): threonine 6-31G* HOMO 6.8e9, C60 STO-3G HOMO 1.8e10, and its total density as about 5
// orbitals at 7e9; the H200 host's 16 cores reach 3e9 each on the threonine HOMO (0.007 s). Taken
// at the lower end so that a job on the edge keeps the GPU.
double cpu_seconds_estimate(const Wavefunction& wfn, const GridSpec& grid, std::size_t orbitals, bool density,
                            int threads) {
  constexpr double kUnitsPerCoreSecond = 3e9;
  double primitives = 0;
  for (const Shell& shell : wfn.shells) primitives += static_cast<double>(shell.exponents.size());
  const double fields = static_cast<double>(orbitals) + (density ? 5.0 : 0.0);
  return static_cast<double>(grid.point_count()) * (primitives + wfn.function_count()) * fields /
         (kUnitsPerCoreSecond * std::max(1, threads));
}

int run_grid(RunContext& ctx, const GridOptions& o) {
  if (o.orbitals.empty() && o.density.empty())
    throw InputError("--orbital", 0, "give --orbital NAME (repeatable) and/or --density KIND");
  const double started = now_seconds();
  const Wavefunction wfn = read_wavefunction(o.input);
  const GridSpec grid = make_grid(o, wfn);
  const double read = now_seconds();
  // `--device opencl[:N]`: orbitals through the OpenCL kernels (no Resources are made for it).
  const std::optional<int> opencl_device = parse_opencl_device(ctx.common.device);
  if (opencl_device && !o.density.empty())
    throw InputError("--density", 0, "densities have no OpenCL path (--device opencl computes orbitals)");
  // With --backend auto, a grid this small for the GPU runs on the CPU (RunContext::small_job).
  const double cpu_seconds =
      o.backend == "auto"
          ? cpu_seconds_estimate(wfn, grid, o.orbitals.size(), !o.density.empty(), ctx.common.cpu_threads())
          : std::numeric_limits<double>::infinity();
  const Resources resources = opencl_device ? Resources() : ctx.resources_for(cpu_seconds);
  const double ready = now_seconds();
  EvaluateOptions options;
  options.backend = parse_backend(o.backend);
  if (!(o.screening >= 0) || !std::isfinite(o.screening))
    throw InputError("--screening", 0, fmt::format("must be a non-negative number (got {})", o.screening));
  options.screening_tolerance = o.screening;
  std::vector<OrbitalRef> refs;
  for (const auto& name : o.orbitals) refs.push_back(parse_orbital(name, wfn));
  DensityKind density_kind = DensityKind::total;
  if (!o.density.empty()) {
    bool known = false;
    for (DensityKind k : {DensityKind::total, DensityKind::spin, DensityKind::alpha, DensityKind::beta})
      if (o.density == to_string(k)) {
        density_kind = k;
        known = true;
      }
    if (!known)
      throw InputError("--density", 0,
                       fmt::format("unknown density '{}' (total, spin, alpha, beta)", o.density));
  }
  const std::size_t fields = refs.size() + (o.density.empty() ? 0 : 1);
  if (o.multi && !o.density.empty())
    throw InputError("--multi", 0, "a multi-orbital cube holds orbitals only, not a density");
  log_info("grid {} x {} x {} = {} points on {}", grid.counts[0], grid.counts[1], grid.counts[2],
           grid.point_count(),
           opencl_device ? fmt::format("opencl:{}", *opencl_device) : resources.describe());

  // Refused up front when the values (4 bytes per point and field) cannot be held or the cubes
  // (13 bytes per value and a newline per 6) cannot be stored.
  const double points = double(grid.counts[0]) * double(grid.counts[1]) * double(grid.counts[2]);
  const std::string fewer_points =
      "use a larger --spacing (the points grow as 1/spacing^3), a smaller box or fewer fields";
  detail::require_memory(points * double(fields) * 4.0,
                         fmt::format("a {} x {} x {} grid of {} field{}", grid.counts[0], grid.counts[1],
                                     grid.counts[2], fields, fields == 1 ? "" : "s"),
                         fewer_points);
  detail::require_output_space(o.output, points * double(fields) * (13.0 + 1.0 / 6.0), fewer_points);

  // Compute everything first, then write: bad input or a failed job leaves no partial output.
  std::vector<float> orbital_values;
  EvaluationInfo orbital_info, density_info;
  if (!refs.empty())
    orbital_values = opencl_device
                         ? evaluate_orbitals_opencl(*opencl_device, wfn, grid, refs, options, &orbital_info)
                         : evaluate_orbitals(resources, wfn, grid, refs, options, &orbital_info);
  std::vector<float> density_values;
  if (!o.density.empty())
    density_values = evaluate_density(resources, wfn, grid, density_kind, options, &density_info);
  const double computed = now_seconds();

  const std::filesystem::path output = o.output;
  std::vector<std::string> written;
  const std::size_t n = grid.point_count();
  nlohmann::json outputs = nlohmann::json::array();
  OutputGroup cubes;  // every field's cube, or none of them
  if (o.multi) {
    std::vector<int> numbers;
    for (const auto& r : refs) numbers.push_back(static_cast<int>(r.index + 1));
    write_multi_orbital_cube(output, wfn, grid, orbital_values, numbers, "molaccel orbital grid");
    written.push_back(output.string());
  } else {
    for (std::size_t i = 0; i < refs.size(); ++i) {
      const auto path = fields == 1 ? output : numbered_output(output, o.orbitals[i]);
      write_cube(path, wfn, grid, orbital_values.data() + i * n, "molaccel orbital grid",
                 fmt::format("orbital {}", describe_orbital(refs[i], wfn)));
      written.push_back(path.string());
    }
  }
  if (!o.density.empty()) {
    const auto path = fields == 1 ? output : numbered_output(output, "density-" + o.density);
    write_cube(path, wfn, grid, density_values.data(), "molaccel orbital grid",
               fmt::format("{} electron density [e/bohr^3]", o.density));
    written.push_back(path.string());
  }
  cubes.commit();
  const double written_at = now_seconds();
  const EvaluationInfo& info = refs.empty() ? density_info : orbital_info;
  std::FILE* out = ctx.summary(output.string());
  if (out)
    std::fprintf(out, "%zu x %zu x %zu grid (%zu points), %s, %.3f s; wrote %s\n", grid.counts[0],
                 grid.counts[1], grid.counts[2], n, info.backend.c_str(),
                 orbital_info.seconds + density_info.seconds,
                 fmt::format("{}", fmt::join(written, ", ")).c_str());
  if (!density_values.empty()) {
    double sum = 0;
    for (float v : density_values) sum += v;
    if (out)
      std::fprintf(out, "density integral on this grid: %.4f electrons (file: %.4f)\n",
                   sum * grid.voxel_volume(), wfn.electron_count());
    ctx.report["density_integral"] = sum * grid.voxel_volume();
  }
  ctx.report["grid"] = {{"counts", grid.counts}, {"origin_bohr", grid.origin}, {"axes_bohr", grid.axes}};
  ctx.report["backend"] = info.backend;
  ctx.report["seconds"] = orbital_info.seconds + density_info.seconds;
  ctx.report["exp_per_point"] = info.exp_per_point;
  ctx.report["outputs"] = written;
  ctx.report["normalisation_fix"] = wfn.normalisation.fix;
  // "start": the resources (the devices start); "compute": the grids, the first JIT kernel's
  // compile or load included ("seconds": the evaluations' own time).
  ctx.report["total_seconds"] = written_at - started;
  ctx.report["stages"] = {{"read", read - started},
                          {"start", ready - read},
                          {"compute", computed - ready},
                          {"write", written_at - computed}};
  return 0;
}

const bool info_registered = register_command({
    .group = "orbital",
    .name = "info",
    .purpose =
        "Atoms, basis set, orbitals (energies, occupations) and normalisation check of a Molden/fchk file",
    .example = "molaccel orbital info water.molden",
    .setup = [](CLI::App& app, CommonOptions&) -> Action {
      auto opts = std::make_shared<InfoOptions>();
      app.add_option("FILE", opts->input, "Molden or .fchk file (plain or gzip)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_flag("--all", opts->all, "List every orbital (default: five around the HOMO/LUMO gap)");
      app.footer(kConventions);
      return [opts](RunContext& ctx) { return run_info(ctx, *opts); };
    },
    .order = 1,
});

const bool grid_registered = register_command({
    .group = "orbital",
    .name = "grid",
    .purpose = "Orbital values or electron densities on a grid, written as Gaussian cube files",
    .example = "molaccel orbital grid water.molden --orbital homo -o homo.cube",
    .setup = [](CLI::App& app, CommonOptions& common) -> Action {
      auto opts = std::make_shared<GridOptions>();
      app.add_option("FILE", opts->input, "Molden or .fchk file (plain or gzip)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("--orbital", opts->orbitals,
                     "Orbital to evaluate (repeatable): homo, lumo, homo-1, lumo+2, 12, beta:homo");
      app.add_option("--density", opts->density,
                     "Also (or only) the electron density: total, spin, alpha or beta");
      app.add_option("-o,--output", opts->output, "Output cube; with several fields, FILE.<name>.cube each")
          ->required();
      app.add_flag("--multi", opts->multi, "Several orbitals in one multi-orbital cube (Gaussian format)");
      app.add_option("--padding", opts->padding, "Automatic box: padding around the atoms, angstrom")
          ->default_val(3.0)
          ->check(CLI::NonNegativeNumber);
      app.add_option("--spacing", opts->spacing, "Grid spacing, angstrom (VMD's high resolution: 0.075)")
          ->default_val(0.1)
          ->check(CLI::PositiveNumber);
      app.add_option("--origin", opts->origin, "Explicit grid: origin X Y Z, angstrom")->expected(3);
      app.add_option("--size", opts->size, "Explicit grid: box size X Y Z, angstrom")->expected(3);
      app.add_option("--grid-like", opts->grid_like,
                     "Take the grid of an existing cube file (for point-by-point comparison)")
          ->check(CLI::ExistingFile);
      app.add_option("--backend", opts->backend,
                     "auto, cpu, cuda-jit, cuda-generic or reference (slow oracle)")
          ->default_val("auto")
          ->check(CLI::IsMember({"auto", "cpu", "cuda-jit", "cuda-generic", "reference"}));
      app.add_option("--screening", opts->screening,
                     "Skip primitives below this magnitude (0 = no screening)")
          ->default_val(1e-9)
          ->check(CLI::NonNegativeNumber);
      common.add_device_options(app);
      allow_opencl_device(app);
      app.footer(kConventions);
      return [opts](RunContext& ctx) { return run_grid(ctx, *opts); };
    },
    .order = 2,
});

// ------------------------------------------------------------------------------------------
// Demo: HOMO and total density of threonine (6-31G*, Psi4) as cube files.
// ------------------------------------------------------------------------------------------
const bool demo_registered = register_demo({
    .name = "orbital",
    .order = 30,
    .run =
        [](DemoContext& dc) {
          const auto input = dc.data_dir / "orbital" / "threonine_631gs.molden";
          const Wavefunction wfn = read_wavefunction(input);
          const GridSpec grid = automatic_grid(wfn, 3.0, 0.1);
          const OrbitalRef homo = parse_orbital("homo", wfn);
          std::printf("threonine, 6-31G* (Psi4): %zu atoms, %d basis functions, normalisation fix: %s\n",
                      wfn.atoms.size(), wfn.function_count(), wfn.normalisation.fix.c_str());
          EvaluationInfo homo_info, rho_info;
          const auto psi = evaluate_orbitals(dc.resources, wfn, grid, {homo}, {}, &homo_info);
          const auto rho = evaluate_density(dc.resources, wfn, grid, DensityKind::total, {}, &rho_info);
          const auto out_dir = dc.output_dir / "orbital";
          std::filesystem::create_directories(out_dir);
          write_cube(out_dir / "threonine_homo.cube", wfn, grid, psi.data(), "molaccel demo: threonine HOMO",
                     fmt::format("orbital {}", describe_orbital(homo, wfn)));
          write_cube(out_dir / "threonine_density.cube", wfn, grid, rho.data(),
                     "molaccel demo: threonine density", "total electron density [e/bohr^3]");
          double electrons = 0;
          for (float v : rho) electrons += v;
          electrons *= grid.voxel_volume();
          std::printf("grid %zu x %zu x %zu (0.1 A, 3 A padding) = %zu points\n", grid.counts[0],
                      grid.counts[1], grid.counts[2], grid.point_count());
          std::printf("HOMO %s: %.3f s on %s (%.0f exp()/point after screening of %.0f)\n",
                      describe_orbital(homo, wfn).c_str(), homo_info.seconds, homo_info.backend.c_str(),
                      homo_info.exp_per_point, homo_info.exp_per_point_unscreened);
          std::printf(
              "density of %zu occupied orbitals: %.3f s on %s; integral %.3f electrons (expected %.0f)\n",
              static_cast<std::size_t>(wfn.electron_count() / 2), rho_info.seconds, rho_info.backend.c_str(),
              electrons, wfn.electron_count());
          std::printf("wrote %s/threonine_homo.cube and threonine_density.cube\n", out_dir.string().c_str());
          dc.report["points"] = grid.point_count();
          dc.report["homo_seconds"] = homo_info.seconds;
          dc.report["density_seconds"] = rho_info.seconds;
          dc.report["backend"] = homo_info.backend;
          dc.report["density_integral"] = electrons;
          dc.report["outputs"] = {(out_dir / "threonine_homo.cube").string(),
                                  (out_dir / "threonine_density.cube").string()};
        },
});

}  // namespace
}  // namespace molaccel::cli

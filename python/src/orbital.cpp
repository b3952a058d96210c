// molaccel._core.orbital: wavefunctions, grids and their evaluation over the public API of
// include/molaccel/orbital.hpp, as `molaccel orbital info|grid` call it. Values land in host
// memory GPUs can write by DMA and are returned as NumPy arrays in the cube file's order.
#include <array>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "device_array.hpp"
#include "molaccel/orbital.hpp"
#include "orbital/packed_basis.hpp"
#ifdef MOLACCEL_HAVE_CUDA
#include "orbital/cuda/orbital_cuda.hpp"
#include "orbital/evaluate_on_pool.hpp"
#include "orbital/tuning.hpp"
#include "runtime/cuda/cuda_support.hpp"
#endif

namespace molaccel::python {
namespace {

namespace orb = molaccel::orbital;

nb::dict orbital_set(const orb::OrbitalSet& set, int functions) {
  nb::dict d;
  d["energies"] = to_numpy(std::vector<double>(set.energies), {set.count()});
  d["occupations"] = to_numpy(std::vector<double>(set.occupations), {set.count()});
  d["symmetries"] = set.symmetries;
  d["coefficients"] =
      to_numpy(std::vector<double>(set.coefficients), {set.count(), static_cast<std::size_t>(functions)});
  return d;
}

// parse_orbital for the grid calls, remembering its last answers: it sorts the orbitals by energy
// on every call, a fixed cost that repeated calls on one wavefunction need not pay. An answer is a
// function of the name, whether the wavefunction is unrestricted, and the energies and
// occupations of the spin set it picked; each entry keeps copies of those and is used only when
// they compare equal, so a wavefunction at an address a freed one had is never answered from the
// freed one's entry.
class NameCache {
 public:
  static NameCache& instance() {
    static auto* cache = new NameCache;  // never destroyed (plain C++ data, used until exit)
    return *cache;
  }

  orb::OrbitalRef resolve(const std::string& name, const orb::Wavefunction& w) {
    {
      std::lock_guard lock(mutex_);
      for (const Entry& e : entries_)
        if (e.wavefunction == &w && e.name == name && e.unrestricted == w.unrestricted()) {
          const orb::OrbitalSet& set = e.ref.spin == orb::Spin::alpha ? w.alpha : w.beta;
          if (set.energies == e.energies && set.occupations == e.occupations) return e.ref;
        }
    }
    const orb::OrbitalRef ref = orb::parse_orbital(name, w);
    const orb::OrbitalSet& set = ref.spin == orb::Spin::alpha ? w.alpha : w.beta;
    std::lock_guard lock(mutex_);
    entries_.insert(entries_.begin(), Entry{&w, name, w.unrestricted(), set.energies, set.occupations, ref});
    if (entries_.size() > kEntries) entries_.pop_back();
    return ref;
  }

 private:
  static constexpr std::size_t kEntries = 16;
  struct Entry {
    const orb::Wavefunction* wavefunction;
    std::string name;
    bool unrestricted;
    std::vector<double> energies, occupations;
    orb::OrbitalRef ref;
  };
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

orb::EvaluateOptions evaluate_options(const std::string& backend, double screening) {
  if (!(screening >= 0) || !std::isfinite(screening))
    throw InputError("screening", 0, fmt::format("must be a non-negative number (got {})", screening));
  orb::EvaluateOptions o;
  o.backend = orb::parse_backend(backend);
  o.screening_tolerance = screening;
  return o;
}

// Values of `fields` fields on `grid` into a new array of shape (nx, ny, nz) for one field,
// (fields, nx, ny, nz) for several.
template <class Evaluate>
nb::tuple evaluate(const Resources& resources, const orb::GridSpec& grid, std::size_t fields, Evaluate&& fn) {
  const std::size_t n = grid.point_count() * fields;
  ResultMemory memory = result_memory(resources, n * sizeof(float));
  auto* values = reinterpret_cast<float*>(memory.data);
  orb::EvaluationInfo info;
  {
    nb::gil_scoped_release release;
    fn(values, n, info);
  }
  const std::size_t shape[4] = {fields, grid.counts[0], grid.counts[1], grid.counts[2]};
  const bool one = fields == 1;
  return nb::make_tuple(
      nb::ndarray<nb::numpy, float>(values, one ? 3 : 4, one ? shape + 1 : shape, memory.owner), info.backend,
      info.seconds);
}

orb::DensityKind parse_density(const std::string& kind) {
  for (auto k :
       {orb::DensityKind::total, orb::DensityKind::spin, orb::DensityKind::alpha, orb::DensityKind::beta})
    if (kind == orb::to_string(k)) return k;
  throw InputError("density", 0, fmt::format("unknown density '{}' (total, spin, alpha, beta)", kind));
}

// The grid left in device memory (device_output=True), on the first GPU of the call's Resources:
// orbital values of `refs` (shape (fields, nx, ny, nz); (nx, ny, nz) for one), or the density
// sum_i weights[i] |refs[i]|^2 (one field), written by the engine's
// cuda_backend::evaluate_on_device into the array returned. The packed basis and coefficients
// come from the engine's request cache and the device state (uploads, JIT program) is kept per
// GPU from call to call, as the host path's GPU workers keep theirs. Complete when this returns
// (device_array.hpp: streams).
nb::tuple evaluate_on_device(const Resources& resources, const orb::Wavefunction& w,
                             const orb::GridSpec& grid, const std::vector<orb::OrbitalRef>& refs,
                             const std::vector<float>& weights, bool density,
                             const orb::EvaluateOptions& options) {
  const int gpu = output_device(resources);
  orb::Backend backend = options.backend;
  if (backend == orb::Backend::automatic) backend = orb::Backend::cuda_jit;
  if (backend != orb::Backend::cuda_jit && backend != orb::Backend::cuda_generic)
    throw InputError(
        "backend", 0,
        fmt::format("device_output=True runs a CUDA backend (auto, cuda-jit or cuda-generic; got {})",
                    orb::to_string(backend)));
  if (grid.point_count() == 0) throw InputError("grid", 0, "the grid has no points");
  const std::size_t fields = density ? 1 : refs.size();
  DeviceArray out;
  double seconds = 0;
  {
    nb::gil_scoped_release release;
    const double start = now_seconds();
    std::vector<std::size_t> shape{grid.counts[0], grid.counts[1], grid.counts[2]};  // one field: 3-D
    if (fields > 1) shape.insert(shape.begin(), fields);
    out = new_device_array(gpu, nb::dtype<float>(), std::move(shape));
#ifdef MOLACCEL_HAVE_CUDA
    if (refs.empty()) {  // a density of no orbitals (e.g. beta of a closed shell read as restricted)
      cuda::DeviceGuard guard(gpu);
      MOLACCEL_CUDA_TRY(cudaMemset(out.view.data, 0, out.elements() * sizeof(float)));
    } else {
      const orb::detail::PreparedRequest prepared =
          orb::detail::prepare_request(w, options.screening_tolerance, refs);
      orb::cuda_backend::GpuJob job;
      job.basis = prepared.basis.get();
      job.coefficients = prepared.coefficients->data();
      job.orbitals = refs.size();
      job.weights = density ? weights.data() : nullptr;
      job.grid = &grid;
      job.jit = backend == orb::Backend::cuda_jit;
      job.basis_id = prepared.basis_id;
      job.coefficients_id = prepared.coefficients_id;
      job.tuning = orb::detail::tuning_for(gpu, {refs.size(), density});
      orb::cuda_backend::precompile(job, gpu);  // once per basis and GPU
      with_kept_gpu_worker(gpu, resources, [&](WorkerContext& ctx) {
        void* stream = orb::cuda_backend::evaluate_on_device(ctx, job, static_cast<float*>(out.view.data));
        MOLACCEL_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
      });
    }
#else
    (void)w;
    (void)weights;
#endif
    seconds = now_seconds() - start;
  }
  return nb::make_tuple(std::move(out), std::string(orb::to_string(backend)), seconds);
}

}  // namespace

void bind_orbital(nb::module_& m) {
  m.attr("bohr_in_angstrom") = orb::bohr_in_angstrom;
  nb::class_<orb::Wavefunction>(m, "Wavefunction")
      .def_ro("source", &orb::Wavefunction::source)
      .def_ro("format", &orb::Wavefunction::format)
      .def_ro("writer", &orb::Wavefunction::writer)
      .def_prop_ro("function_count", &orb::Wavefunction::function_count)
      .def_prop_ro("unrestricted", &orb::Wavefunction::unrestricted)
      .def_prop_ro("electron_count", &orb::Wavefunction::electron_count)
      .def_prop_ro("atoms",
                   [](const orb::Wavefunction& w) {
                     const std::size_t n = w.atoms.size();
                     std::vector<std::int32_t> z(n);
                     std::vector<double> positions(3 * n), charges(n);
                     std::vector<std::string> labels(n);
                     for (std::size_t a = 0; a < n; ++a) {
                       z[a] = w.atoms[a].atomic_number;
                       labels[a] = w.atoms[a].label;
                       charges[a] = w.atoms[a].charge;
                       for (int c = 0; c < 3; ++c) positions[3 * a + c] = w.atoms[a].position[c];
                     }
                     nb::dict d;
                     d["atomic_numbers"] = to_numpy(std::move(z), {n});
                     d["labels"] = std::move(labels);
                     d["positions"] = to_numpy(std::move(positions), {n, 3});
                     d["charges"] = to_numpy(std::move(charges), {n});
                     return d;
                   })
      .def_prop_ro("shells",
                   [](const orb::Wavefunction& w) {
                     nb::list shells;
                     for (const auto& s : w.shells) {
                       nb::dict d;
                       d["atom"] = s.atom;
                       d["l"] = s.l;
                       d["pure"] = s.pure;
                       d["exponents"] = s.exponents;
                       d["coefficients"] = s.coefficients;
                       shells.append(d);
                     }
                     return shells;
                   })
      .def_prop_ro("alpha",
                   [](const orb::Wavefunction& w) { return orbital_set(w.alpha, w.function_count()); })
      .def_prop_ro("beta", [](const orb::Wavefunction& w) { return orbital_set(w.beta, w.function_count()); })
      .def_prop_ro("normalisation",
                   [](const orb::Wavefunction& w) {
                     nb::dict d;
                     d["fix"] = w.normalisation.fix;
                     d["fix_description"] = w.normalisation.fix_description;
                     d["deviation_as_read"] = w.normalisation.deviation_as_read;
                     d["deviation_after_fix"] = w.normalisation.deviation_after_fix;
                     d["tried"] = w.normalisation.tried;
                     return d;
                   })
      .def("orbital_index",
           [](const orb::Wavefunction& w, const std::string& name) {
             const auto ref = orb::parse_orbital(name, w);
             return nb::make_tuple(ref.spin == orb::Spin::alpha ? "alpha" : "beta", ref.index);
           })
      .def("describe_orbital", [](const orb::Wavefunction& w, const std::string& name) {
        return orb::describe_orbital(orb::parse_orbital(name, w), w);
      });

  m.def("read", [](const std::string& path, bool check_normalisation, double tolerance) {
    orb::ReadOptions options;
    options.check_normalisation = check_normalisation;
    options.orthonormality_tolerance = tolerance;
    nb::gil_scoped_release release;
    return orb::read_wavefunction(path, options);
  });

  nb::class_<orb::GridSpec>(m, "GridSpec")
      .def("__init__",
           [](orb::GridSpec* g, std::array<double, 3> origin, std::array<std::array<double, 3>, 3> axes,
              std::array<std::size_t, 3> counts) {
             new (g) orb::GridSpec{origin, axes, counts};
           })
      .def_ro("origin", &orb::GridSpec::origin)
      .def_ro("axes", &orb::GridSpec::axes)
      .def_ro("counts", &orb::GridSpec::counts)
      .def_prop_ro("voxel_volume", &orb::GridSpec::voxel_volume);
  m.def("automatic_grid", &orb::automatic_grid);
  m.def("explicit_grid", &orb::explicit_grid);
  m.def("grid_of_cube", [](const std::string& path) { return orb::grid_of_cube(path); });

  m.def("evaluate_orbitals", [](const orb::Wavefunction& w, const orb::GridSpec& grid,
                                const std::vector<std::string>& names, const std::string& backend,
                                double screening, const std::string& device, int threads, bool progress,
                                bool device_output) {
    std::vector<orb::OrbitalRef> refs;
    for (const auto& name : names) refs.push_back(NameCache::instance().resolve(name, w));
    if (refs.empty())
      throw InputError("orbitals", 0, "give at least one orbital (homo, lumo, homo-1, 12, ...)");
    const auto options = evaluate_options(backend, screening);
    const Resources resources = resources_for(device, threads, progress);
    if (device_output) return evaluate_on_device(resources, w, grid, refs, {}, false, options);
    return evaluate(resources, grid, refs.size(), [&](float* out, std::size_t n, orb::EvaluationInfo& info) {
      orb::evaluate_orbitals_into(resources, w, grid, refs, out, n, options, &info);
    });
  });
  m.def("evaluate_density", [](const orb::Wavefunction& w, const orb::GridSpec& grid, const std::string& kind,
                               const std::string& backend, double screening, const std::string& device,
                               int threads, bool progress, bool device_output) {
    const orb::DensityKind density = parse_density(kind);
    const auto options = evaluate_options(backend, screening);
    const Resources resources = resources_for(device, threads, progress);
    if (device_output) {
      const orb::detail::DensityTerms terms = orb::detail::density_terms(w, density);
      return evaluate_on_device(resources, w, grid, terms.orbitals, terms.weights, true, options);
    }
    return evaluate(resources, grid, 1, [&](float* out, std::size_t n, orb::EvaluationInfo& info) {
      orb::evaluate_density_into(resources, w, grid, density, out, n, options, &info);
    });
  });
  m.def("write_cube", [](const std::string& path, const orb::Wavefunction& w, const orb::GridSpec& grid,
                         nb::ndarray<const float, nb::c_contig, nb::device::cpu> values,
                         const std::string& title, const std::string& description) {
    if (values.size() != grid.point_count())
      throw InputError(path, 0,
                       fmt::format("{} values for a grid of {} points", values.size(), grid.point_count()));
    nb::gil_scoped_release release;
    orb::write_cube(path, w, grid, values.data(), title, description);
  });
}

}  // namespace molaccel::python

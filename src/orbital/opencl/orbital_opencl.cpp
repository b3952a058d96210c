// Orbitals on OpenCL: the JIT kernel (the basis set folded into OpenCL C by jit_source.cpp, the
// same per-element-type functions as the CUDA JIT) or the generic kernel below (the basis set in
// buffers, loops over shells and Cartesian components for any l the tables have).
#include <algorithm>

#include "molaccel/opencl.hpp"
#include "orbital/basis_functions.hpp"
#include "orbital/jit_source.hpp"
#include "orbital/opencl/orbital_opencl.hpp"
#include "orbital/packed_basis.hpp"
#include "runtime/opencl/opencl.hpp"

namespace molaccel::orbital {

namespace {

namespace rt = ::molaccel::opencl;

// The generic kernel: one work-item per point. Shell records: l, first primitive, primitive
// count, first component; powers: (x, y, z) of every Cartesian component, l by l (power_first[l]).
constexpr const char* kGenericKernel = R"(
float ipow(float x, int n) {
  float r = 1.0f;
  for (int e = 0; e < n; ++e) r *= x;
  return r;
}

__kernel void molaccel_orbital_generic_cl(
    __global const COORD* restrict atom_xyz, __global const int* restrict atom_first_shell, int atoms,
    __global const int4* restrict shells, __global const float* restrict shell_cut2,
    __global const float* restrict exponent, __global const float* restrict coefficient,
    __global const float* restrict prim_cut2, __global const int* restrict powers,
    __global const int* restrict power_first, __global const float* restrict c,
    __global const COORD* restrict grid, int nx, int ny, int nz, __global float* restrict out) {
  const int k = get_global_id(0), j = get_global_id(1), i = get_global_id(2);
  if (i >= nx || j >= ny || k >= nz) return;
  COORD p[3];
  for (int d = 0; d < 3; ++d) p[d] = grid[d] + i * grid[3 + d] + j * grid[6 + d] + k * grid[9 + d];
  float v = 0.0f;
  for (int a = 0; a < atoms; ++a) {
    const float dx = (float)(p[0] - atom_xyz[3 * a]), dy = (float)(p[1] - atom_xyz[3 * a + 1]),
                dz = (float)(p[2] - atom_xyz[3 * a + 2]);
    const float r2 = dx * dx + dy * dy + dz * dz;
    for (int s = atom_first_shell[a]; s < atom_first_shell[a + 1]; ++s) {
      if (!(r2 < shell_cut2[s])) continue;
      const int4 sh = shells[s];  // l, first primitive, primitive count, first component
      float R = 0.0f;
      for (int q = sh.y; q < sh.y + sh.z; ++q)
        if (r2 < prim_cut2[q]) R += coefficient[q] * exp(-exponent[q] * r2);
      float angular = 0.0f;
      for (int cc = power_first[sh.x]; cc < power_first[sh.x + 1]; ++cc)
        angular += c[sh.w + cc - power_first[sh.x]] *
                   ipow(dx, powers[3 * cc]) * ipow(dy, powers[3 * cc + 1]) * ipow(dz, powers[3 * cc + 2]);
      v += R * angular;
    }
  }
  out[((size_t)i * ny + j) * nz + k] = v;
}
)";

template <class T>
rt::Buffer upload(rt::Device& d, const std::vector<T>& v) {
  rt::Buffer b(d, std::max<std::size_t>(1, v.size()) * sizeof(T));
  b.write(v.data(), v.size() * sizeof(T));
  return b;
}

class Arguments {
 public:
  explicit Arguments(cl_kernel k) : kernel_(k) {}
  template <class V>
  Arguments& operator<<(const V& value) {
    MOLACCEL_CL_TRY(rt::api()->SetKernelArg(kernel_, index_++, sizeof(V), &value), "clSetKernelArg");
    return *this;
  }

 private:
  cl_kernel kernel_;
  cl_uint index_ = 0;
};

// Coordinates in double where the device has fp64, else float (about 1e-6 bohr of rounding).
template <class C>
std::vector<C> as_coordinates(const std::vector<double>& v) {
  return std::vector<C>(v.begin(), v.end());
}

}  // namespace

namespace opencl_backend {

struct Evaluation::State {
  rt::Device* device = nullptr;
  bool generic = false;
  std::size_t points = 0, components = 0;
  std::vector<float> coefficients;
  rt::Program program;
  cl_kernel kernel = nullptr;
  std::string kernel_name;
  std::vector<rt::Buffer> buffers;
  rt::Buffer grid, c, out;
  std::size_t global[3] = {1, 1, 1};
};

Evaluation::Evaluation(int device, const Wavefunction& wfn, const GridSpec& grid,
                       const std::vector<OrbitalRef>& orbitals, const EvaluateOptions& options)
    : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.generic = options.backend == Backend::cuda_generic;
  if (options.backend != Backend::automatic && options.backend != Backend::cuda_jit && !st.generic)
    throw InputError(
        "--backend", 0,
        fmt::format("{} does not run on OpenCL (auto or jit: the JIT kernel; generic: the generic one)",
                    to_string(options.backend)),
        __FILE__, __LINE__);
  rt::Device& d = rt::device(device);
  st.device = &d;
  const bool fp64 = d.info.fp64;
  const detail::PackedBasis basis = detail::pack_basis(wfn, options.screening_tolerance);
  st.coefficients = detail::cartesian_coefficients(wfn, orbitals);
  st.points = grid.point_count();
  st.components = static_cast<std::size_t>(basis.components);
  for (std::size_t a = 0; a < 3; ++a)
    if (grid.counts[a] > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw Error("orbital on OpenCL: grid too large", __FILE__, __LINE__);

  std::vector<double> grid_values(grid.origin.begin(), grid.origin.end());
  for (const auto& axis : grid.axes) grid_values.insert(grid_values.end(), axis.begin(), axis.end());
  const std::string coord = fp64 ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\ntypedef double COORD;\n"
                                 : "typedef float COORD;\n";
  rt::BuildRequest request;
  auto coordinates = [&](const std::vector<double>& v) {
    return fp64 ? upload(d, as_coordinates<double>(v)) : upload(d, as_coordinates<float>(v));
  };
  st.grid = coordinates(grid_values);
  st.c = rt::Buffer(d, std::max<std::size_t>(1, st.components) * sizeof(float));
  st.out = rt::Buffer(d, std::max<std::size_t>(1, st.points) * sizeof(float));
  const int nx = static_cast<int>(grid.counts[0]), ny = static_cast<int>(grid.counts[1]),
            nz = static_cast<int>(grid.counts[2]);

  if (st.generic) {
    request.source = "// molaccel orbital: the generic OpenCL kernel\n" + coord + kGenericKernel;
    request.program_name = "molaccel_orbital_generic.cl";
    request.kernel_names = {"molaccel_orbital_generic_cl"};
    std::vector<cl_int> shells, powers, power_first{0};
    std::vector<float> shell_cut2;
    for (const auto& s : basis.shells) {
      shells.insert(shells.end(), {s.l, s.first_primitive, s.primitive_count, s.first_component});
      shell_cut2.push_back(s.cutoff_r2);
    }
    for (int l = 0; l <= basis.max_l; ++l) {
      for (const auto& p : detail::cartesian_powers(l)) powers.insert(powers.end(), {p.x, p.y, p.z});
      power_first.push_back(static_cast<cl_int>(powers.size() / 3));
    }
    st.buffers.push_back(coordinates(basis.atom_xyz));
    st.buffers.push_back(upload(d, basis.atom_first_shell));
    st.buffers.push_back(upload(d, shells));
    st.buffers.push_back(upload(d, shell_cut2));
    st.buffers.push_back(upload(d, basis.exponent));
    st.buffers.push_back(upload(d, basis.coefficient));
    st.buffers.push_back(upload(d, basis.cutoff_r2));
    st.buffers.push_back(upload(d, powers));
    st.buffers.push_back(upload(d, power_first));
  } else {
    const detail::JitSource jit = detail::generate_opencl_jit_source(basis, fp64);
    request.source = jit.source;
    request.program_name = "molaccel_orbital_jit.cl";
    request.kernel_names = {jit.kernel_name};
    std::vector<double> xyz;
    std::vector<cl_int> base;
    for (int a : jit.atom_order) {
      const std::size_t at = static_cast<std::size_t>(a);
      xyz.insert(xyz.end(), basis.atom_xyz.begin() + static_cast<std::ptrdiff_t>(3 * at),
                 basis.atom_xyz.begin() + static_cast<std::ptrdiff_t>(3 * at + 3));
      const int first = basis.atom_first_shell[at], last = basis.atom_first_shell[at + 1];
      base.push_back(first < last ? basis.shells[static_cast<std::size_t>(first)].first_component : 0);
    }
    st.buffers.push_back(coordinates(xyz));
    st.buffers.push_back(upload(d, base));
  }
  request.needs_fp64 = fp64;
  st.program = rt::default_binary_cache().build(d, request);
  st.kernel_name = request.kernel_names[0];
  st.kernel = st.program.kernel(st.kernel_name);
  Arguments args(st.kernel);
  if (st.generic) {
    args << st.buffers[0].get() << st.buffers[1].get() << static_cast<cl_int>(basis.atom_count())
         << st.buffers[2].get() << st.buffers[3].get() << st.buffers[4].get() << st.buffers[5].get()
         << st.buffers[6].get() << st.buffers[7].get() << st.buffers[8].get();
  } else {
    args << st.buffers[0].get() << st.buffers[1].get();
  }
  args << st.c.get() << st.grid.get() << static_cast<cl_int>(nx) << static_cast<cl_int>(ny)
       << static_cast<cl_int>(nz) << st.out.get();
  st.global[0] = grid.counts[2];
  st.global[1] = grid.counts[1];
  st.global[2] = grid.counts[0];
}

Evaluation::~Evaluation() = default;

void Evaluation::launch(std::size_t orbital) {
  State& st = *state_;
  if (st.points == 0) return;
  st.c.write(st.coefficients.data() + orbital * st.components, st.components * sizeof(float));
  MOLACCEL_CL_TRY(rt::api()->EnqueueNDRangeKernel(st.device->queue, st.kernel, 3, nullptr, st.global, nullptr,
                                                  0, nullptr, nullptr),
                  "clEnqueueNDRangeKernel " + st.kernel_name);
}

void Evaluation::read(float* out) const {
  state_->out.read(out, state_->points * sizeof(float));
}

void Evaluation::finish() const {
  MOLACCEL_CL_TRY(rt::api()->Finish(state_->device->queue), "clFinish");
}

std::string Evaluation::describe() const {
  return fmt::format("opencl:{} {} ({})", state_->device->info.index, state_->generic ? "generic" : "jit",
                     state_->device->info.name);
}

}  // namespace opencl_backend

std::vector<float> evaluate_orbitals_opencl(int device, const Wavefunction& wfn, const GridSpec& grid,
                                            const std::vector<OrbitalRef>& orbitals,
                                            const EvaluateOptions& options, EvaluationInfo* info) {
  const double start = now_seconds();
  opencl_backend::Evaluation evaluation(device, wfn, grid, orbitals, options);
  const std::size_t points = grid.point_count();
  std::vector<float> result(points * orbitals.size());
  for (std::size_t o = 0; o < orbitals.size() && points > 0; ++o) {
    evaluation.launch(o);
    evaluation.read(result.data() + o * points);
  }
  if (info) {
    info->backend = evaluation.describe();
    info->seconds = now_seconds() - start;
  }
  return result;
}

}  // namespace molaccel::orbital

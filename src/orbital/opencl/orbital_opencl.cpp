// Orbitals on OpenCL: the JIT kernel (the basis set folded into OpenCL C by jit_source.cpp, the
// same per-element-type functions as the CUDA JIT) or the generic kernel below (the basis set in
// buffers, loops over shells and Cartesian components for any l the tables have).
#include <algorithm>

#include "molaccel/opencl.hpp"
#include "orbital/basis_functions.hpp"
#include "orbital/jit_source.hpp"
#include "orbital/packed_basis.hpp"
#include "runtime/opencl/opencl.hpp"

namespace molaccel::orbital {

namespace {

namespace rt = ::molaccel::opencl;

// The generic kernel: one work-item per point. Shell records: l, first primitive, primitive
// count, first component; powers: (x, y, z) of every Cartesian component, l by l (power_first[l]).
constexpr const char* kGenericKernel = R"(
inline float ipow(float x, int n) {
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

std::vector<float> evaluate_orbitals_opencl(int device, const Wavefunction& wfn, const GridSpec& grid,
                                            const std::vector<OrbitalRef>& orbitals,
                                            const EvaluateOptions& options, EvaluationInfo* info) {
  const bool generic = options.backend == Backend::cuda_generic;
  if (options.backend != Backend::automatic && options.backend != Backend::cuda_jit && !generic)
    throw InputError(
        "--backend", 0,
        fmt::format("{} does not run on OpenCL (auto or jit: the JIT kernel; generic: the generic one)",
                    to_string(options.backend)),
        __FILE__, __LINE__);
  const double start = now_seconds();
  rt::Device& d = rt::device(device);
  const bool fp64 = d.info.fp64;
  const detail::PackedBasis basis = detail::pack_basis(wfn, options.screening_tolerance);
  const std::vector<float> coefficients = detail::cartesian_coefficients(wfn, orbitals);
  const std::size_t points = grid.point_count();
  std::vector<float> result(points * orbitals.size());
  if (result.empty()) return result;
  for (std::size_t a = 0; a < 3; ++a)
    if (grid.counts[a] > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw Error("orbital on OpenCL: grid too large", __FILE__, __LINE__);

  std::vector<double> grid_values(grid.origin.begin(), grid.origin.end());
  for (const auto& axis : grid.axes) grid_values.insert(grid_values.end(), axis.begin(), axis.end());
  const std::string coord = fp64 ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\ntypedef double COORD;\n"
                                 : "typedef float COORD;\n";
  rt::BuildRequest request;
  std::vector<rt::Buffer> buffers;
  auto coordinates = [&](const std::vector<double>& v) {
    return fp64 ? upload(d, as_coordinates<double>(v)) : upload(d, as_coordinates<float>(v));
  };
  rt::Buffer grid_buffer = coordinates(grid_values);
  rt::Buffer c_buffer(d,
                      std::max<std::size_t>(1, static_cast<std::size_t>(basis.components)) * sizeof(float));
  rt::Buffer out_buffer(d, points * sizeof(float));
  const int nx = static_cast<int>(grid.counts[0]), ny = static_cast<int>(grid.counts[1]),
            nz = static_cast<int>(grid.counts[2]);

  if (generic) {
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
    buffers.push_back(coordinates(basis.atom_xyz));
    buffers.push_back(upload(d, basis.atom_first_shell));
    buffers.push_back(upload(d, shells));
    buffers.push_back(upload(d, shell_cut2));
    buffers.push_back(upload(d, basis.exponent));
    buffers.push_back(upload(d, basis.coefficient));
    buffers.push_back(upload(d, basis.cutoff_r2));
    buffers.push_back(upload(d, powers));
    buffers.push_back(upload(d, power_first));
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
    buffers.push_back(coordinates(xyz));
    buffers.push_back(upload(d, base));
  }
  request.needs_fp64 = fp64;
  const rt::Program program = rt::default_binary_cache().build(d, request);
  const cl_kernel kernel = program.kernel(request.kernel_names[0]);
  Arguments args(kernel);
  if (generic) {
    args << buffers[0].get() << buffers[1].get() << static_cast<cl_int>(basis.atom_count())
         << buffers[2].get() << buffers[3].get() << buffers[4].get() << buffers[5].get() << buffers[6].get()
         << buffers[7].get() << buffers[8].get();
  } else {
    args << buffers[0].get() << buffers[1].get();
  }
  args << c_buffer.get() << grid_buffer.get() << static_cast<cl_int>(nx) << static_cast<cl_int>(ny)
       << static_cast<cl_int>(nz) << out_buffer.get();
  const std::size_t global[3] = {grid.counts[2], grid.counts[1], grid.counts[0]};
  const std::size_t components = static_cast<std::size_t>(basis.components);
  for (std::size_t o = 0; o < orbitals.size(); ++o) {
    c_buffer.write(coefficients.data() + o * components, components * sizeof(float));
    MOLACCEL_CL_TRY(
        rt::api()->EnqueueNDRangeKernel(d.queue, kernel, 3, nullptr, global, nullptr, 0, nullptr, nullptr),
        "clEnqueueNDRangeKernel " + request.kernel_names[0]);
    out_buffer.read(result.data() + o * points, points * sizeof(float));
  }
  if (info) {
    info->backend = fmt::format("opencl:{} {} ({})", d.info.index, generic ? "generic" : "jit", d.info.name);
    info->seconds = now_seconds() - start;
  }
  return result;
}

}  // namespace molaccel::orbital

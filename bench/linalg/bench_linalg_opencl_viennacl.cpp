// ViennaCL 1.7.1's BiCGStab through its OpenCL backend, linked into bench_linalg_opencl when
// ViennaCL and the ICD loader's development files are found, so its time per iteration is
// measured in the same process and on the same device as molaccel's (compiled apart: ViennaCL's
// headers are not warning-free).
#define VIENNACL_WITH_OPENCL
#include <viennacl/ocl/backend.hpp>

#include <string>

#include "common/harness.hpp"
#include "linalg/viennacl_bicgstab.hpp"

namespace molaccel::bench {

// Selects ViennaCL's context on the first platform with a device of the type (GPU or CPU);
// returns its name, or an empty string where there is none.
std::string viennacl_opencl_select(bool gpu) {
  const cl_device_type type = gpu ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_CPU;
  long platform = -1;
  try {
    auto platforms = viennacl::ocl::get_platforms();
    for (std::size_t p = 0; p < platforms.size() && platform < 0; ++p) try {
        if (!platforms[p].devices(type).empty()) platform = static_cast<long>(p);
      } catch (const std::exception&) {  // a platform without such a device
      }
  } catch (const std::exception&) {
    return {};
  }
  if (platform < 0) return {};
  viennacl::ocl::set_context_platform_index(0, static_cast<std::size_t>(platform));
  if (gpu)
    viennacl::ocl::set_context_device_type(0, viennacl::ocl::gpu_tag());
  else
    viennacl::ocl::set_context_device_type(0, viennacl::ocl::cpu_tag());
  return viennacl::ocl::current_device().name();
}

// Seconds per iteration of ViennaCL's BiCGStab on the grid x grid Poisson system.
Timing viennacl_opencl_bicgstab(std::size_t grid, std::size_t iterations) {
  return viennacl_bicgstab_poisson(grid, iterations).timing;
}

}  // namespace molaccel::bench

// molaccel on OpenCL: device discovery and the OpenCL paths of linalg (the generator's OpenCL C
// dialect). The ICD loader (libOpenCL.so.1) is opened on first use, so a machine without OpenCL
// runs everything else. OpenCL is only ever an explicit choice (`--device opencl` or `opencl:N`);
// `auto` never picks it. This header is OpenCL-free.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "molaccel/linalg.hpp"
#include "molaccel/orbital.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel {

// An OpenCL device (any vendor, CPUs included). Devices are numbered across platforms in the
// order the ICD loader lists them: `--device opencl:N`.
struct OpenClDeviceInfo {
  int index = 0;
  std::string platform;  // platform name
  std::string name;
  std::string vendor;
  std::string version;         // CL_DEVICE_VERSION
  std::string driver_version;  // CL_DRIVER_VERSION
  bool gpu = false;            // CL_DEVICE_TYPE_GPU
  bool fp64 = false;           // cl_khr_fp64
  int compute_units = 0;
  std::size_t global_memory = 0;
  std::size_t max_work_group = 0;
};
// Every OpenCL device (empty in a build without OpenCL, without an ICD loader or without a device).
std::vector<OpenClDeviceInfo> opencl_devices();
// Why opencl_devices() is empty, in words.
std::string opencl_absence_reason();
// `opencl` -> 0, `opencl:N` -> N, any other device text -> nullopt; a malformed index throws
// InputError("--device", ...).
std::optional<int> parse_opencl_device(std::string_view device);

}  // namespace molaccel

namespace molaccel::linalg::opencl {

// The OpenCL C translation unit of `operation` (`group` work-items per row of a product).
std::string source(const CustomOperation& operation, int group = 1);
// Runs `operation` once on OpenCL device `device` with host operands (the layout of
// reference_execute: dense matrices row-major; written operands are downloaded into `operands`).
// Throws NotCompiled in a build without OpenCL, DeviceUnavailable for a missing device, and an
// Error naming the device and cl_khr_fp64 for a double operation on a device without fp64.
void execute(const CustomOperation& operation, int device, std::vector<ReferenceOperand>& operands);
// CG / BiCGStab from x = 0. options.launch: automatic = one persistent kernel for the whole solve
// on a GPU with fp64 for up to 4 x 256 rows per compute unit without a preconditioner (the grid
// barrier needs every work-group resident), else a host loop over the generated kernels
// (options.batch iterations per host check, 8 when 0); resident = the persistent kernel on any
// device (one work-group on a non-GPU device; no preconditioner); graph, fused = the host loop.
// Errors as execute's.
SolverResult solve(int device, const HostCsr<double>& a, std::span<const double> b,
                   const SolverOptions& options);

}  // namespace molaccel::linalg::opencl

namespace molaccel::orbital {

// Orbital values on OpenCL device `device` (result[o * grid.point_count() + p], fp32, like
// evaluate_orbitals). options.backend: automatic or cuda_jit = the JIT kernel (the basis set folded
// into OpenCL C), cuda_generic = the generic kernel; other backends are an InputError. Point-atom
// offsets are taken in double where the device has fp64.
std::vector<float> evaluate_orbitals_opencl(int device, const Wavefunction& wavefunction,
                                            const GridSpec& grid, const std::vector<OrbitalRef>& orbitals,
                                            const EvaluateOptions& options = {},
                                            EvaluationInfo* info = nullptr);

}  // namespace molaccel::orbital

// linalg on OpenCL in a build without OpenCL headers: every entry says so.
#include "linalg/backend.hpp"
#include "linalg/codegen/codegen.hpp"
#include "molaccel/opencl.hpp"

namespace molaccel::linalg::opencl {

std::string source(const CustomOperation& operation, int group) {
  return generate_opencl_source(operation.plan(), group);
}

void execute(const CustomOperation&, int, std::vector<ReferenceOperand>&) {
  MOLACCEL_THROW(NotCompiled, "linalg on OpenCL (this build has no OpenCL support: install opencl-headers)");
}

SolverResult solve(int, const HostCsr<double>&, std::span<const double>, const SolverOptions&) {
  MOLACCEL_THROW(NotCompiled, "linalg on OpenCL (this build has no OpenCL support: install opencl-headers)");
}

}  // namespace molaccel::linalg::opencl

// The generator's OpenCL C dialect (the CUDA dialect is declared in linalg/backend.hpp).
#pragma once

#include <string>

#include "linalg/plan.hpp"

namespace molaccel::linalg {

// The kernels of generate_cuda_source in OpenCL C (work-groups of 256; src/linalg/opencl/ runs them).
std::string generate_opencl_source(const OperationPlan& plan, int group);

}  // namespace molaccel::linalg

// The generator's OpenCL C dialect (the CUDA dialect is declared in linalg/backend.hpp).
#pragma once

#include <string>

#include "linalg/plan.hpp"

namespace molaccel::linalg {

// The dialect's spelling of what differs between CUDA C++ and OpenCL C: the generator's kernels
// (codegen.cpp) and the solver programs' persistent kernels (program/program_cuda.cpp).
struct Dialect {
  bool opencl = false;
  const char* function;      // qualifiers of helper functions, with their space
  const char* global;        // address space of kernel pointers
  const char* int64;         // 64-bit integer type
  const char* thread;        // index of the thread in its block / work-group
  const char* block;         // index of the block / work-group
  const char* block_size;    // threads per block
  const char* blocks;        // blocks in the grid
  const char* kernel;        // kernel declaration up to the name
  const char* scratch;       // block-shared scratch array declaration
  const char* restrict_;     // the restrict qualifier
  const char* int64_suffix;  // suffix of a 64-bit integer literal
};
extern const Dialect cuda_dialect, opencl_dialect;

// The kernels of generate_cuda_source in OpenCL C (work-groups of 256; src/linalg/opencl/ runs them).
std::string generate_opencl_source(const OperationPlan& plan, int group);

}  // namespace molaccel::linalg

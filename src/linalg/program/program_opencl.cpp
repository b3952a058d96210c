// OpenCL C emission of a planned program: the emitter of program_cuda.cpp in the OpenCL dialect,
// with these helper blocks (OpenCL 1.2: local memory for block sums, 32-bit global atomics and
// memory fences for the grid barrier). OpenCL C declares local memory in the kernel only: the
// kernel holds `scratch` and passes it. src/linalg/opencl/persistent.cpp launches the kernel with
// at most as many work-groups as the device runs at once.
//
// The grid barrier is a sense-reversing barrier on two words: an arrival count and a
// generation. Work-item 0 of each work-group reads the generation, fences its group's writes
// (after the work-group barrier) and arrives; the last to arrive resets the count and advances
// the generation, the others spin until the generation moves; a fence, then the work-group
// barrier. The count is back to zero after every barrier, so a launch needs the words zeroed
// once. Values another work-group wrote before a barrier (vector elements read at other rows,
// the blocks' partial sums) are read through volatile loads, which skip the non-coherent
// per-compute-unit caches.
#include "linalg/program/program_cuda.hpp"

namespace molaccel::linalg::program {

namespace {

constexpr const char* kOpenClHelpers = R"(
// A vector element or partial sum written by another work-group before the grid barrier.
T mp_load(__global const T* p) { return *(volatile __global const T*)p; }
double mp_load_double(__global const double* p) { return *(volatile __global const double*)p; }
// Sums over the work-group of k values per work-item, at scratch[r * 256 + id] for r < k (kmax:
// the kernel's most per segment): sixteen work-items per value add up sixteen entries each (at a
// stride of 16: consecutive work-items read consecutive words) into scratch[256 * kmax + 16 r ..];
// mp_total then adds those sixteen in every work-item. A fixed order, the same in every
// work-group; two work-group barriers for all k and no barrier inside a loop (PoCL's kernel
// compiler replicates the code around each barrier in a loop, at a cost that grows fast).
void mp_block_sums(__local double* scratch, int k, int kmax) {
  const int id = (int)get_local_id(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (id < 16 * k) {
    const int r = id / 16, c = id % 16;
    double s = 0.0;
    for (int i = 0; i < 16; ++i) s += scratch[r * 256 + i * 16 + c];
    scratch[256 * kmax + r * 16 + c] = s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
double mp_total(__local const double* scratch, int r, int kmax) {
  double s = 0.0;
  for (int i = 0; i < 16; ++i) s += scratch[256 * kmax + r * 16 + i];
  return s;
}
// The sum of the work-groups' partials, in group order (read after the grid barrier).
double mp_partials_total(__global const double* partials) {
  double s = 0.0;
  for (int b = 0; b < (int)get_num_groups(0); ++b) s += mp_load_double(partials + b);
  return s;
}
// The grid barrier: counter[0] counts arrivals, counter[1] is the generation.
void mp_grid_barrier(volatile __global int* counter) {
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    const int generation = counter[1];
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    if (atomic_inc(&counter[0]) == (int)get_num_groups(0) - 1) {
      atomic_xchg(&counter[0], 0);
      mem_fence(CLK_GLOBAL_MEM_FENCE);
      atomic_inc(&counter[1]);
    } else {
      while (counter[1] == generation) {
      }
    }
    mem_fence(CLK_GLOBAL_MEM_FENCE);
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
}
double mp_safe_div(double a, double b) { return b == 0.0 ? 0.0 : a / b; }
)";

}  // namespace

std::string generate_program_opencl(const Program& program, const ProgramPlan& plan) {
  // Nested products are not emitted in OpenCL C: under PoCL, random programs holding them ended
  // with values apart from the host executor's (1e-5 in a vector, or a wrong scalar) where the
  // CUDA forms and the CPU agree; not traced yet.
  if (nests_products(program))
    throw Error("linalg program " + program.name() +
                    ": products nested in products run on CUDA GPUs and the CPU, not through OpenCL",
                __FILE__, __LINE__);
  return generate_program(program, plan, opencl_dialect, kOpenClHelpers);
}

}  // namespace molaccel::linalg::program

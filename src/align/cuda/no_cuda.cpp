// CPU-only build: the GPU entry point exists and says clearly that CUDA is not compiled in.
#include "align/kernels.hpp"

namespace molaccel::align::detail::cuda {

void score_batch(WorkerContext&, const std::vector<std::span<const std::uint8_t>>&, const SubjectBatch&,
                 const std::uint32_t*, const Scoring&, std::vector<int*>&, int, const gpu_entry::Tuning*,
                 KernelCounters&) {
  MOLACCEL_THROW(NotCompiled, "the CUDA backend of align (this build has no CUDA)");
}

void prepare(WorkerContext&) {}

}  // namespace molaccel::align::detail::cuda

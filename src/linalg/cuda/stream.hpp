// The linalg engine's in-order stream per device (defined in cuda/executor.cpp), for the CUDA
// sources of the engine that launch outside the generator (cuda/resident.cu).
#pragma once

#include <cuda_runtime.h>

namespace molaccel::linalg::gpu {
cudaStream_t linalg_stream(int device);
}  // namespace molaccel::linalg::gpu

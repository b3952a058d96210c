// The CPU backend's fused loop: a stage compiled into a short instruction list that runs over
// batches of rows held in registers (arrays of `batch` values), so each instruction is a tight
// loop the compiler vectorises. One source (fused_loop.cpp) is built per instruction set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace molaccel::linalg::cpu {

constexpr std::size_t batch = 256;        // rows per register
constexpr std::size_t chunk_rows = 8192;  // rows per scheduled chunk (and per partial sum)

enum class Opcode : std::uint8_t {
  load,       // dst[i] = ptr[row]          (0 beyond `length`)
  broadcast,  // dst[i] = imm
  dense_dot,  // dst[i] = sum_j A[row*ld + j] * vec[j]      (ptr = A, ptr2 = vec)
  csr_dot,  // dst[i] = sum_k val[k] * vec[col[k]]        (ptr = row_ptr, ptr2 = col, ptr3 = val, ptr4 = vec)
  negate,
  add,
  subtract,
  multiply,
  divide,
  exp,
  log,
  sqrt,
  abs,
  sin,
  cos,
  tanh,
  nonzero,
  max,
  min,
  pow,
  safe_div,
  greater
};

struct Instruction {
  Opcode op = Opcode::broadcast;
  int dst = 0, a = 0, b = 0;
  const void* ptr = nullptr;
  const void* ptr2 = nullptr;
  const void* ptr3 = nullptr;
  const void* ptr4 = nullptr;
  std::size_t length = 0;  // valid rows of a load / product
  std::size_t ld = 0, cols = 0;
  double imm = 0;
};

template <class T>
struct ChunkProgram {
  std::vector<Instruction> code;
  int registers = 0;
  struct Reduction {
    int a = 0, b = 0;
    std::size_t length = 0;
    int slot = 0;
  };  // sum a*b
  std::vector<Reduction> reductions;
  struct Store {
    int reg = 0;
    T* dst = nullptr;
    std::size_t length = 0;
  };
  std::vector<Store> stores;  // after every register of the batch is computed
};

// Runs rows [begin, end) and adds each reduction's sum to partials[slot].
template <class T>
using ChunkFunction = void (*)(const ChunkProgram<T>& program, std::size_t begin, std::size_t end,
                               double* partials, T* registers);

struct ChunkKernels {
  ChunkFunction<float> f32;
  ChunkFunction<double> f64;
  const char* isa;
};

namespace isa_scalar {
ChunkKernels kernels();
}
namespace isa_avx2 {
ChunkKernels kernels();
}
namespace isa_avx512 {
ChunkKernels kernels();
}

}  // namespace molaccel::linalg::cpu

// One batch interpreter, compiled once per instruction set (molaccel_add_multiversion): every
// instruction is a loop over `batch` rows with restrict pointers, which the compiler turns into
// SSE/AVX2/AVX-512 code; sums use eight independent lanes so they vectorise without -ffast-math.
#include <algorithm>
#include <cmath>
#include <vector>

#include "linalg/cpu/program.hpp"

namespace molaccel::linalg::cpu::MOLACCEL_ISA_NAMESPACE {

namespace {

template <class T>
double dot_lanes(const T* __restrict a, const T* __restrict b, std::size_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += double(a[i + k]) * double(b[i + k]);
  double tail = 0;
  for (; i < n; ++i) tail += double(a[i]) * double(b[i]);
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) + tail;
}

// Each element-wise loop is its own function with restrict parameters: GCC honours restrict on
// parameters (not on local pointers), which is what lets it vectorise the register loops.
#define MOLACCEL_LOOP(name, expr)                                                                    \
  template <class T>                                                                                 \
  __attribute__((noinline)) void name(T* __restrict d, const T* __restrict a, const T* __restrict b, \
                                      std::size_t n) {                                               \
    (void)a;                                                                                         \
    (void)b;                                                                                         \
    for (std::size_t i = 0; i < n; ++i) d[i] = (expr);                                               \
  }
MOLACCEL_LOOP(loop_negate, -a[i])
MOLACCEL_LOOP(loop_add, a[i] + b[i])
MOLACCEL_LOOP(loop_subtract, a[i] - b[i])
MOLACCEL_LOOP(loop_multiply, a[i] * b[i])
MOLACCEL_LOOP(loop_divide, a[i] / b[i])
MOLACCEL_LOOP(loop_exp, std::exp(a[i]))
MOLACCEL_LOOP(loop_log, std::log(a[i]))
MOLACCEL_LOOP(loop_sqrt, std::sqrt(a[i]))
MOLACCEL_LOOP(loop_abs, std::fabs(a[i]))
MOLACCEL_LOOP(loop_sin, std::sin(a[i]))
MOLACCEL_LOOP(loop_cos, std::cos(a[i]))
MOLACCEL_LOOP(loop_tanh, std::tanh(a[i]))
MOLACCEL_LOOP(loop_nonzero, a[i] != T(0) ? T(1) : T(0))
MOLACCEL_LOOP(loop_max, a[i] < b[i] ? b[i] : a[i])  // std::max order (NaN as the reference)
MOLACCEL_LOOP(loop_min, b[i] < a[i] ? b[i] : a[i])  // std::min order
MOLACCEL_LOOP(loop_pow, std::pow(a[i], b[i]))
MOLACCEL_LOOP(loop_safe_div, b[i] == T(0) ? T(0) : a[i] / b[i])
MOLACCEL_LOOP(loop_greater, a[i] > b[i] ? T(1) : T(0))
#undef MOLACCEL_LOOP

template <class T>
__attribute__((noinline)) void loop_copy(T* __restrict d, const T* __restrict src, std::size_t valid,
                                         std::size_t n) {
  for (std::size_t i = 0; i < valid; ++i) d[i] = src[i];
  for (std::size_t i = valid; i < n; ++i) d[i] = T(0);
}

template <class T>
__attribute__((noinline)) void loop_fill(T* __restrict d, T v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = v;
}

template <class T>
void run_chunk(const ChunkProgram<T>& p, std::size_t begin, std::size_t end, double* partials, T* regs) {
  // Where each register's values are for the current batch: its own storage, or (a load of a
  // full batch) the operand itself, which saves the copy. Broadcasts are filled once per chunk.
  std::vector<const T*> at(static_cast<std::size_t>(std::max(1, p.registers)));
  for (const Instruction& ins : p.code)
    if (ins.op == Opcode::broadcast) {
      loop_fill(regs + std::size_t(ins.dst) * batch, T(ins.imm), batch);
      at[std::size_t(ins.dst)] = regs + std::size_t(ins.dst) * batch;
    }
  for (std::size_t row0 = begin; row0 < end; row0 += batch) {
    const std::size_t count = std::min(batch, end - row0);
    for (const Instruction& ins : p.code) {
      T* d = regs + std::size_t(ins.dst) * batch;
      const T* a = at[std::size_t(ins.a)];
      const T* b = at[std::size_t(ins.b)];
      const std::size_t valid = ins.length > row0 ? std::min(count, ins.length - row0) : 0;
      if (ins.op != Opcode::broadcast && ins.op != Opcode::load) at[std::size_t(ins.dst)] = d;
      switch (ins.op) {
        case Opcode::load:
          if (valid == count) {
            at[std::size_t(ins.dst)] = static_cast<const T*>(ins.ptr) + row0;
          } else {
            loop_copy(d, static_cast<const T*>(ins.ptr) + row0, valid, count);
            at[std::size_t(ins.dst)] = d;
          }
          break;
        case Opcode::broadcast:
          break;
        case Opcode::dense_dot: {
          const T* m = static_cast<const T*>(ins.ptr);
          const T* v = static_cast<const T*>(ins.ptr2);
          for (std::size_t i = 0; i < valid; ++i) d[i] = T(dot_lanes(m + (row0 + i) * ins.ld, v, ins.cols));
          for (std::size_t i = valid; i < count; ++i) d[i] = T(0);
          break;
        }
        case Opcode::csr_dot: {
          const auto* rp = static_cast<const std::int32_t*>(ins.ptr);
          const auto* col = static_cast<const std::int32_t*>(ins.ptr2);
          const T* val = static_cast<const T*>(ins.ptr3);
          const T* v = static_cast<const T*>(ins.ptr4);
          for (std::size_t i = 0; i < valid; ++i) {
            double s = 0;
            for (std::int32_t k = rp[row0 + i]; k < rp[row0 + i + 1]; ++k)
              s += double(val[k]) * double(v[col[k]]);
            d[i] = T(s);
          }
          for (std::size_t i = valid; i < count; ++i) d[i] = T(0);
          break;
        }
        case Opcode::negate:
          loop_negate(d, a, b, count);
          break;
        case Opcode::add:
          loop_add(d, a, b, count);
          break;
        case Opcode::subtract:
          loop_subtract(d, a, b, count);
          break;
        case Opcode::multiply:
          loop_multiply(d, a, b, count);
          break;
        case Opcode::divide:
          loop_divide(d, a, b, count);
          break;
        case Opcode::exp:
          loop_exp(d, a, b, count);
          break;
        case Opcode::log:
          loop_log(d, a, b, count);
          break;
        case Opcode::sqrt:
          loop_sqrt(d, a, b, count);
          break;
        case Opcode::abs:
          loop_abs(d, a, b, count);
          break;
        case Opcode::sin:
          loop_sin(d, a, b, count);
          break;
        case Opcode::cos:
          loop_cos(d, a, b, count);
          break;
        case Opcode::tanh:
          loop_tanh(d, a, b, count);
          break;
        case Opcode::nonzero:
          loop_nonzero(d, a, b, count);
          break;
        case Opcode::max:
          loop_max(d, a, b, count);
          break;
        case Opcode::min:
          loop_min(d, a, b, count);
          break;
        case Opcode::pow:
          loop_pow(d, a, b, count);
          break;
        case Opcode::safe_div:
          loop_safe_div(d, a, b, count);
          break;
        case Opcode::greater:
          loop_greater(d, a, b, count);
          break;
      }
    }
    for (const auto& r : p.reductions) {
      const std::size_t valid = r.length > row0 ? std::min(count, r.length - row0) : 0;
      partials[r.slot] += dot_lanes(at[std::size_t(r.a)], at[std::size_t(r.b)], valid);
    }
    // Simultaneous assignment: a register that still points into an operand (x = y, y = x)
    // is copied before the first store can overwrite that operand.
    if (p.stores.size() > 1)
      for (const auto& s : p.stores) {
        T* own = regs + std::size_t(s.reg) * batch;
        if (at[std::size_t(s.reg)] != own) {
          loop_copy(own, at[std::size_t(s.reg)], count, count);
          at[std::size_t(s.reg)] = own;
        }
      }
    for (const auto& s : p.stores) {
      const std::size_t valid = s.length > row0 ? std::min(count, s.length - row0) : 0;
      if (s.dst + row0 != at[std::size_t(s.reg)])
        loop_copy(s.dst + row0, at[std::size_t(s.reg)], valid, valid);
    }
  }
}

}  // namespace

ChunkKernels kernels() {
#define MOLACCEL_STRINGIFY2(x) #x
#define MOLACCEL_STRINGIFY(x) MOLACCEL_STRINGIFY2(x)
  return {&run_chunk<float>, &run_chunk<double>, MOLACCEL_STRINGIFY(MOLACCEL_ISA)};
}

}  // namespace molaccel::linalg::cpu::MOLACCEL_ISA_NAMESPACE

// The host side of a program's persistent kernel, shared by the CUDA (program_gpu.cpp) and OpenCL
// (linalg/opencl/persistent.cpp) runs: the inputs packed into the kernel's vector and scalar
// buffers, and the outcome, vectors, scalars and monitors read back into a ProgramResult. The
// buffer layouts are the ones program_cuda.hpp describes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "linalg/program/program_plan.hpp"
#include "molaccel/linalg_program.hpp"
#include "molaccel/runtime.hpp"

namespace molaccel::linalg::program {

template <class T>
struct PackedInputs {
  std::vector<int> vector_symbols;  // symbol index of each vector, in declaration order
  std::vector<T> vectors;           // two buffers of n per vector (at least one element)
  std::vector<double> scalars;      // one per symbol (at least one element)
};

template <class T>
PackedInputs<T> pack_inputs(const Program& program, const ProgramInputs& given, std::size_t n) {
  ProgramInputs storage;
  const ProgramInputs& inputs = with_derived_inputs(program, given, storage);
  const auto& symbols = program.symbols();
  PackedInputs<T> out;
  for (std::size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].kind == NodeKind::vector) out.vector_symbols.push_back(int(i));
  out.vectors.assign(std::max<std::size_t>(1, 2 * out.vector_symbols.size() * n), T(0));
  for (const auto& [name, values] : inputs.vectors) {
    const int index = program.index_of(name);
    const auto o = std::size_t(std::find(out.vector_symbols.begin(), out.vector_symbols.end(), index) -
                               out.vector_symbols.begin());
    if (o == out.vector_symbols.size()) throw Error("'" + name + "' is not a vector", __FILE__, __LINE__);
    if (values.size() != n) throw Error("vector '" + name + "' has the wrong length", __FILE__, __LINE__);
    for (std::size_t r = 0; r < n; ++r) out.vectors[2 * o * n + r] = T(values[r]);
  }
  out.scalars.assign(std::max<std::size_t>(1, symbols.size()), 0.0);
  for (const auto& [name, value] : inputs.scalars) out.scalars[std::size_t(program.index_of(name))] = value;
  return out;
}

// `outcome`: iterations, status (stop test + 1, or -1 at the cap), each vector's current buffer.
template <class T, class Outcome>
ProgramResult unpack_result(const Program& program, const ProgramPlan& plan,
                            const std::vector<int>& vector_symbols, std::size_t n,
                            const std::vector<Outcome>& outcome, const std::vector<T>& vectors,
                            const std::vector<double>& scalars, const std::vector<double>& monitor_values,
                            int blocks, double seconds) {
  const auto& symbols = program.symbols();
  const std::size_t monitors = program.monitors().size();
  ProgramResult result;
  result.iterations = int(outcome[0]);
  const auto status = static_cast<long long>(outcome[1]);
  result.status = status > 0 ? program.stop_tests()[std::size_t(status - 1)].status : "iteration limit";
  result.barriers_per_iteration = plan.barriers_per_iteration();
  result.seconds = seconds;
  result.blocks = blocks;
  result.monitor_history.assign(monitors, {});
  for (std::size_t k = 0; k <= std::size_t(result.iterations); ++k)
    for (std::size_t m = 0; m < monitors; ++m)
      result.monitor_history[m].push_back(monitor_values[k * monitors + m]);
  for (std::size_t o = 0; o < vector_symbols.size(); ++o) {
    const std::size_t buffer = 2 * o + std::size_t(outcome[2 + o]);
    std::vector<double>& out = result.vectors[symbols[std::size_t(vector_symbols[o])].name];
    out.assign(vectors.begin() + std::ptrdiff_t(buffer * n),
               vectors.begin() + std::ptrdiff_t((buffer + 1) * n));
  }
  for (std::size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].kind == NodeKind::device_scalar) result.scalars[symbols[i].name] = scalars[i];
  return result;
}

}  // namespace molaccel::linalg::program

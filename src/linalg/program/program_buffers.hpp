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

// The symbol index of each vector, in declaration order: vector o owns buffers 2o and 2o + 1.
inline std::vector<int> vector_symbols_of(const Program& program) {
  const auto& symbols = program.symbols();
  std::vector<int> out;
  for (std::size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].kind == NodeKind::vector) out.push_back(int(i));
  return out;
}

// Calls place(o, values) for each input vector (`inputs` with the derived ones), o its position
// in `vector_symbols`: the vector's first buffer gets the values.
template <class Place>
void for_each_input_vector(const Program& program, const ProgramInputs& inputs,
                           const std::vector<int>& vector_symbols, std::size_t n, Place place) {
  for (const auto& [name, values] : inputs.vectors) {
    const int index = program.index_of(name);
    const auto o =
        std::size_t(std::find(vector_symbols.begin(), vector_symbols.end(), index) - vector_symbols.begin());
    if (o == vector_symbols.size()) throw Error("'" + name + "' is not a vector", __FILE__, __LINE__);
    if (values.size() != n) throw Error("vector '" + name + "' has the wrong length", __FILE__, __LINE__);
    place(o, values);
  }
}

// One value per symbol (at least one element): the scalar inputs at their symbols, else 0.
inline std::vector<double> pack_scalars(const Program& program, const ProgramInputs& inputs) {
  std::vector<double> scalars(std::max<std::size_t>(1, program.symbols().size()), 0.0);
  for (const auto& [name, value] : inputs.scalars) scalars[std::size_t(program.index_of(name))] = value;
  return scalars;
}

template <class T>
PackedInputs<T> pack_inputs(const Program& program, const ProgramInputs& given, std::size_t n) {
  ProgramInputs storage;
  const ProgramInputs& inputs = with_derived_inputs(program, given, storage);
  PackedInputs<T> out;
  out.vector_symbols = vector_symbols_of(program);
  out.vectors.assign(std::max<std::size_t>(1, 2 * out.vector_symbols.size() * n), T(0));
  for_each_input_vector(
      program, inputs, out.vector_symbols, n, [&](std::size_t o, const std::vector<double>& values) {
        std::copy(values.begin(), values.end(), out.vectors.begin() + std::ptrdiff_t(2 * o * n));
      });
  out.scalars = pack_scalars(program, inputs);
  return out;
}

// `outcome`: iterations, status (stop test + 1, or -1 at the cap), each vector's current buffer.
// `read_buffer(buffer, out)`: the values of vector buffer `buffer` (2o or 2o + 1) into `out`.
template <class Outcome, class ReadBuffer>
ProgramResult unpack_result(const Program& program, const ProgramPlan& plan,
                            const std::vector<int>& vector_symbols, const std::vector<Outcome>& outcome,
                            ReadBuffer read_buffer, const std::vector<double>& scalars,
                            const std::vector<double>& monitor_values, int blocks, double seconds) {
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
    read_buffer(buffer, result.vectors[symbols[std::size_t(vector_symbols[o])].name]);
  }
  for (std::size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].kind == NodeKind::device_scalar) result.scalars[symbols[i].name] = scalars[i];
  return result;
}

// unpack_result's vectors from all the buffers read back at once (n values each).
template <class T, class Outcome>
ProgramResult unpack_result(const Program& program, const ProgramPlan& plan,
                            const std::vector<int>& vector_symbols, std::size_t n,
                            const std::vector<Outcome>& outcome, const std::vector<T>& vectors,
                            const std::vector<double>& scalars, const std::vector<double>& monitor_values,
                            int blocks, double seconds) {
  return unpack_result(
      program, plan, vector_symbols, outcome,
      [&](std::size_t buffer, std::vector<double>& out) {
        out.assign(vectors.begin() + std::ptrdiff_t(buffer * n),
                   vectors.begin() + std::ptrdiff_t((buffer + 1) * n));
      },
      scalars, monitor_values, blocks, seconds);
}

}  // namespace molaccel::linalg::program

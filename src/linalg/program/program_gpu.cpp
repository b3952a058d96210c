// Runs a program's generated kernel (program_cuda.cpp) on a GPU: NVRTC through the runtime's
// JIT cache, one cooperative launch for the whole solve (setup and every iteration).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "linalg/program/program_buffers.hpp"
#include "linalg/program/program_cuda.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::linalg {

namespace {

template <class T>
ProgramResult run_typed(const Program& program, const program::ProgramPlan& plan, const ProgramInputs& inputs,
                        int device) {
  if (!inputs.matrix)
    throw Error("linalg program " + program.name() + ": the GPU run needs the matrix", __FILE__, __LINE__);
  const HostCsr<double>& a = *inputs.matrix;
  if (a.rows != a.cols)
    throw Error("linalg program " + program.name() + ": the matrix is not square", __FILE__, __LINE__);
  const std::size_t n = a.rows;
  cuda::DeviceGuard guard(device);

  cudaDeviceProp prop{};
  MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  JitRequest request;
  request.source = program::generate_program_cuda(program, plan);
  request.program_name = program::kernel_name(program) + ".cu";
  request.kernel_names = {program::kernel_name(program)};
  request.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
  const JitProgram compiled = default_jit_cache().compile(request);
  const cuda::LoadedProgram loaded(compiled);
  const cudaKernel_t kernel = loaded.kernel(program::kernel_name(program));

  constexpr int threads = 256;
  int per_sm = 0;
  MOLACCEL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, reinterpret_cast<const void*>(kernel), threads, 0));
  if (per_sm < 1)
    throw Error("linalg program " + program.name() + ": the kernel cannot be resident", __FILE__, __LINE__);
  const std::size_t wanted = std::max<std::size_t>(1, (n + threads - 1) / threads);
  const int blocks =
      int(std::min<std::size_t>(wanted, std::size_t(per_sm) * std::size_t(prop.multiProcessorCount)));

  // Vectors: two buffers each; scalars; partial sums; counter; monitors; outcome.
  const auto packed = program::pack_inputs<T>(program, inputs, n);
  const std::vector<int>& vector_symbols = packed.vector_symbols;
  const std::vector<T>& host_vectors = packed.vectors;
  const std::vector<double>& host_scalars = packed.scalars;
  const std::size_t slots =
      std::max<std::size_t>(1, std::max(plan.setup.reductions.size(), plan.iteration.reductions.size()));
  const std::size_t monitors = program.monitors().size();
  const std::size_t max_it = std::size_t(std::max(0, inputs.max_iterations));
  std::vector<T> values(a.values.begin(), a.values.end());

  cuda::DeviceBuffer<int> row_ptr, col_idx;
  cuda::DeviceBuffer<T> d_values, d_vectors;
  cuda::DeviceBuffer<double> d_scalars, d_partials, d_monitors;
  cuda::DeviceBuffer<unsigned long long> d_counter;
  cuda::DeviceBuffer<long long> d_outcome;
  row_ptr.upload(a.row_ptr);
  col_idx.upload(a.col_idx);
  d_values.upload(values);
  d_vectors.upload(host_vectors);
  d_scalars.upload(host_scalars);
  d_partials.resize(2 * slots * std::size_t(blocks));
  d_partials.fill_zero();
  d_monitors.resize(std::max<std::size_t>(1, (max_it + 1) * monitors));
  d_monitors.fill_zero();
  d_counter.resize(1);
  d_counter.fill_zero();
  d_outcome.resize(2 + vector_symbols.size());
  d_outcome.fill_zero();
  MOLACCEL_CUDA_TRY(cudaDeviceSynchronize());

  const int* p_row_ptr = row_ptr.data();
  const int* p_col_idx = col_idx.data();
  const T* p_values = d_values.data();
  long long p_n = static_cast<long long>(n);
  T* p_vectors = d_vectors.data();
  double* p_scalars = d_scalars.data();
  double* p_partials = d_partials.data();
  unsigned long long* p_counter = d_counter.data();
  double* p_monitors = d_monitors.data();
  long long* p_outcome = d_outcome.data();
  int p_max = inputs.max_iterations;
  void* args[] = {&p_row_ptr,  &p_col_idx, &p_values,   &p_n,       &p_vectors, &p_scalars,
                  &p_partials, &p_counter, &p_monitors, &p_outcome, &p_max};
  cuda::Event start, stop;
  start.record();
  MOLACCEL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(unsigned(blocks)),
                                                dim3(threads), args, 0, nullptr));
  cuda::check_launch(request.kernel_names[0].c_str(), __FILE__, __LINE__);
  stop.record();
  stop.synchronize();

  const auto outcome = d_outcome.download();
  const auto got_vectors = d_vectors.download();
  const auto got_scalars = d_scalars.download();
  const auto got_monitors = d_monitors.download();
  return program::unpack_result(program, plan, vector_symbols, n, outcome, got_vectors, got_scalars,
                                got_monitors, blocks, double(stop.elapsed_ms_since(start)) * 1e-3);
}

}  // namespace

ProgramResult run_program_on_gpu(const Program& program, const ProgramInputs& inputs, int device) {
  const auto plan = program::plan_program(program);
  return program.type() == ValueType::f32 ? run_typed<float>(program, plan, inputs, device)
                                          : run_typed<double>(program, plan, inputs, device);
}

}  // namespace molaccel::linalg

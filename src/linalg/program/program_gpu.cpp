// Runs a program's generated kernel (program_cuda.cpp) on a GPU: NVRTC through the runtime's
// JIT cache, one launch for the whole solve (setup and every iteration): an ordinary launch of
// one block for small systems, one thread-block cluster up to 16,384 rows (sm_90 on), else a
// cooperative grid.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "linalg/diagonal.hpp"
#include "linalg/program/program_buffers.hpp"
#include "linalg/program/program_cuda.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::linalg {

namespace {

// A launch of `blocks` blocks of `threads` as one thread-block cluster (the cluster form).
struct ClusterLaunch {
  cudaLaunchAttribute attr{};
  cudaLaunchConfig_t config{};
  ClusterLaunch(unsigned blocks, unsigned threads, std::size_t shared_bytes) {
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = shared_bytes;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = blocks;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    config.attrs = &attr;  // this object's own: neither copied nor moved
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Waits for the whole-solve kernel that ends at `stop`, telling `progress` the iterations done
// every 0.1 s (the end itself is seen within 2 ms). The kernel's leader writes the monitors' row
// `it` as iteration `it` begins (zero until then; row 0 after the set-up), so the last row whose
// first monitor is non-zero is the iterations done. Rows are read from the last one known, on a
// stream of its own beside the running kernel, in a window that doubles while it comes back full
// (a fast solve moves many rows between two polls). A monitor that is exactly zero (a residual
// of 0: the solve ends) only makes the count late.
void wait_reporting_iterations(const cuda::Event& stop, const double* monitors, std::size_t columns,
                               std::size_t rows, const std::function<void(int)>& progress) {
  using clock = std::chrono::steady_clock;
  const cuda::Stream side;
  std::vector<double> window;
  std::size_t done = 0, width = 1024;
  auto next = clock::now() + std::chrono::milliseconds(100);
  while (cudaEventQuery(stop.get()) == cudaErrorNotReady) {  // else: ended, or failed (stop.synchronize())
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (clock::now() < next) continue;
    next += std::chrono::milliseconds(100);
    const std::size_t count = std::min(width, rows - done);
    window.resize(count * columns);
    MOLACCEL_CUDA_TRY(cudaMemcpyAsync(window.data(), monitors + done * columns,
                                      window.size() * sizeof(double), cudaMemcpyDeviceToHost, side));
    side.synchronize();
    std::size_t last = count;
    while (last > 0 && window[(last - 1) * columns] == 0) --last;
    if (last == 0) continue;
    if (last == count) width *= 2;
    done += last - 1;
    progress(static_cast<int>(done));
  }
}

template <class T>
ProgramResult run_typed(const Program& program, const program::ProgramPlan& plan, const ProgramInputs& inputs,
                        int device, const program::KernelShape* forced,
                        const std::function<void(int)>& progress) {
  if (!inputs.matrix)
    throw Error("linalg program " + program.name() + ": the GPU run needs the matrix", __FILE__, __LINE__);
  const HostCsr<double>& a = *inputs.matrix;
  if (a.rows != a.cols)
    throw Error("linalg program " + program.name() + ": the matrix is not square", __FILE__, __LINE__);
  const std::size_t n = a.rows;
  cuda::DeviceGuard guard(device);

  cudaDeviceProp prop{};
  MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  const std::string name = program::kernel_name(program);
  struct Loaded {
    program::KernelShape shape;
    cuda::LoadedProgram program;
    cudaKernel_t kernel = nullptr;
    int blocks = 1, threads = 256;
    std::size_t shared_bytes = 0;  // dynamic: the shared exchange
  };
  auto load = [&](program::KernelShape shape) {
    JitRequest request;
    request.source = program::generate_program_cuda(program, plan, shape);
    request.program_name = name + ".cu";
    request.kernel_names = {name};
    request.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
    auto out = std::make_unique<Loaded>();
    out->shape = shape;
    out->program = cuda::LoadedProgram(default_jit_cache().compile(request));
    out->kernel = out->program.kernel(name);
    return out;
  };
  // Resident blocks of 256 threads per multiprocessor for a grid kernel.
  auto resident_blocks = [&](const Loaded& k) {
    int per_sm = 0;
    MOLACCEL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, reinterpret_cast<const void*>(k.kernel), 256, 0));
    if (per_sm < 1)
      throw program::FormRefused("linalg program " + program.name() + ": the kernel cannot be resident",
                                 __FILE__, __LINE__);
    return std::size_t(per_sm) * std::size_t(prop.multiProcessorCount);
  };
  // The form (docs/linalg.md): one block up to kBlockRows rows; else the resident kind on a grid
  // at the fewest rows per thread (1, 2, 4) whose threads are all resident; else streaming.
  // The matrix by diagonals where it qualifies (a forced shape says whether), else CSR.
  std::optional<DiagonalLayout> layout;
  if (forced ? forced->diagonals > 0 : true) layout = diagonal_storage(a);
  if (forced && forced->diagonals > 0 && !layout)
    throw Error("linalg program " + program.name() + ": the matrix is not by diagonals", __FILE__, __LINE__);
  // A constant stencil on a 2-D grid where it is one (a forced shape says whether).
  std::optional<DiagonalGrid> grid;
  std::optional<std::vector<double>> coef;
  if (layout && (forced ? forced->grid_width > 0 : true))
    if ((grid = diagonal_grid_of(*layout, n))) coef = diagonal_constant_of(*layout, *grid, n);
  if (forced && forced->grid_width > 0 && !coef)
    throw Error("linalg program " + program.name() + ": the matrix is not a constant stencil", __FILE__,
                __LINE__);
  auto load_matrix = [&](program::KernelShape shape) {
    if (layout) {
      shape.diagonals = int(layout->offsets.size());
      std::copy(layout->offsets.begin(), layout->offsets.end(), shape.offsets.begin());
    }
    if (coef) {
      shape.grid_width = grid->width;
      shape.grid_height = grid->height;
      std::copy(grid->a.begin(), grid->a.end(), shape.grid_a.begin());
      std::copy(grid->b.begin(), grid->b.end(), shape.grid_b.begin());
      std::copy(coef->begin(), coef->end(), shape.coef.begin());
    } else {
      shape.grid_width = 0;
    }
    return load(shape);
  };
  // A forced shape (tests) that cannot hold the rows is an error.
  constexpr std::size_t kBlockRows = 2048;
  auto ceil_div = [](std::size_t a, std::size_t b) { return (a + b - 1) / b; };
  auto too_small = [&] {
    return program::FormRefused(
        "linalg program " + program.name() + ": the kernel form cannot hold " + std::to_string(n) + " rows",
        __FILE__, __LINE__);
  };
  std::unique_ptr<Loaded> k;
  // The tile form (a constant stencil): for a program with a product nested in a product, whose
  // recomputed neighbours a block then shares through shared memory (a forced shape says whether).
  if (coef && (forced ? forced->tile_h > 0 : program::nests_products(program))) {
    program::KernelShape shape{forced ? forced->block : n <= kBlockRows, 1};
    const std::size_t h = std::size_t(grid->height), w = std::size_t(grid->width);
    if (forced && forced->tile_w > 0) {  // at most the grid (tile_w = 0: the automatic tiles)
      shape.tile_h = int(std::min<std::size_t>(std::size_t(forced->tile_h), h));
      shape.tile_w = int(std::min<std::size_t>(std::size_t(forced->tile_w), w));
    } else if (shape.block) {
      shape.tile_h = int(h);
      shape.tile_w = int(w);
    } else {
      // About one tile per multiprocessor, as square as the grid allows, at most 2,048 cells
      // (4 rows per thread of 512); else more tiles, at most 1,024 cells each (2 rows per thread).
      const std::size_t sms = std::size_t(prop.multiProcessorCount);
      for (std::size_t target = sms;; target *= 2) {
        const std::size_t ti = std::max<std::size_t>(
                              1,
                              std::size_t(std::llround(std::sqrt(double(target) * double(h) / double(w))))),
                          tj = std::max<std::size_t>(1, target / ti);
        shape.tile_h = int(ceil_div(h, std::min(ti, h)));
        shape.tile_w = int(ceil_div(w, std::min(tj, w)));
        if (std::size_t(shape.tile_h) * std::size_t(shape.tile_w) <= (target == sms ? 2048 : 1024)) break;
      }
    }
    const std::size_t cells = std::size_t(shape.tile_h) * std::size_t(shape.tile_w),
                      tiles = ceil_div(h, std::size_t(shape.tile_h)) * ceil_div(w, std::size_t(shape.tile_w));
    shape.rows_per_thread = int(ceil_div(cells, 512));  // the fewest, at most 512 threads
    // On a grid at least 256 threads: the windows around a small tile hold twice its cells and
    // more (one-barrier BiCGStab at 1e4 rows, 90-cell tiles, on an H200: 5.27 us per iteration
    // with 256 threads, 6.45 us with 96).
    if (!shape.block) shape.threads = std::max(256, program::tile_threads(shape));
    const std::size_t threads = std::size_t(program::tile_threads(shape));
    if (shape.rows_per_thread > 4 || (shape.block && tiles != 1)) {
      if (forced) throw too_small();
    } else {
      auto candidate = load_matrix(shape);
      if (shape.block || tiles <= resident_blocks(*candidate)) {
        candidate->blocks = int(tiles);
        candidate->threads = int(threads);
        k = std::move(candidate);
      } else if (forced) {
        throw too_small();
      }
    }
  }
  if (!k && (forced ? forced->block : n <= kBlockRows)) {
    // One block: up to 512 threads, up to 4 rows each; the product operands exchanged through
    // shared memory where they fit (a forced shape says whether).
    const int rows =
        forced ? std::max(1, forced->rows_per_thread) : int(std::max<std::size_t>(1, ceil_div(n, 512)));
    if (n > 512 * std::size_t(rows)) throw too_small();
    program::KernelShape shape{true, rows};
    const std::size_t exchange = program::exchange_buffers(program, plan) * n * sizeof(T);
    // (Not even tried where the exchange alone exceeds the block's shared memory: one compile.)
    shape.shared_exchange =
        forced ? forced->shared_exchange : exchange > 0 && exchange <= prop.sharedMemPerBlockOptin;
    k = load_matrix(shape);
    if (shape.shared_exchange) {
      cudaFuncAttributes attributes{};
      MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(k->kernel)));
      const bool fits = attributes.sharedSizeBytes + exchange <= prop.sharedMemPerBlockOptin;
      if (!fits && forced)
        throw Error(fmt::format("linalg program {}: {} bytes of shared exchange do not fit one block",
                                program.name(), exchange),
                    __FILE__, __LINE__);
      if (fits) {
        MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(reinterpret_cast<const void*>(k->kernel),
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(exchange)));
        k->shared_bytes = exchange;
      } else {
        shape.shared_exchange = false;
        k = load_matrix(shape);
      }
    }
    k->threads = int(std::max<std::size_t>(32, ceil_div(ceil_div(n, std::size_t(rows)), 32) * 32));
  }
  // One cluster of up to 16 blocks of 512 threads (sm_90 on), 1, 2 or 4 rows per thread, the
  // operands in shared memory: up to kClusterRows rows (a forced shape says whether). Where it
  // does not fit (shared memory, a cluster of that size), the grid.
  constexpr std::size_t kClusterRows = 16 * 2 * 512;
  if (!k && (forced ? forced->cluster_blocks > 0 : n <= kClusterRows && prop.major >= 9)) {
    program::KernelShape shape{false, 0};
    shape.threads = forced && forced->threads > 0 ? forced->threads : 512;
    if (shape.threads % 32 != 0 || shape.threads > 512)
      throw Error(fmt::format("linalg program {}: a cluster's blocks take whole warps, at most 512 threads "
                              "({} given)",
                              program.name(), shape.threads),
                  __FILE__, __LINE__);
    for (int rows : {1, 2, 4})
      if (forced ? forced->rows_per_thread == rows
                 : ceil_div(n, std::size_t(rows) * std::size_t(shape.threads)) <= 16) {
        shape.rows_per_thread = rows;
        break;
      }
    const std::size_t rb = std::size_t(shape.rows_per_thread) * std::size_t(shape.threads);
    const std::size_t blocks = rb > 0 ? ceil_div(n, rb) : 0;
    if (rb == 0 || blocks > 16 || prop.major < 9) {
      if (forced) throw too_small();
    } else {
      shape.cluster_blocks = int(blocks);
      auto candidate = load_matrix(shape);
      const void* f = reinterpret_cast<const void*>(candidate->kernel);
      const std::size_t exchange = program::exchange_buffers(program, plan) * rb * sizeof(T);
      cudaFuncAttributes attributes{};
      MOLACCEL_CUDA_TRY(cudaFuncGetAttributes(&attributes, f));
      int clusters = 0;
      if (attributes.sharedSizeBytes + exchange <= prop.sharedMemPerBlockOptin) {
        MOLACCEL_CUDA_TRY(
            cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(exchange)));
        if (blocks > 8)
          MOLACCEL_CUDA_TRY(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        const ClusterLaunch launch(unsigned(blocks), unsigned(shape.threads), exchange);
        if (cudaOccupancyMaxActiveClusters(&clusters, f, &launch.config) != cudaSuccess) {
          (void)cudaGetLastError();
          clusters = 0;
        }
      }
      if (clusters >= 1) {
        candidate->blocks = int(blocks);
        candidate->threads = shape.threads;
        candidate->shared_bytes = exchange;
        k = std::move(candidate);
      } else if (forced) {
        throw Error(fmt::format("linalg program {}: a cluster of {} blocks of {} threads ({} bytes of shared "
                                "exchange each) cannot run on this GPU",
                                program.name(), blocks, shape.threads, exchange),
                    __FILE__, __LINE__);
      }
    }
  }
  if (!k) {
    // The most rows per thread (1, 2, 4) that still give every multiprocessor a block (fewer
    // blocks: fewer arrivals at each barrier), all resident; else rows streamed.
    for (int rows : {1, 2, 4}) {
      if (forced && forced->rows_per_thread != rows) continue;
      const std::size_t wanted = ceil_div(n, 256 * std::size_t(rows));
      if (k && wanted < std::size_t(prop.multiProcessorCount)) break;
      auto candidate = load_matrix({false, rows});
      if (wanted > resident_blocks(*candidate)) {
        if (forced) throw too_small();
        if (k) break;
        continue;
      }
      candidate->blocks = int(wanted);
      k = std::move(candidate);
    }
    if (!k) {
      if (forced && forced->rows_per_thread != 0) throw too_small();
      k = load_matrix({false, 0});
      k->blocks = int(std::min(ceil_div(n, 256), resident_blocks(*k)));
    }
  }
  const int blocks = k->blocks, threads = k->threads;
  const cudaKernel_t kernel = k->kernel;

  // Vectors: two buffers each, zeroed on the device, the inputs copied into their first buffers
  // (no host image of all the buffers: at 1e7 rows CG's would be 800 MB to fill and copy); scalars;
  // partial sums; counter; monitors; outcome.
  ProgramInputs derived;
  const ProgramInputs& given = program::with_derived_inputs(program, inputs, derived);
  const std::vector<int> vector_symbols = program::vector_symbols_of(program);
  const std::vector<double> host_scalars = program::pack_scalars(program, given);
  const std::size_t slots =
      std::max<std::size_t>(1, std::max(plan.setup.reductions.size(), plan.iteration.reductions.size()));
  const std::size_t monitors = program.monitors().size();
  const std::size_t max_it = std::size_t(std::max(0, inputs.max_iterations));
  const std::vector<double> none(1, 0.0);  // a constant stencil reads no values
  const std::vector<double>& matrix_values = coef ? none : layout ? layout->values : a.values;
  std::vector<T> values(matrix_values.begin(), matrix_values.end());

  cuda::DeviceBuffer<int> row_ptr, col_idx;
  cuda::DeviceBuffer<T> d_values, d_vectors;
  cuda::DeviceBuffer<double> d_scalars, d_partials, d_monitors;
  cuda::DeviceBuffer<unsigned long long> d_counter;
  cuda::DeviceBuffer<long long> d_outcome;
  row_ptr.upload(a.row_ptr);
  col_idx.upload(a.col_idx);
  d_values.upload(values);
  d_vectors.resize(std::max<std::size_t>(1, 2 * vector_symbols.size() * n));
  d_vectors.fill_zero();
  program::for_each_input_vector(
      program, given, vector_symbols, n, [&](std::size_t o, const std::vector<double>& v) {
        T* first = d_vectors.data() + 2 * o * n;
        if constexpr (std::is_same_v<T, double>) {
          MOLACCEL_CUDA_TRY(cudaMemcpy(first, v.data(), n * sizeof(T), cudaMemcpyHostToDevice));
        } else {
          const std::vector<T> converted(v.begin(), v.end());
          MOLACCEL_CUDA_TRY(cudaMemcpy(first, converted.data(), n * sizeof(T), cudaMemcpyHostToDevice));
        }
      });
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
  if (k->shape.block) {
    MOLACCEL_CUDA_TRY(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1),
                                       dim3(unsigned(threads)), args, k->shared_bytes, nullptr));
  } else if (k->shape.cluster_blocks > 0) {
    const ClusterLaunch launch(unsigned(blocks), unsigned(threads), k->shared_bytes);
    MOLACCEL_CUDA_TRY(cudaLaunchKernelExC(&launch.config, reinterpret_cast<const void*>(kernel), args));
  } else {
    MOLACCEL_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel),
                                                  dim3(unsigned(blocks)), dim3(unsigned(threads)), args, 0,
                                                  nullptr));
  }
  cuda::check_launch(name.c_str(), __FILE__, __LINE__);
  stop.record();
  if (progress && monitors > 0) wait_reporting_iterations(stop, p_monitors, monitors, max_it + 1, progress);
  stop.synchronize();

  const auto outcome = d_outcome.download();
  const auto got_scalars = d_scalars.download();
  const auto got_monitors = d_monitors.download();
  // Each vector's current buffer alone, straight into the result (converted from fp32).
  std::vector<T> staging;
  const auto read_buffer = [&](std::size_t buffer, std::vector<double>& out) {
    out.resize(n);
    if constexpr (std::is_same_v<T, double>) {
      MOLACCEL_CUDA_TRY(
          cudaMemcpy(out.data(), d_vectors.data() + buffer * n, n * sizeof(T), cudaMemcpyDeviceToHost));
    } else {
      staging.resize(n);
      MOLACCEL_CUDA_TRY(
          cudaMemcpy(staging.data(), d_vectors.data() + buffer * n, n * sizeof(T), cudaMemcpyDeviceToHost));
      std::copy(staging.begin(), staging.end(), out.begin());
    }
  };
  ProgramResult result =
      program::unpack_result(program, plan, vector_symbols, outcome, read_buffer, got_scalars, got_monitors,
                             blocks, double(stop.elapsed_ms_since(start)) * 1e-3);
  result.kernel = fmt::format(
      "{}{}, {} of {} threads, {}, {}, {}",
      k->shape.block                ? "one block"
      : k->shape.cluster_blocks > 0 ? "one cluster"
                                    : "grid",
      k->shape.tile_h > 0 ? fmt::format(" of {} x {} tiles", k->shape.tile_h, k->shape.tile_w)
                          : std::string(),
      blocks, threads,
      k->shape.rows_per_thread > 0 ? fmt::format("{} rows per thread in registers", k->shape.rows_per_thread)
                                   : std::string("rows streamed"),
      k->shape.shared_exchange      ? "operands in shared memory"
      : k->shape.cluster_blocks > 0 ? "operands in distributed shared memory"
      : k->shape.tile_h > 0         ? "operands and their neighbours' in shared memory"
                                    : "operands in global memory",
      k->shape.grid_width > 0  ? fmt::format("constant {}-point stencil", k->shape.diagonals)
      : k->shape.diagonals > 0 ? fmt::format("{} diagonals", k->shape.diagonals)
                               : std::string("CSR"));
  return result;
}

}  // namespace

ProgramResult run_program_on_gpu(const Program& program, const ProgramInputs& inputs, int device) {
  return program::run_on_gpu(program, inputs, device, nullptr, {});
}

}  // namespace molaccel::linalg

namespace molaccel::linalg::program {
ProgramResult run_shaped_on_gpu(const Program& program, const ProgramInputs& inputs, KernelShape shape,
                                int device) {
  return run_on_gpu(program, inputs, device, &shape, {});
}

ProgramResult run_on_gpu(const Program& program, const ProgramInputs& inputs, int device,
                         const KernelShape* shape, const std::function<void(int)>& progress) {
  const auto plan = plan_program(program);
  return program.type() == ValueType::f32 ? run_typed<float>(program, plan, inputs, device, shape, progress)
                                          : run_typed<double>(program, plan, inputs, device, shape, progress);
}
}  // namespace molaccel::linalg::program

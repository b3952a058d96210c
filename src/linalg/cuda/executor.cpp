// CUDA backend of the generator: device memory of the containers, NVRTC compilation of the
// generated source through the runtime's JIT cache, launch geometry per device (dispatch ->
// stage kernels -> warp/group pieces inside the generated code) and CUDA graph capture.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "linalg/backend.hpp"
#include "runtime/cuda/cuda_support.hpp"

namespace molaccel::linalg::gpu {

namespace {

// One in-order stream per device for all linalg work: operations are ordered with each other
// and with container copies, and a solver's iteration can be captured from it.
cudaStream_t engine_stream(int device) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> streams;  // never destroyed: lives as long as the context
  std::lock_guard<std::mutex> lock(mutex);
  auto it = streams.find(device);
  if (it != streams.end()) return it->second;
  cuda::DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  MOLACCEL_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  streams[device] = s;
  return s;
}

thread_local int prepare_only_depth = 0;

// Launch tuning picked per device (the dispatch layer).
struct Tuning {
  int block = 256;             // threads per block (the generated kernels' launch bound)
  int reduction_blocks = 528;  // blocks of a reduction stage = partial sums per inner product
  int max_blocks = 1056;       // grid-stride cap for the other stages
  std::string arch = "sm_90";
};

const Tuning& tuning_for(int device) {
  static std::mutex mutex;
  static std::map<int, Tuning> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  cudaDeviceProp prop{};
  MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  Tuning t;
  // Four blocks per SM in the first pass of inner products: more loads in flight than two,
  // while the consumer's prologue adds only 4 x SMs partial sums per block (measured faster than
  // 2 or 8 per SM in the graph mode, docs/linalg.md). 8 resident blocks of 256 threads per SM
  // fill the GPU in the other stages.
  t.reduction_blocks = 4 * prop.multiProcessorCount;
  t.max_blocks = std::max(1, prop.maxThreadsPerMultiProcessor / t.block) * prop.multiProcessorCount;
  t.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
  return cache.emplace(device, t).first->second;
}

}  // namespace

struct operation_state {
  int device = -1;
  struct Compiled {
    cuda::LoadedProgram program;
    std::vector<cudaKernel_t> kernels;  // one per stage
  };
  std::map<int, Compiled> by_group;  // generated source differs by group size
  cuda::DeviceBuffer<char> partials;
  std::vector<cuda::DeviceBuffer<char>> temporaries;
};

PrepareOnlyScope::PrepareOnlyScope() {
  ++prepare_only_depth;
}
PrepareOnlyScope::~PrepareOnlyScope() {
  --prepare_only_depth;
}

void* allocate(int device, std::size_t bytes) {
  cuda::DeviceGuard guard(device);
  void* p = nullptr;
  MOLACCEL_CUDA_TRY(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
  MOLACCEL_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, engine_stream(device)));
  return p;
}

void release(int device, void* ptr) noexcept {
  if (!ptr) return;
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  MOLACCEL_CUDA_TRY_NOTHROW(cudaFree(ptr));
  if (previous >= 0) cudaSetDevice(previous);
}

void upload(int device, void* dst, const void* src, std::size_t bytes) {
  cuda::DeviceGuard guard(device);
  const cudaStream_t s = engine_stream(device);
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s));  // the host buffer may go away after return
}

void download(int device, void* dst, const void* src, std::size_t bytes) {
  cuda::DeviceGuard guard(device);
  const cudaStream_t s = engine_stream(device);
  MOLACCEL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s));
}

void synchronize(int device) {
  cuda::DeviceGuard guard(device);
  MOLACCEL_CUDA_TRY(cudaStreamSynchronize(engine_stream(device)));
}

void zero_columns(int device, void* data, std::size_t rows, std::size_t ld, std::size_t cols,
                  std::size_t element_size) {
  if (rows == 0 || cols >= ld) return;
  cuda::DeviceGuard guard(device);
  MOLACCEL_CUDA_TRY(cudaMemset2DAsync(static_cast<char*>(data) + cols * element_size, ld * element_size, 0,
                                      (ld - cols) * element_size, rows, engine_stream(device)));
}

int launches(const OperationPlan& plan) {
  return static_cast<int>(plan.stages.size());
}

namespace {

operation_state::Compiled& compile_for(const OperationPlan& plan, operation_state& state, int group,
                                       const Tuning& tune) {
  auto it = state.by_group.find(group);
  if (it != state.by_group.end()) return it->second;
  JitRequest request;
  request.source = generate_cuda_source(plan, group);
  request.program_name = plan.name.substr(0, 60) + ".cu";
  for (auto& st : plan.stages) request.kernel_names.push_back(st.kernel_name);
  request.arch = tune.arch;
  if (kernel_dump_dir()) dump_kernel_source(fmt::format("{}_g{}.cu", plan.name, group), request.source);
  const JitProgram program = default_jit_cache().compile(request);
  operation_state::Compiled c;
  c.program = cuda::LoadedProgram(program);
  for (auto& st : plan.stages) c.kernels.push_back(c.program.kernel(st.kernel_name));
  return state.by_group.emplace(group, std::move(c)).first->second;
}

// Kernel parameters, all 8 bytes wide, in the order of the generator's parameter list.
class ParameterList {
 public:
  void pointer(const void* p) { push(&p); }
  void integer(long long v) { push(&v); }
  void real(double v) { push(&v); }
  std::vector<void*> addresses() {
    std::vector<void*> out;
    for (auto& w : words_) out.push_back(&w);
    return out;
  }
  std::size_t size() const { return words_.size(); }
  std::uint64_t& at(std::size_t i) { return words_[i]; }

 private:
  template <class V>
  void push(const V* v) {
    static_assert(sizeof(V) == 8);
    std::uint64_t w;
    std::memcpy(&w, v, 8);
    words_.push_back(w);
  }
  std::vector<std::uint64_t> words_;
};

}  // namespace

void execute(const OperationPlan& plan, const std::vector<Argument>& args, const BoundShapes& shapes,
             std::shared_ptr<operation_state>& state) {
  const int device = shapes.where.device;
  cuda::DeviceGuard guard(device);
  if (!state || state->device != device) {
    state = std::make_shared<operation_state>();
    state->device = device;
  }
  const Tuning& tune = tuning_for(device);
  bool dense = false, csr = false;
  for (auto& st : plan.stages) {
    dense = dense || st.has_dense_product;
    csr = csr || st.has_csr_product;
  }
  PlanStage probe;
  probe.has_dense_product = dense;
  probe.has_csr_product = csr;
  std::size_t rows = 0;
  for (auto r : shapes.stage_rows) rows = std::max<std::size_t>(rows, r);
  const int group = group_size_for(probe, shapes.csr_average_row_nnz, rows);
  auto& compiled = compile_for(plan, *state, group, tune);

  // Workspace: partial sums (slot-major, reduction_blocks per slot) and temporaries. Sized
  // once for the operands' shapes; a graph replays with the same addresses.
  const std::size_t elem = size_of(plan.type);
  const std::size_t stride = static_cast<std::size_t>(tune.reduction_blocks);
  const std::size_t partial_bytes = std::max<std::size_t>(1, plan.reductions.size()) * stride * elem;
  if (state->partials.size() < partial_bytes) state->partials.resize(partial_bytes);
  state->temporaries.resize(plan.temporaries.size());
  for (std::size_t t = 0; t < plan.temporaries.size(); ++t)
    if (state->temporaries[t].size() < std::max<std::size_t>(1, shapes.temporary_length[t] * elem))
      state->temporaries[t].resize(std::max<std::size_t>(1, shapes.temporary_length[t] * elem));

  // Geometry per stage: G threads per row in stages with products.
  std::vector<int> stage_group(plan.stages.size()), stage_blocks(plan.stages.size());
  std::vector<long long> parts(plan.reductions.size(), 0);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& st = plan.stages[s];
    const bool grouped = st.has_dense_product || st.has_csr_product;
    stage_group[s] = grouped ? group : 1;
    const std::size_t rows_per_block = static_cast<std::size_t>(tune.block / stage_group[s]);
    const std::size_t wanted = (shapes.stage_rows[s] + rows_per_block - 1) / rows_per_block;
    const int cap = st.what == PlanStage::Kind::reduction ? tune.reduction_blocks : tune.max_blocks;
    stage_blocks[s] = static_cast<int>(std::clamp<std::size_t>(wanted, 1, static_cast<std::size_t>(cap)));
    for (int slot : st.reductions) parts[slot] = stage_blocks[s];
  }
  if (prepare_only_depth > 0) return;

  ParameterList p;
  for (std::size_t i = 0; i < plan.operands.size(); ++i) {
    const auto& a = args[i];
    switch (plan.operands[i].kind) {
      case NodeKind::vector:
        p.pointer(a.data->data());
        p.integer(static_cast<long long>(a.rows));
        break;
      case NodeKind::dense_matrix:
        p.pointer(a.data->data());
        p.integer(static_cast<long long>(a.rows));
        p.integer(static_cast<long long>(a.cols));
        p.integer(static_cast<long long>(a.ld));
        break;
      case NodeKind::csr_matrix:
        p.pointer(a.row_ptr->data());
        p.pointer(a.col_idx->data());
        p.pointer(a.data->data());
        p.integer(static_cast<long long>(a.rows));
        p.integer(static_cast<long long>(a.cols));
        break;
      case NodeKind::host_scalar:
        p.real(a.host_value);
        break;
      case NodeKind::device_scalar:
        p.pointer(a.data->data());
        break;
      default:
        break;
    }
  }
  for (std::size_t t = 0; t < plan.temporaries.size(); ++t) {
    p.pointer(state->temporaries[t].data());
    p.integer(static_cast<long long>(shapes.temporary_length[t]));
  }
  for (std::size_t r = 0; r < plan.reductions.size(); ++r) {
    p.integer(static_cast<long long>(shapes.reduction_length[r]));
    p.integer(parts[r]);
  }
  p.pointer(state->partials.data());
  p.integer(static_cast<long long>(stride));
  const std::size_t rows_index = p.size();
  p.integer(0);  // n_rows, set per stage

  const cudaStream_t stream = engine_stream(device);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const long long rows = static_cast<long long>(shapes.stage_rows[s]);
    std::memcpy(&p.at(rows_index), &rows, 8);
    auto addresses = p.addresses();
    // The parameter list is only known at run time, so the launch goes through
    // cudaLaunchKernel with an argument array (cuda::launch takes a fixed C++ argument pack).
    MOLACCEL_CUDA_TRY(cudaLaunchKernel(reinterpret_cast<const void*>(compiled.kernels[s]),
                                       dim3(stage_blocks[s]), dim3(tune.block), addresses.data(), 0, stream));
    cuda::check_launch(plan.stages[s].kernel_name.c_str(), __FILE__, __LINE__);
  }
}

struct CapturedWork::impl {
  int device = -1;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~impl() {
    if (exec) MOLACCEL_CUDA_TRY_NOTHROW(cudaGraphExecDestroy(exec));
    if (graph) MOLACCEL_CUDA_TRY_NOTHROW(cudaGraphDestroy(graph));
  }
};

CapturedWork::CapturedWork(int device, const std::function<void()>& record)
    : impl_(std::make_unique<impl>()) {
  cuda::DeviceGuard guard(device);
  impl_->device = device;
  const cudaStream_t s = engine_stream(device);
  MOLACCEL_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    record();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(s, &broken);
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  MOLACCEL_CUDA_TRY(cudaStreamEndCapture(s, &impl_->graph));
  MOLACCEL_CUDA_TRY(cudaGraphInstantiate(&impl_->exec, impl_->graph, 0));
}

CapturedWork::~CapturedWork() = default;

void CapturedWork::launch() {
  cuda::DeviceGuard guard(impl_->device);
  MOLACCEL_CUDA_TRY(cudaGraphLaunch(impl_->exec, engine_stream(impl_->device)));
}

}  // namespace molaccel::linalg::gpu

// Device state of the orbital CUDA backend: uploads of a job's basis and coefficients, the JIT
// program, and the page-locked staging buffers of the pipeline.
#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "orbital/cuda/device_state.cuh"

namespace molaccel::orbital::cuda_backend {

JitRequest jit_request(const detail::JitSource& source, int device) {
  JitRequest request;
  request.source = source.source;
  request.program_name = "molaccel_orbital_jit.cu";
  request.kernel_names = {source.kernel_name};
  cudaDeviceProp prop{};
  MOLACCEL_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  request.arch = fmt::format("sm_{}{}", prop.major, prop.minor);
  return request;
}

std::optional<JitProgram> jit_program(const JitRequest& request, bool when_ready) {
  JitCache& cache = default_jit_cache();
  const std::string key = cache.key_for(request);
  auto& compiles = detail::background_jit_compiles();
  // Without NVRTC the plain path reports NotCompiled; a program on disk is read in milliseconds.
  std::error_code ec;
  const bool plain = !compiles.started(key) && (!when_ready || !nvrtc_available() ||
                                                std::filesystem::exists(cache.entry_path(key), ec));
  if (plain) return cache.compile(request);
  return compiles.get(
      key, [&cache, request] { return cache.compile(request); }, !when_ready);
}

std::string state_key(const GpuJob& job, bool want_jit) {
  if (job.basis_id == 0 || job.coefficients_id == 0) return {};
  std::string key = fmt::format(fmt::runtime("{}/{}/{}/{}/{}/{}/"), job.basis_id, job.coefficients_id,
                                job.orbitals, want_jit, use_matrix_path(job), job.tuning.jit_brick.name());
  if (job.weights) key.append(reinterpret_cast<const char*>(job.weights), job.orbitals * sizeof(float));
  return key;
}

void DeviceState::ensure_staging(int b, std::size_t n) {
  staging[b].resize(n, pinned);
}

namespace {
// A key without its coefficients id: what a request shares with a state it can keep but for the
// coefficients.
std::string without_coefficients(const std::string& key) {
  const std::size_t a = key.find('/'), b = key.find('/', a + 1);
  return key.substr(0, a) + key.substr(b);
}
}  // namespace

void DeviceState::init(const GpuJob& job, int dev, bool want_jit) {
  // The same cached basis, orbital count, path and brick (no weights, no matrix path): only the
  // coefficients are uploaded (a display loop's next orbital).
  const std::string new_key = state_key(job, want_jit);
  if (ready && device == dev && !job.weights && !use_matrix_path(job) && !key.empty() && !new_key.empty() &&
      without_coefficients(key) == without_coefficients(new_key)) {
    chunk_planes = 0;
    coefficients.upload(
        std::vector<float>(job.coefficients, job.coefficients + job.orbitals * job.basis->components),
        *stream);
    stream->synchronize();
    key = new_key;
    return;
  }
  device = dev;
  chunk_planes = 0;
  jit_kernel = nullptr;
  jit_pending.reset();
  program.reset();
  components_padded = orbitals_padded = 0;
  const auto& basis = *job.basis;
  if (!stream) stream = std::make_unique<cuda::Stream>();
  atom_xyz.upload(basis.atom_xyz, *stream);
  atom_first_shell.upload(basis.atom_first_shell, *stream);
  std::vector<int4> shell_data;
  std::vector<float> cuts;
  for (const auto& s : basis.shells) {
    shell_data.push_back(make_int4(s.l, s.first_primitive, s.primitive_count, s.first_component));
    cuts.push_back(s.cutoff_r2);
  }
  shells.upload(shell_data, *stream);
  shell_cut.upload(cuts, *stream);
  std::vector<float4> prims;
  for (std::size_t p = 0; p < basis.exponent.size(); ++p)
    prims.push_back(make_float4(static_cast<float>(-basis.exponent[p] * 1.4426950408889634),
                                basis.coefficient[p], basis.cutoff_r2[p], 0.0f));
  primitives.upload(prims, *stream);
  coefficients.upload(
      std::vector<float>(job.coefficients, job.coefficients + job.orbitals * basis.components), *stream);
  view = BasisView{atom_xyz.data(),
                   atom_first_shell.data(),
                   shells.data(),
                   shell_cut.data(),
                   primitives.data(),
                   static_cast<int>(basis.atom_count()),
                   static_cast<int>(basis.shells.size()),
                   static_cast<int>(basis.exponent.size()),
                   basis.components};
  if (!copy_stream) copy_stream = std::make_unique<cuda::Stream>();
  for (int b = 0; b < 2; ++b) {
    if (!computed[b]) computed[b] = std::make_unique<cuda::Event>(false);
    if (!copied[b]) copied[b] = std::make_unique<cuda::Event>(false);
  }
  if (use_matrix_path(job)) {
    components_padded = (basis.components + kComponentPad - 1) / kComponentPad * kComponentPad;
    const std::size_t tile_o = 16u * static_cast<std::size_t>(contraction_width(job.orbitals));
    orbitals_padded = static_cast<int>((job.orbitals + tile_o - 1) / tile_o * tile_o);
    std::vector<float> ct(static_cast<std::size_t>(components_padded) * orbitals_padded, 0.0f);
    for (std::size_t o = 0; o < job.orbitals; ++o)
      for (int c = 0; c < basis.components; ++c)
        ct[static_cast<std::size_t>(c) * orbitals_padded + o] = job.coefficients[o * basis.components + c];
    coefficients_t.upload(ct, *stream);
    std::vector<float> w(static_cast<std::size_t>(orbitals_padded), 0.0f);
    if (job.weights) std::copy(job.weights, job.weights + job.orbitals, w.begin());
    weights.upload(w, *stream);
    std::vector<int> sa(basis.shells.size());
    for (std::size_t a = 0; a < basis.atom_count(); ++a)
      for (int sh = basis.atom_first_shell[a]; sh < basis.atom_first_shell[a + 1]; ++sh)
        sa[static_cast<std::size_t>(sh)] = static_cast<int>(a);
    shell_atom.upload(sa, *stream);
  } else if (want_jit) {
    const auto source = detail::generate_jit_source(basis, job.tuning.jit_brick);
    jit_cull = source.cull;
    {
      std::vector<double> xyz;
      std::vector<int> bases;
      std::vector<float> cuts;
      for (const int a : source.atom_order) {
        const std::size_t au = static_cast<std::size_t>(a);
        for (int d = 0; d < 3; ++d) xyz.push_back(basis.atom_xyz[3 * au + static_cast<std::size_t>(d)]);
        const int first = basis.atom_first_shell[au], last = basis.atom_first_shell[au + 1];
        bases.push_back(first < last ? basis.shells[static_cast<std::size_t>(first)].first_component : 0);
        float cut = 0;
        for (int sh = first; sh < last; ++sh)
          cut = std::max(cut, basis.shells[static_cast<std::size_t>(sh)].cutoff_r2);
        cuts.push_back(cut);
      }
      atom_xyz_sorted.upload(xyz, *stream);
      atom_base.upload(bases, *stream);
      atom_cut2.upload(cuts, *stream);
      type_first.upload(source.type_first, *stream);
    }
    jit_pending = jit_request(source, dev);
    jit_kernel_symbol = source.kernel_name;
    take_jit_program(!job.jit_when_ready);
  }
  stream->synchronize();
  key = state_key(job, want_jit);
  ready = true;
}

bool DeviceState::take_jit_program(bool wait) {
  if (jit_kernel || !jit_pending) return jit_kernel != nullptr;
  const auto compiled = jit_program(*jit_pending, !wait);
  if (!compiled) return false;
  program = std::make_unique<cuda::LoadedProgram>(*compiled);
  jit_kernel = program->kernel(jit_kernel_symbol);
  jit_pending.reset();
  return true;
}

}  // namespace molaccel::orbital::cuda_backend

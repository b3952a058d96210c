// The SIML paper's Tables 2 and 3: all-vs-all LINGO Tanimoto matrices of 4,096 (demo4096.smi),
// 8,192 and 32,768 molecules (random subsets of molecules_367k.smi.gz, seed 2010), as LINGOs
// (similarities) per second, for the reference merge, the CPU kernel (1 thread and all threads)
// and the CUDA kernel (results in device memory; and the full matrix landing in host memory).
// Usage: bench_lingo_allpairs [--quick] [--data DIR] [--gpu-only | --kernel-only] [--tuning NAME=VALUE]...
// --gpu-only: no reference / CPU rows, and of the copies only those into page-locked memory;
// --kernel-only: the kernel loop alone (for a profiler). --tuning sets one field of the CUDA
// backend's Tuning (src/lingo/cuda/tuning.hpp) for every GPU row, e.g. block_steps=8,
// device_pass_elements=268435456 (the dense budget's 1 GiB passes), direct_pass_elements=16777216,
// grow_passes=0, drain_threads=8. MOLACCEL_TRACE=lingo adds per-pass CUDA-event timelines (stderr).
#include <cstring>
#include <filesystem>
#include <random>

#include "bench_data.hpp"
#include "common/harness.hpp"
#include "lingo/encoding.hpp"
#ifdef MOLACCEL_HAVE_CUDA
#include "copy_ceilings.hpp"
#include "lingo/cuda/cuda_backend.hpp"
#endif

using namespace molaccel;
using namespace molaccel::lingo;
namespace mb = molaccel::bench;

namespace {

bool gpu_only = false, kernel_only = false;
std::vector<std::string> tuning_settings;  // --tuning NAME=VALUE, in order

ComputeOptions on(Backend backend) {
  ComputeOptions o;
  o.backend = backend;
  o.job.progress_bar = false;
  return o;
}

#ifdef MOLACCEL_HAVE_CUDA
// The tuning of every GPU row: the backend's own for this device and problem, then --tuning.
cuda_backend::Tuning bench_tuning(int device, std::size_t n) {
  auto tuning = cuda_backend::tuning_for(device, {Metric::tanimoto, n, n});
  for (const auto& setting : tuning_settings) cuda_backend::set_tuning(tuning, setting);
  return tuning;
}

std::string tuning_note() {
  std::string note;
  for (const auto& setting : tuning_settings) note += (note.empty() ? "; tuning " : ", ") + setting;
  return note;
}

WorkerInfo gpu_worker(int device) {
  WorkerInfo info;
  info.kind = WorkerInfo::Kind::gpu;
  info.device = device;
  return info;
}

// The all-vs-all kernel loop with the results left in device memory (GpuJob::on_device: host
// planning, plan upload and the kernels, until the last pass is done; the database is uploaded by
// the warm-up calls, the worker state kept from call to call), median of 7 after 2.
void time_kernel_loop(const detail::Encoding& encoding, std::size_t n, const GpuInfo& g,
                      const std::string& row, const std::string& note) {
  const cuda_backend::Rect all{0, n, 0, n};
  const cuda_backend::GpuJob job(encoding, Metric::tanimoto, bench_tuning(g.index, n));
  WorkerContext ctx(gpu_worker(g.index));
  const auto kernel = mb::measure_with(
      [&] {
        const double t0 = now_seconds();
        job.on_device(ctx, all);
        return now_seconds() - t0;
      },
      2, 7);
  // Limit: every similarity is one 4-byte store, at an HBM3 bandwidth of 3.35 TB/s.
  mb::print_row({row, g.name, fmt::format("{}x{}", n, n), kernel, static_cast<double>(n) * n, "LINGOs",
                 4.0 * n * n, 3.35e12 / 4, "fp32 store bandwidth (3.35 TB/s)", note + tuning_note()});
}
#endif

void run_set(const std::string& label, const MoleculeSet& set, bool quick) {
  const std::size_t n = set.size();
  const std::string size = fmt::format("{}x{}", n, n);
  const std::string stats = fmt::format("mean len {:.1f}, {:.1f} distinct", lingo_bench::mean_length(set),
                                        lingo_bench::mean_distinct(set));
  const std::string cpu_model = cpu_info().model;
  // Reference and single-thread CPU on the same block of rows (the reference is too slow for the
  // whole matrix at 32k); throughput is per similarity, so the rows stand for the matrix.
  const std::size_t rows = std::min<std::size_t>(n, quick ? 32 : 128);
  if (!gpu_only && !kernel_only) {
    std::vector<std::size_t> first(rows);
    for (std::size_t i = 0; i < rows; ++i) first[i] = i;
    const MoleculeSet head = molaccel::lingo::subset(set, first);
    const double block_pairs = static_cast<double>(rows) * n;

    const auto ref = mb::measure(
        [&] { similarity_matrix(Resources::cpu(1), head, &set, on(Backend::reference)); }, 0, quick ? 1 : 3);
    mb::print_row({"lingo/allpairs/reference/1thread", cpu_model, fmt::format("{}x{}", rows, n), ref,
                   block_pairs, "LINGOs", 0, 0, "", label + ", " + stats});
    // The CPU kernel without the one-time encoding of the set (reported apart, like the paper's
    // "read SMILES + construct multisets" row).
    RunInfo info;
    const auto cpu1 = mb::measure_with(
        [&] {
          similarity_matrix(Resources::cpu(1), head, &set, on(Backend::cpu), &info);
          return info.seconds - info.prepare_seconds;
        },
        1, quick ? 3 : 5);
    mb::print_row({"lingo/allpairs/cpu/1thread", cpu_model, fmt::format("{}x{}", rows, n), cpu1, block_pairs,
                   "LINGOs", 0, 0, "",
                   fmt::format("{}; {:.1f}x the reference per core; encoding {:.1f} ms apart", info.backend,
                               ref.median_s / cpu1.median_s, 1e3 * info.prepare_seconds)});
    if (n <= 8192) {  // larger full matrices on the CPU take minutes: the 1-thread rows stand in
      const auto cpu =
          mb::measure([&] { similarity_matrix(Resources::cpu(0), set, &set, on(Backend::cpu)); }, 1, 3);
      mb::print_row({"lingo/allpairs/cpu/all-threads", cpu_model, size, cpu, static_cast<double>(n) * n,
                     "LINGOs", 0, 0, "",
                     fmt::format("{} threads, full matrix in host memory", cpu_info().logical_cores)});
    }
  }
#ifdef MOLACCEL_HAVE_CUDA
  const auto gpus = gpu_list();
  if (gpus.empty()) return;
  const auto& g = gpus.front();
  const auto encoding = detail::encode(set, nullptr);
  const cuda_backend::Rect all{0, n, 0, n};
  time_kernel_loop(encoding, n, g, "lingo/allpairs/cuda/kernel",
                   "full matrix, results in device memory (wall clock to the last pass)");
  if (kernel_only) return;
  // The full matrix into host memory through the pipeline (compute of pass i+1, the D2H copy of
  // pass i into pinned staging, and the host copy of pass i-1 overlapped), per element type; the
  // destination is ordinary (pageable, already touched) memory, the database upload excluded.
  {
    const cuda_backend::GpuJob job(encoding, Metric::tanimoto, bench_tuning(g.index, n));
    // The rect into host memory as a job's tile does it (GpuJob::dense_to), wall seconds; the
    // worker state and the staging kept from call to call, so the warm-up call uploads the database.
    PinnedPool staging;
    WorkerContext ctx(gpu_worker(g.index), nullptr, &staging);
    const auto to_host = [&](OutputType type, void* out) {
      const double t0 = now_seconds();
      job.dense_to(ctx, all, type, static_cast<std::uint8_t*>(out), n * element_bytes(type));
      return now_seconds() - t0;
    };
    if (n >= 32768 && !gpu_only) {
      // The pipeline's two ceilings alone (128 MiB copies).
      const auto rates = lingo_bench::measure_copy_rates(g.index, std::size_t{1} << 27);
      std::printf("lingo copy ceilings: D2H into pinned %.1f GB/s; host copy pinned -> pageable %.1f GB/s\n",
                  rates.d2h_pinned_gbs, rates.host_copy_gbs);
    }
    // Into page-locked memory (allocate_host_buffer): the copy engine writes the destination
    // directly, overlapped with the computation of the next pass; no host-side copy.
    for (const auto type : {OutputType::fp32, OutputType::fp16, OutputType::u8}) {
      const double elem = static_cast<double>(element_bytes(type));
      auto pinned = allocate_host_buffer(static_cast<std::size_t>(elem) * n * n);
      if (!pinned.page_locked) break;
      std::memset(pinned.data.get(), 1, pinned.bytes);
      if (type == OutputType::fp32 && n >= 32768) {
        const double gbs =
            lingo_bench::measure_d2h_into(g.index, pinned.data.get(), pinned.bytes, std::size_t{1} << 27);
        std::printf(
            "lingo copy ceiling: D2H of 128 MiB chunks filling the %.2f GB page-locked matrix %.1f GB/s\n",
            pinned.bytes / 1e9, gbs);
      }
      const auto t = mb::measure_with([&] { return to_host(type, pinned.data.get()); }, 1, quick ? 3 : 5);
      mb::print_row({fmt::format("lingo/allpairs/cuda/to-pinned-{}", to_string(type)), g.name, size, t,
                     static_cast<double>(n) * n, "LINGOs", elem * n * n, 55e9 / elem, "PCIe D2H 55 GB/s",
                     fmt::format("direct DMA into page-locked memory, {:.2f} GB at {:.1f} GB/s",
                                 elem * n * n / 1e9, elem * n * n / t.median_s / 1e9)});
    }
    for (const auto type : {OutputType::fp32, OutputType::fp16, OutputType::u8}) {
      if (gpu_only) break;
      const double elem = static_cast<double>(element_bytes(type));
      std::vector<std::uint8_t> host(static_cast<std::size_t>(elem) * n * n, 1);
      const auto t = mb::measure_with([&] { return to_host(type, host.data()); }, 1, quick ? 3 : 5);
      mb::print_row({fmt::format("lingo/allpairs/cuda/to-host-{}", to_string(type)), g.name, size, t,
                     static_cast<double>(n) * n, "LINGOs", elem * n * n, 55e9 / elem, "PCIe D2H 55 GB/s",
                     fmt::format("pipelined, {:.2f} GB at {:.1f} GB/s{}", elem * n * n / 1e9,
                                 elem * n * n / t.median_s / 1e9,
                                 type == OutputType::fp32 ? "" : " (quantised on the GPU)")});
    }
  }
  if (gpu_only) return;
  Resources::Options ro;
  ro.device = DeviceSpec::parse("gpu:" + std::to_string(g.index));
  const Resources gpu = Resources::create(ro);
  const auto e2e =
      mb::measure([&] { similarity_matrix(gpu, set, &set, on(Backend::cuda)); }, 1, quick ? 2 : 3);
  // Limit: the matrix crossing PCIe (55 GB/s measured device-to-host into pinned memory).
  mb::print_row({"lingo/allpairs/cuda/to-host", g.name, size, e2e, static_cast<double>(n) * n, "LINGOs",
                 4.0 * n * n, 55e9 / 4, "PCIe D2H 55 GB/s",
                 "paper's Table 3 setting: molecules in (encoding included), new std::vector result"});
  // The .npy file written from the GPU (page cache; the disk may be the limit).
  if (n >= 8192) {
    const auto file = std::filesystem::temp_directory_path() / fmt::format("lingo-bench-{}.npy", n);
    for (const auto type : {OutputType::fp32, OutputType::fp16, OutputType::u8}) {
      const double elem = static_cast<double>(element_bytes(type));
      const auto w = mb::measure(
          [&] {
            write_similarity_matrix(gpu, set, nullptr, file, MatrixFormat::npy, on(Backend::cuda), nullptr,
                                    type);
          },
          0, 1);
      std::filesystem::remove(file);
      mb::print_row(
          {fmt::format("lingo/allpairs/cuda/npy-{}", to_string(type)), g.name, size, w,
           static_cast<double>(n) * n, "LINGOs", elem * n * n, 55e9 / elem, "PCIe D2H 55 GB/s",
           fmt::format("molecules in, {:.2f} GB .npy file written (page cache)", elem * n * n / 1e9)});
    }
  }
#endif
}

}  // namespace

// No cliff for a large, diverse Lingo vocabulary: 32,768 random strings of 30-50 letters over 12
// atoms (about 1.2 M Lingos, nearly all distinct within a query group).
void run_diverse([[maybe_unused]] bool quick) {
#ifdef MOLACCEL_HAVE_CUDA
  const auto gpus = gpu_list();
  if (gpus.empty()) return;
  const auto& g = gpus.front();
  std::mt19937_64 rng(2026);
  const char atoms[] = "CNOSPFIBcnos";
  std::vector<std::string> smiles(32768);
  for (auto& s : smiles) {
    const std::size_t len = 30 + rng() % 21;
    for (std::size_t i = 0; i < len; ++i) s += atoms[rng() % 12];
  }
  const auto set = make_molecules(smiles, {});
  const std::size_t n = set.size();
  const auto encoding = detail::encode(set, nullptr);
  time_kernel_loop(
      encoding, n, g, "lingo/allpairs/cuda/kernel-diverse",
      fmt::format("random 30-50 letter strings, vocabulary {} Lingos", encoding.vocabulary_size));
#else
  (void)quick;
#endif
}

int main(int argc, char** argv) {
  bool quick = false;
  std::string data;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--data") && i + 1 < argc)
      data = argv[++i];
    else if (!std::strcmp(argv[i], "--gpu-only"))
      gpu_only = true;
    else if (!std::strcmp(argv[i], "--kernel-only"))
      kernel_only = true;
    else if (!std::strcmp(argv[i], "--tuning") && i + 1 < argc)
      tuning_settings.push_back(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: bench_lingo_allpairs [--quick] [--data DIR] [--gpu-only | --kernel-only] "
                   "[--tuning NAME=VALUE]...\n");
      return 2;
    }
  }
  set_progress_enabled(false);
  mb::print_header();
  if (!kernel_only) run_diverse(quick);
  const auto demo = read_molecules(lingo_bench::demo_set_path(), {});
  if (!kernel_only) run_set("demo4096.smi", demo, quick);
  const auto big_path = lingo_bench::large_set_path(data);
  if (big_path.empty()) {
    std::printf("molecules_367k.smi.gz not found (--data DIR): skipping the 8,192 and 32,768 sets\n");
    return 0;
  }
  const auto big = read_molecules(big_path, {});
  for (std::size_t n : {std::size_t{8192}, std::size_t{32768}}) {
    if (kernel_only && n < 32768) continue;
    if (quick && n > 8192) {
#ifndef MOLACCEL_HAVE_CUDA
      continue;
#endif
    }
    run_set(
        fmt::format("367k subset seed {}", lingo_bench::kSubsetSeed),
        molaccel::lingo::subset(big, lingo_bench::random_indices(big.size(), n, lingo_bench::kSubsetSeed)),
        quick);
  }
  return 0;
}

// The SIML paper's Tables 2 and 3: all-vs-all LINGO Tanimoto matrices of 4,096 (demo4096.smi),
// 8,192 and 32,768 molecules (random subsets of molecules_367k.smi.gz, seed 2010), as LINGOs
// (similarities) per second, for the reference merge, the CPU kernel (1 thread and all threads)
// and the CUDA kernels (results in device memory; and the full matrix landing in host memory).
// Usage: bench_lingo_allpairs [--quick] [--data DIR] [--gpu-only | --kernel-only]
// --gpu-only: no reference / CPU rows, and of the copies only those into page-locked memory;
// --kernel-only: the kernels alone (for a profiler). LINGO_VARIANTS=",csr-t,sorted" picks the
// kernel variants timed side by side (comma-separated, empty = the default kernel); NAME#S sets
// MOLACCEL_LINGO_BLOCK_STEPS=S (window steps per block at most), NAME@E times
// NAME with E elements per pass (MOLACCEL_LINGO_DEVICE_PASS_ELEMENTS; NAME@budget: the dense
// budget's 1 GiB passes, four at 32,768^2, the loop before 2026-11-22's fifth round).
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <random>

#include "bench_data.hpp"
#include "common/harness.hpp"
#include "lingo/encoding.hpp"
#ifdef MOLACCEL_HAVE_CUDA
#include "lingo/cuda/cuda_backend.hpp"
#endif

using namespace molaccel;
using namespace molaccel::lingo;
namespace mb = molaccel::bench;

namespace {

bool gpu_only = false, kernel_only = false;

// The kernel variants to time: LINGO_VARIANTS (comma-separated; an empty name is the default).
std::vector<std::string> variants() {
  const char* v = std::getenv("LINGO_VARIANTS");
  std::string list = v ? v : "";
  std::vector<std::string> out;
  std::size_t b = 0;
  for (;;) {
    const std::size_t e = list.find(',', b);
    out.push_back(list.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

ComputeOptions on(Backend backend) {
  ComputeOptions o;
  o.backend = backend;
  o.job.progress_bar = false;
  return o;
}

#ifdef MOLACCEL_HAVE_CUDA
// The all-vs-all kernel loop of every variant in LINGO_VARIANTS (the default first), side by
// side on one GPU: one row each, named `row` or `row-<variant>`. With `timeline`, each variant's
// per-pass kernel times go to stderr too: the row times the whole loop from the first event, the
// host's planning of the query groups included (it runs before the first kernel); the timeline's
// sum of the passes' kernels leaves it out (sorted-hp6 plans by simulating its table: ~11 ms at
// 32,768).
void time_kernel_variants(const detail::Encoding& encoding, std::size_t n, const GpuInfo& g, const std::string& row,
                          const std::string& note, bool timeline) {
  const cuda_backend::Rect all{0, n, 0, n};
  for (const std::string& name : variants()) {
    const char* variant = name.c_str();
    const std::size_t at = name.find('@'), hash = name.find('#');
    const std::string kernel_name = name.substr(0, std::min(at, hash));
    if (hash != std::string::npos)
      setenv("MOLACCEL_LINGO_BLOCK_STEPS", name.substr(hash + 1, at == std::string::npos || at < hash ? std::string::npos : at - hash - 1).c_str(), 1);
    if (!kernel_name.empty()) setenv("MOLACCEL_LINGO_GPU_KERNEL", kernel_name.c_str(), 1);
    if (at != std::string::npos) {
      const std::string e = name.substr(at + 1, hash == std::string::npos || hash < at ? std::string::npos : hash - at - 1);
      setenv("MOLACCEL_LINGO_DEVICE_PASS_ELEMENTS", e == "budget" ? "268435456" : e.c_str(), 1);
    }
    const cuda_backend::GpuJob job(encoding, Metric::tanimoto);
    unsetenv("MOLACCEL_LINGO_GPU_KERNEL");
    unsetenv("MOLACCEL_LINGO_DEVICE_PASS_ELEMENTS");
    unsetenv("MOLACCEL_LINGO_BLOCK_STEPS");
    const auto kernel = mb::measure_with([&] { return job.time_kernels(g.index, all); }, 2, 7);
    if (timeline) {
      setenv("MOLACCEL_LINGO_TIMELINE", "1", 1);
      std::fprintf(stderr, "lingo kernel timeline of variant %s\n", *variant ? variant : "default");
      job.time_kernels(g.index, all);
      unsetenv("MOLACCEL_LINGO_TIMELINE");
    }
    // Limit: every similarity is one 4-byte store; HBM3 bandwidth of the H100 (3.35 TB/s) caps it.
    mb::print_row({*variant ? fmt::format("{}-{}", row, variant) : row, g.name, fmt::format("{}x{}", n, n), kernel,
                   static_cast<double>(n) * n, "LINGOs", 4.0 * n * n, 3.35e12 / 4, "fp32 store bandwidth (3.35 TB/s)",
                   note});
  }
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
  // The hashed-kernel variants (LINGO_VARIANTS): the default (sorted-hp8l) and others side by side.
  time_kernel_variants(encoding, n, g, "lingo/allpairs/cuda/kernel",
                       "full matrix, results in device memory (CUDA events)", n >= 32768 && !kernel_only);
  if (kernel_only) return;
  // The full matrix into host memory through the pipeline (compute of pass i+1, the D2H copy of
  // pass i into pinned staging, and the host copy of pass i-1 overlapped), per element type; the
  // destination is ordinary (pageable, already touched) memory, the database upload excluded.
  {
    const cuda_backend::GpuJob job(encoding, Metric::tanimoto);
    if (n >= 32768 && !gpu_only) {
      // The pipeline's two ceilings alone (128 MiB copies), and fp32 with fewer helper threads.
      const auto rates = cuda_backend::measure_copy_rates(g.index, std::size_t{1} << 27);
      std::printf("lingo copy ceilings: D2H into pinned %.1f GB/s; host copy pinned -> pageable %.1f GB/s\n",
                  rates.d2h_pinned_gbs, rates.host_copy_gbs);
      for (const char* threads : {"4", "8"}) {
        setenv("MOLACCEL_LINGO_DRAIN_THREADS", threads, 1);
        std::vector<std::uint8_t> host(4 * n * n, 1);
        const auto t = mb::measure_with(
            [&] { return job.time_to_host(g.index, all, OutputType::fp32, host.data()); }, 1, quick ? 3 : 5);
        unsetenv("MOLACCEL_LINGO_DRAIN_THREADS");
        mb::print_row({fmt::format("lingo/allpairs/cuda/to-host-fp32-{}threads", threads), g.name, size, t,
                       static_cast<double>(n) * n, "LINGOs", 4.0 * n * n, 55e9 / 4, "PCIe D2H 55 GB/s",
                       fmt::format("pipelined, {} host-copy threads (default 16)", threads)});
      }
    }
    // Into page-locked memory (allocate_host_buffer): the copy engine writes the destination
    // directly, overlapped with the computation of the next pass; no host-side copy.
    for (const auto type : {OutputType::fp32, OutputType::fp16, OutputType::u8}) {
      const double elem = static_cast<double>(element_bytes(type));
      auto pinned = allocate_host_buffer(static_cast<std::size_t>(elem) * n * n);
      if (!pinned.page_locked) break;
      std::memset(pinned.data.get(), 1, pinned.bytes);
      if (type == OutputType::fp32 && n >= 32768) {
        const double gbs = cuda_backend::measure_d2h_into(g.index, pinned.data.get(), pinned.bytes, std::size_t{1} << 27);
        std::printf("lingo copy ceiling: D2H of 128 MiB chunks filling the %.2f GB page-locked matrix %.1f GB/s\n",
                    pinned.bytes / 1e9, gbs);
        // Passes of 64 MiB and 512 MiB (default 512), equal; and 512 MiB growing from 512 rows.
        for (const auto& [pass, grow] : {std::pair{"16777216", "0"}, std::pair{"134217728", "0"},
                                         std::pair{"134217728", "1"}}) {
          setenv("MOLACCEL_LINGO_GPU_PASS_ELEMENTS", pass, 1);
          setenv("MOLACCEL_LINGO_GPU_PASS_GROW", grow, 1);
          const auto tp = mb::measure_with(
              [&] { return job.time_to_host(g.index, all, type, pinned.data.get()); }, 1, quick ? 3 : 5);
          unsetenv("MOLACCEL_LINGO_GPU_PASS_ELEMENTS");
          unsetenv("MOLACCEL_LINGO_GPU_PASS_GROW");
          const bool growing = *grow == '1';
          mb::print_row({fmt::format("lingo/allpairs/cuda/to-pinned-fp32-pass{}M-{}", std::atoll(pass) >> 20,
                                     growing ? "grow" : "equal"),
                         g.name, size, tp, static_cast<double>(n) * n, "LINGOs", elem * n * n, 55e9 / elem,
                         "PCIe D2H 55 GB/s",
                         fmt::format("{} elements per pass, {}", pass,
                                     growing ? "first passes small and doubling" : "all passes equal")});
        }
        // Where the time goes: one pass-by-pass CUDA-event timeline (stderr) of growing passes
        // (first passes small, doubling: the default) and of equal ones (MOLACCEL_LINGO_GPU_PASS_GROW=0).
        for (const char* grow : {"1", "0"}) {
          setenv("MOLACCEL_LINGO_GPU_PASS_GROW", grow, 1);
          setenv("MOLACCEL_LINGO_TIMELINE", "1", 1);
          std::fprintf(stderr, "lingo timeline: fp32 into page-locked memory, passes %s\n",
                       *grow == '1' ? "growing (default)" : "equal");
          job.time_to_host(g.index, all, type, pinned.data.get());
          unsetenv("MOLACCEL_LINGO_TIMELINE");
          unsetenv("MOLACCEL_LINGO_GPU_PASS_GROW");
        }
      }
      const auto t = mb::measure_with([&] { return job.time_to_host(g.index, all, type, pinned.data.get()); }, 1,
                                      quick ? 3 : 5);
      mb::print_row({fmt::format("lingo/allpairs/cuda/to-pinned-{}", to_string(type)), g.name, size, t,
                     static_cast<double>(n) * n, "LINGOs", elem * n * n, 55e9 / elem, "PCIe D2H 55 GB/s",
                     fmt::format("direct DMA into page-locked memory, {:.2f} GB at {:.1f} GB/s", elem * n * n / 1e9,
                                 elem * n * n / t.median_s / 1e9)});
    }
    for (const auto type : {OutputType::fp32, OutputType::fp16, OutputType::u8}) {
      if (gpu_only) break;
      const double elem = static_cast<double>(element_bytes(type));
      std::vector<std::uint8_t> host(static_cast<std::size_t>(elem) * n * n, 1);
      const auto t = mb::measure_with([&] { return job.time_to_host(g.index, all, type, host.data()); }, 1,
                                      quick ? 3 : 5);
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
          [&] { write_similarity_matrix(gpu, set, nullptr, file, MatrixFormat::npy, on(Backend::cuda), nullptr, type); },
          0, 1);
      std::filesystem::remove(file);
      mb::print_row({fmt::format("lingo/allpairs/cuda/npy-{}", to_string(type)), g.name, size, w,
                     static_cast<double>(n) * n, "LINGOs", elem * n * n, 55e9 / elem, "PCIe D2H 55 GB/s",
                     fmt::format("molecules in, {:.2f} GB .npy file written (page cache)", elem * n * n / 1e9)});
    }
  }
#endif
}

}  // namespace

// No cliff for a large, diverse Lingo vocabulary: 32,768 random strings of 30-50 letters over 12
// atoms (about 1.2 M Lingos, nearly all distinct within a query group), kernel variants side by side.
void run_diverse(bool quick) {
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
  time_kernel_variants(encoding, n, g, "lingo/allpairs/cuda/kernel-diverse",
                       fmt::format("random 30-50 letter strings, vocabulary {} Lingos", encoding.vocabulary_size), false);
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
    run_set(fmt::format("367k subset seed {}", lingo_bench::kSubsetSeed),
            molaccel::lingo::subset(big, lingo_bench::random_indices(big.size(), n, lingo_bench::kSubsetSeed)),
            quick);
  }
  return 0;
}

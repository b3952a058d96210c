// molaccel._core.lingo: molecule sets and the four LINGO operations (search, matrix, neighbours,
// clustering) over the public API of include/molaccel/lingo.hpp, the calls the CLI makes.
#include <cstdint>
#include <cstring>
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "device_array.hpp"
#include "lingo/similarity_math.hpp"
#include "molaccel/lingo.hpp"
#ifdef MOLACCEL_HAVE_CUDA
#include "lingo/cuda/cuda_backend.hpp"
#include "lingo/encoding.hpp"
#include "runtime/cuda/cuda_support.hpp"
#endif

namespace molaccel::python {
namespace {

namespace lg = molaccel::lingo;

lg::LingoOptions lingo_options(int q, const std::string& digits, bool halogens) {
  if (q < lg::kMinQ || q > lg::kMaxQ)
    throw InputError("q", 0, fmt::format("must be in {}..{} (got {})", lg::kMinQ, lg::kMaxQ, q));
  lg::LingoOptions o;
  o.q = q;
  if (digits == "paper")
    o.preprocessing.digits = lg::DigitMode::paper;
  else if (digits == "all")
    o.preprocessing.digits = lg::DigitMode::all;
  else
    throw InputError("digits", 0, fmt::format("unknown digit mode '{}' (paper or all)", digits));
  o.preprocessing.halogens = halogens;
  return o;
}

lg::ComputeOptions compute_options(const std::string& metric, const std::string& backend) {
  lg::ComputeOptions o;
  o.metric = lg::parse_metric(metric);
  o.backend = parse_compute_backend(backend);
  o.job.progress_bar = true;  // drawn only when the Resources show progress
  return o;
}

// Both sets must be cut the same way, or the similarities mean nothing.
// What ran (the CLI's --json fields): backend, pairs, seconds of the library call, ...
nb::dict run_info(const lg::RunInfo& info) {
  nb::dict d;
  d["backend"] = info.backend;
  d["pairs"] = info.pairs;
  d["pairs_skipped"] = info.pairs_skipped;
  d["seconds"] = info.seconds;
  d["prepare_seconds"] = info.prepare_seconds;
  d["tiles"] = info.job.tiles;
  d["tile_retries"] = info.job.retries;
  return d;
}

void check_compatible(const lg::MoleculeSet& a, const lg::MoleculeSet& b) {
  if (a.q != b.q || a.preprocessing.digits != b.preprocessing.digits ||
      a.preprocessing.halogens != b.preprocessing.halogens)
    throw InputError("database", 0,
                     fmt::format("queries and database were prepared differently (q={} and q={}, or other "
                                 "digit/halogen rules); prepare both with the same options",
                                 a.q, b.q));
}

// Hit fields into separate arrays (`query` may be null), in parallel: memory-bound, and the
// arrays' pages are first touched here.
void split_hits(const std::vector<lg::Hit>& hits, int threads, std::uint32_t* query, std::uint32_t* target,
                float* similarity) {
  parallel_for(hits.size(), threads, 1 << 18, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      if (query) query[i] = hits[i].query;
      target[i] = hits[i].target;
      similarity[i] = hits[i].similarity;
    }
  });
}

nb::tuple search(const lg::MoleculeSet& queries, const lg::MoleculeSet& db, std::size_t k,
                 const std::string& metric, const std::string& backend, const std::string& device,
                 int threads, bool progress) {
  check_compatible(queries, db);
  if (k == 0) throw InputError("k", 0, "must be at least 1");
  const auto options = compute_options(metric, backend);
  const Resources resources = resources_for(device, threads, progress);
  const std::size_t per_query = std::min(k, db.size());
  const std::size_t n = queries.size() * per_query;
  auto indices = new_array<std::uint32_t>(n);
  auto similarities = new_array<float>(n);
  lg::RunInfo info;
  {
    // The hits split into the two arrays on the call's threads, straight into the arrays' memory
    // (memory-bound: 36.7 M hits for 367k x top-100).
    nb::gil_scoped_release release;
    const std::vector<lg::Hit> hits = lg::search(resources, queries, db, k, options, &info);
    if (hits.size() != n)
      throw Error(fmt::format("lingo search returned {} hits, {} expected", hits.size(), n));
    split_hits(hits, threads, nullptr, indices.data, similarities.data);
  }
  return nb::make_tuple(
      numpy_array(indices.data, {queries.size(), per_query}, std::move(indices.owner)),
      numpy_array(similarities.data, {queries.size(), per_query}, std::move(similarities.owner)),
      run_info(info));
}

// fp32 lands straight in memory GPUs can write by DMA (page-locked where a driver is usable);
// fp16 and u8 are made from it with the engine's own conversions (the CLI's .npy bits).
nb::tuple matrix(const lg::MoleculeSet& queries, const lg::MoleculeSet* db, const std::string& output_type,
                 const std::string& metric, const std::string& backend, const std::string& device,
                 int threads, bool progress) {
  if (db) check_compatible(queries, *db);
  const auto type = lg::parse_output_type(output_type);
  const auto options = compute_options(metric, backend);
  const Resources resources = resources_for(device, threads, progress);
  const std::size_t rows = queries.size(), cols = db ? db->size() : queries.size();
  const std::size_t n = rows * cols;
  std::size_t shape[2] = {rows, cols};
  ResultMemory memory = result_memory(resources, n * sizeof(float));
  auto* values = reinterpret_cast<float*>(memory.data);
  lg::RunInfo info;
  {
    nb::gil_scoped_release release;
    lg::similarity_matrix(resources, queries, db, values, options, &info);
  }
  if (type == lg::OutputType::fp32)
    return nb::make_tuple(nb::ndarray<nb::numpy, float>(values, 2, shape, memory.owner), run_info(info));
  // fp16 and u8: converted on the call's threads into the array returned (the fp32 values go back
  // to the pool when this returns).
  const auto convert = [&](auto* out, auto&& element) {
    nb::gil_scoped_release release;
    parallel_for(n, threads, 1 << 16, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) out[i] = element(values[i]);
    });
  };
  if (type == lg::OutputType::fp16) {
    auto half = new_array<std::uint16_t>(n);  // viewed as float16 by lingo.py
    convert(half.data, [](float v) { return lg::detail::float_to_half_bits(v); });
    return nb::make_tuple(numpy_array(half.data, {rows, cols}, std::move(half.owner)), run_info(info));
  }
  auto bytes = new_array<std::uint8_t>(n);
  convert(bytes.data, [](float v) { return lg::detail::similarity_to_u8(v); });
  return nb::make_tuple(numpy_array(bytes.data, {rows, cols}, std::move(bytes.owner)), run_info(info));
}

// The fp32 matrix left in device memory (device_output=True), on the first GPU of the call's
// Resources: the engine's GpuJob::on_device computes it in passes there (the whole matrix in one
// pass when it fits in a quarter of the free memory), and each pass is copied device-to-device
// into the array returned. Complete when this returns (device_array.hpp: streams).
nb::tuple matrix_on_device(const lg::MoleculeSet& queries, const lg::MoleculeSet* db,
                           const std::string& metric, const std::string& backend, const std::string& device,
                           int threads) {
  if (db) check_compatible(queries, *db);
  const lg::Metric m = lg::parse_metric(metric);
  if (backend != "auto" && backend != "cuda")
    throw InputError(
        "backend", 0,
        fmt::format("device_output=True runs the cuda backend (backend 'auto' or 'cuda', got '{}')",
                    backend));
  const Resources resources = resources_for(device, threads, false);
  const int gpu = output_device(resources);
  const std::size_t rows = queries.size(), cols = db ? db->size() : queries.size();
  lg::RunInfo info;
  DeviceArray out;
  {
    nb::gil_scoped_release release;
    const double start = now_seconds();
    out = new_device_array(gpu, nb::dtype<float>(), {rows, cols});
#ifdef MOLACCEL_HAVE_CUDA
    if (rows > 0 && cols > 0) {
      const lg::detail::Encoding encoding = lg::detail::encode(queries, db, resources.cpu_threads());
      const lg::cuda_backend::GpuJob job(encoding, m);
      info.prepare_seconds = now_seconds() - start;
      cuda::DeviceGuard guard(gpu);
      WorkerInfo worker;
      worker.kind = WorkerInfo::Kind::gpu;
      worker.device = gpu;
      WorkerContext ctx(worker, nullptr, &resources.pinned_pool());
      auto* values = static_cast<float*>(out.view.data);
      job.on_device(ctx, {0, rows, 0, cols},
                    [&](std::size_t row, std::size_t n, const float* sims, void* stream) {
                      const auto s = static_cast<cudaStream_t>(stream);
                      MOLACCEL_CUDA_TRY(cudaMemcpyAsync(values + row * cols, sims, n * cols * sizeof(float),
                                                        cudaMemcpyDeviceToDevice, s));
                      MOLACCEL_CUDA_TRY(cudaStreamSynchronize(s));  // `sims` is valid only during the call
                    });
    }
#else
    (void)m;
#endif
    info.backend = fmt::format("cuda:{}", gpu);
    info.pairs = rows * cols;
    info.seconds = now_seconds() - start;
  }
  return nb::make_tuple(std::move(out), run_info(info));
}

// The hits' columns as three arrays (one pass over the hits, on the call's threads).
nb::tuple hits_columns(const std::vector<lg::Hit>& hits, int threads) {
  const std::size_t n = hits.size();
  auto query = new_array<std::uint32_t>(n);
  auto target = new_array<std::uint32_t>(n);
  auto similarity = new_array<float>(n);
  {
    nb::gil_scoped_release release;
    split_hits(hits, threads, query.data, target.data, similarity.data);
  }
  return nb::make_tuple(numpy_array(query.data, {n}, std::move(query.owner)),
                        numpy_array(target.data, {n}, std::move(target.owner)),
                        numpy_array(similarity.data, {n}, std::move(similarity.owner)));
}

void check_threshold(float threshold) {
  if (!(threshold >= 0.0f && threshold <= 1.0f))
    throw InputError("threshold", 0, fmt::format("must be in [0, 1] (got {})", threshold));
}

}  // namespace

void bind_lingo(nb::module_& m) {
  nb::class_<lg::MoleculeSet>(m, "MoleculeSet")
      .def("__len__", &lg::MoleculeSet::size)
      .def_prop_ro("q", [](const lg::MoleculeSet& s) { return s.q; })
      .def_prop_ro("digits",
                   [](const lg::MoleculeSet& s) {
                     return s.preprocessing.digits == lg::DigitMode::all ? "all" : "paper";
                   })
      .def_prop_ro("halogens", [](const lg::MoleculeSet& s) { return s.preprocessing.halogens; })
      .def_prop_ro("names", [](const lg::MoleculeSet& s) { return s.names; })
      .def_prop_ro("magnitudes", [](const lg::MoleculeSet& s) {
        return to_numpy(std::vector<std::uint32_t>(s.magnitudes), {s.magnitudes.size()});
      });

  m.def("from_smiles", [](const std::vector<std::string>& smiles, std::vector<std::string> names, int q,
                          const std::string& digits, bool halogens) {
    const auto options = lingo_options(q, digits, halogens);
    if (!names.empty() && names.size() != smiles.size())
      throw InputError("names", 0, fmt::format("{} names for {} SMILES", names.size(), smiles.size()));
    nb::gil_scoped_release release;
    return lg::make_molecules(smiles, options, std::move(names), "<smiles>");
  });
  m.def("read", [](const std::string& path, int q, const std::string& digits, bool halogens,
                   const std::string& smiles_column, const std::string& delimiter, bool skip_invalid) {
    const auto options = lingo_options(q, digits, halogens);
    if (delimiter.size() != 1) throw InputError("delimiter", 0, "must be one character");
    lg::ReadOptions read;
    read.smiles_column = smiles_column;
    read.csv_delimiter = delimiter[0];
    read.skip_invalid = skip_invalid;
    lg::ReadStats stats;
    lg::MoleculeSet set;
    {
      nb::gil_scoped_release release;
      set = lg::read_molecules(path, options, read, &stats);
    }
    nb::dict d;
    d["lines"] = stats.lines;
    d["molecules"] = stats.molecules;
    d["skipped_invalid"] = stats.skipped_invalid;
    d["first_skipped_line"] = stats.first_skipped_line;
    return nb::make_tuple(std::move(set), d);
  });
  m.def("search", &search);
  m.def("matrix_on_device", &matrix_on_device, nb::arg("queries"), nb::arg("db").none(), nb::arg("metric"),
        nb::arg("backend"), nb::arg("device"), nb::arg("threads"));
  m.def("matrix", &matrix, nb::arg("queries"), nb::arg("db").none(), nb::arg("output_type"),
        nb::arg("metric"), nb::arg("backend"), nb::arg("device"), nb::arg("threads"), nb::arg("progress"));
  m.def("neighbors", [](const lg::MoleculeSet& db, float threshold, const std::string& metric,
                        const std::string& backend, const std::string& device, int threads, bool progress) {
    check_threshold(threshold);
    const auto options = compute_options(metric, backend);
    const Resources resources = resources_for(device, threads, progress);
    std::vector<lg::Hit> hits;
    lg::RunInfo info;
    {
      nb::gil_scoped_release release;
      hits = lg::neighbors(resources, db, threshold, options, &info);
    }
    return nb::make_tuple(hits_columns(hits, threads), run_info(info));
  });
  m.def("cluster", [](const lg::MoleculeSet& db, float threshold, const std::string& metric,
                      const std::string& backend, const std::string& device, int threads, bool progress) {
    check_threshold(threshold);
    const auto options = compute_options(metric, backend);
    const Resources resources = resources_for(device, threads, progress);
    lg::Clustering c;
    lg::RunInfo info;
    {
      nb::gil_scoped_release release;
      c = lg::cluster(resources, db, threshold, options, &info);
    }
    const std::size_t n = c.cluster_of.size(), clusters = c.centroids.size();
    return nb::make_tuple(to_numpy(std::move(c.cluster_of), {n}),
                          to_numpy(std::move(c.centroids), {clusters}), c.pairs, run_info(info));
  });
  m.def("similarity", [](const lg::MoleculeSet& a, std::size_t i, const lg::MoleculeSet& b, std::size_t j,
                         const std::string& metric) {
    check_compatible(a, b);
    if (i >= a.size() || j >= b.size()) throw nb::index_error("molecule index out of range");
    return lg::similarity(a, i, b, j, lg::parse_metric(metric));
  });
}

}  // namespace molaccel::python

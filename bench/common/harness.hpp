// Benchmark harness: warm-up, repeats, median; throughput against a stated hardware limit;
// results printed as a table row and appended as JSON lines to $MOLACCEL_BENCH_JSON if set.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::bench {

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int repeats = 0;
};

// Runs fn `warmup` times untimed, then `repeats` times, each timed by `timer` (seconds).
// The default timer is the wall clock around fn(); GPU code passes fn that synchronises, or a
// timer built on CUDA events.
Timing measure(const std::function<void()>& fn, int warmup = 2, int repeats = 7);
Timing measure_with(const std::function<double()>& timed_fn, int warmup = 2, int repeats = 7);
// Median, minimum and maximum of timings taken elsewhere (e.g. seconds per solver iteration).
Timing summarise(std::vector<double> seconds);

struct Row {
  std::string benchmark;  // e.g. "lingo/allpairs/cuda"
  std::string device;     // the GPU's or the CPU's model name
  std::string size;       // e.g. "32768x32768"
  Timing timing;
  double work = 0;         // operations (or items) per run, for throughput
  std::string work_unit;   // e.g. "pairs", "cells", "points"
  double bytes = 0;        // bytes moved per run (0 = not counted)
  double limit = 0;        // hardware limit in work_unit/s (0 = none stated)
  std::string limit_name;  // what the limit is, e.g. "fp32 store bandwidth"
  std::string note;
};

void print_header();
void print_row(const Row& row);  // and appends it to $MOLACCEL_BENCH_JSON when set
std::string human_rate(double per_second, const std::string& unit);
// Resources on the first n visible GPUs (gpu:0, gpu:0,1, ...): the multi-GPU rows of a benchmark.
Resources first_gpus(std::size_t n);
// The OpenCL device an OpenCL benchmark runs on: `requested` (>= 0, from --device N), else the first
// OpenCL GPU; -1 after saying why there is none (the benchmark then exits 0).
int opencl_device_or_first_gpu(int requested, const char* program);

}  // namespace molaccel::bench

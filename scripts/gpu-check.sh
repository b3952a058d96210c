#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build the `cuda` preset, run every GPU test,
# run the benchmarks, and print a short table at the end.
#   scripts/gpu-check.sh [--engines "lingo;align"] [--quick] [--no-bench] [--no-cpu-tests] [--gpu-jobs N]
#                        [--gpu-exclude REGEX] [--test-timeout S]
# --gpu-jobs N runs N GPU tests at once (they share the GPUs; for a quick verification call);
# --gpu-exclude leaves tests out (e.g. a new path run separately afterwards); --test-timeout caps
# each test (default 600 s).
# Logs go to $OUT (when set, as on the device machine) or build/gpu-check/.
set -uo pipefail
cd "$(dirname "$0")/.."
engines="lingo;align;orbital;linalg"
quick=0
bench=1
cpu_tests=1
gpu_jobs=1
gpu_exclude=""
test_timeout=600
while [ $# -gt 0 ]; do
  case "$1" in
    --engines) engines="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-bench) bench=0; shift ;;
    --no-cpu-tests) cpu_tests=0; shift ;;
    --gpu-jobs) gpu_jobs="$2"; shift 2 ;;
    --gpu-exclude) gpu_exclude="$2"; shift 2 ;;
    --test-timeout) test_timeout="$2"; shift 2 ;;
    *) echo "usage: $0 [--engines LIST] [--quick] [--no-bench] [--no-cpu-tests] [--gpu-jobs N] [--gpu-exclude REGEX] [--test-timeout S]" >&2; exit 2 ;;
  esac
done
logdir="${OUT:-build/gpu-check}"
mkdir -p "$logdir"
build=build/cuda
summary=()
note() { summary+=("$1"); }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' || echo "gpu: nvidia-smi not found"
# Baselines (parasail, gau2grid, ViennaCL) and large inputs travel as unpacked Debian packages
# and files under .deps/<engine>/ (git-ignored); each engine's bench/CMakeLists.txt looks there.

t0=$(date +%s)
if ! cmake --preset cuda -DMOLACCEL_ENGINES="$engines" -DMOLACCEL_BUILD_FUZZ=OFF >"$logdir/configure.log" 2>&1; then
  tail -30 "$logdir/configure.log"; echo "FAIL: configure"; exit 1
fi
if ! cmake --build --preset cuda -j"$(nproc)" >"$logdir/build.log" 2>&1; then
  grep -E "error|FAILED" "$logdir/build.log" | head -40; echo "FAIL: build"; exit 1
fi
note "build (cuda preset, engines: $engines): OK in $(( $(date +%s) - t0 )) s"

./$build/bin/molaccel info | tee "$logdir/info.txt"

t0=$(date +%s)
exclude=(); [ -n "$gpu_exclude" ] && exclude=(-E "$gpu_exclude")
ctest --test-dir $build -L gpu "${exclude[@]}" --timeout "$test_timeout" --output-on-failure -j"$gpu_jobs" \
  >"$logdir/ctest-gpu.log" 2>&1
rc_gpu=$?
gpu_line=$(grep -E "tests passed|tests failed" "$logdir/ctest-gpu.log" | tail -1)
skipped=$(grep -c "Skipped" "$logdir/ctest-gpu.log" || true)
note "GPU tests: ${gpu_line:-none} (skipped: $skipped) in $(( $(date +%s) - t0 )) s"
if [ $rc_gpu -ne 0 ]; then grep -E "Failed|FAILED|\*\*\*" "$logdir/ctest-gpu.log" | head -30; fi

rc_cpu=0
if [ $cpu_tests -eq 1 ]; then
  t0=$(date +%s)
  ctest --test-dir $build -L cpu -j"$(nproc)" >"$logdir/ctest-cpu.log" 2>&1
  rc_cpu=$?
  cpu_line=$(grep -E "tests passed|tests failed" "$logdir/ctest-cpu.log" | tail -1)
  note "CPU tests: ${cpu_line:-none} in $(( $(date +%s) - t0 )) s"
  if [ $rc_cpu -ne 0 ]; then grep -E "Failed|FAILED|\*\*\*" "$logdir/ctest-cpu.log" | head -30; fi
fi

rc_bench=0
if [ $bench -eq 1 ]; then
  export MOLACCEL_BENCH_JSON="$logdir/bench.jsonl"
  echo "== bench_runtime"; ./$build/bench/runtime/bench_runtime | tee "$logdir/bench-runtime.txt" || rc_bench=1
  IFS=';' read -r -a list <<<"$engines"
  for e in "${list[@]}"; do
    script=bench/$e/gpu-run.sh
    if [ -f "$script" ]; then
      echo "== $e: GPU tests, benchmarks, table"
      args=(); [ $quick -eq 1 ] && args+=(--quick)
      if MOLACCEL_GPU_BUILD_DIR="$build" bash "$script" "${args[@]}" >"$logdir/bench-$e.txt" 2>&1; then
        note "$e benchmarks: OK"
      else
        rc_bench=1; note "$e benchmarks: FAILED (see $logdir/bench-$e.txt)"
      fi
      tail -25 "$logdir/bench-$e.txt"
    fi
  done
fi

echo
echo "================ molaccel GPU check ================"
printf '%s\n' "${summary[@]}"
[ $bench -eq 1 ] && echo "benchmark rows: $(wc -l <"$logdir/bench.jsonl" 2>/dev/null || echo 0) (full table above, JSON in $logdir/bench.jsonl)"
[ $rc_gpu -eq 0 ] && [ $rc_cpu -eq 0 ] && [ $rc_bench -eq 0 ] && { echo "RESULT: PASS"; exit 0; }
echo "RESULT: FAIL"; exit 1

#!/usr/bin/env bash
# The GPU driver, on a machine with an NVIDIA GPU, from the repository root (one device call):
#   scripts/gpu.sh build   build the `cuda` preset only (later calls on the same machine reuse it)
#   scripts/gpu.sh check   build the `cuda` preset, run every GPU test and then the CPU tests
#   scripts/gpu.sh bench   build, run each engine's headline benchmarks, print a table
#   scripts/gpu.sh all     check, then bench
#   scripts/gpu.sh profile ENGINE   the engine's headline benchmark under Nsight Compute
#   scripts/gpu.sh sanitize  build, then compute-sanitizer over the GPU tests (--jobs, --filter,
#                            --timeout apply); the table and a tarball of the logs go to the log folder
# Options:
#   --engines "lingo;align"  a subset of the engines (default: all four)
#   --quick                  shorter benchmarks (fewer repeats, smaller sizes where they allow)
#   --tuning ENGINE:k=v      passed as `--tuning k=v` to that engine's benchmark (repeatable)
#   --filter REGEX           only the GPU tests whose name matches (ctest -R)
#   --jobs N                 GPU tests run N at a time (default 1)
#   --timeout S              per-test limit in seconds (default 600)
#   --gpu-only               check: only the GPU and OpenCL tests (CI runs the CPU ones)
#   --part K/N               check: every Nth test from the Kth (by ctest number): the GPU suite
#                            takes about 10 minutes with --jobs 4 on an H100, more than one device
#                            call; --part 1/2 and --part 2/2 in two calls on the same warm machine
#   --build DIR              build folder (default build/cuda)
#   --benches "display;python"  which benchmark groups `bench` runs (default: runtime and the
#                            engines; also display, python, opencl, program)
# Large inputs and baselines (scripts/fetch-gpu-deps.sh) travel in .deps/. Logs go to $OUT when set
# (the device machine), else build/gpu/.
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
[ $# -gt 0 ] && shift
profile_engine=""
if [ "$mode" = profile ]; then
  profile_engine="${1:-}"
  [ $# -gt 0 ] && shift
fi
engines="lingo;align;orbital;linalg"
quick=0
filter=""
jobs=1
timeout=600
build=build/cuda
tunings=()
benches=""
gpu_only=0
part=""
usage() {
  sed -n '2,20p' "$0" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --engines) engines="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --tuning) tunings+=("$2"); shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --benches) benches="$2"; shift 2 ;;
    --gpu-only) gpu_only=1; shift ;;
    --part) part="$2"; shift 2 ;;
    *) usage ;;
  esac
done
case "$mode" in build|check|bench|all|profile|sanitize) ;; *) usage ;; esac
[ "$mode" = profile ] && [ -z "$profile_engine" ] && usage
logdir="${OUT:-build/gpu}"
mkdir -p "$logdir"
t0=$(date +%s)
summary=()
note() { summary+=("$1"); echo "-- $1"; }
failed=0

# The benchmark arguments of one engine: --quick and its --tuning settings.
engine_args() {
  local engine=$1 t
  [ $quick -eq 1 ] && echo --quick
  for t in "${tunings[@]}"; do
    [[ "$t" == "$engine":* ]] && printf -- '--tuning\n%s\n' "${t#*:}"
  done
}

# OpenCL on the GPU machine: the ICD loader and headers from .deps/opencl where the system has
# none, and NVIDIA's OpenCL driver registered through OCL_ICD_VENDORS where the image ships
# libnvidia-opencl.so.1 without an ICD file.
opencl_args=()
setup_opencl() {
  local root="$PWD/.deps/opencl/root/usr" lib
  lib="$root/lib/x86_64-linux-gnu"
  if [ -f "$lib/libOpenCL.so.1.0.0" ]; then
    ln -sf libOpenCL.so.1.0.0 "$lib/libOpenCL.so.1" && ln -sf libOpenCL.so.1.0.0 "$lib/libOpenCL.so"
    opencl_args=(-DMOLACCEL_OPENCL=ON -DMOLACCEL_OPENCL_INCLUDE_DIR="$root/include" -DOpenCL_INCLUDE_DIR="$root/include"
                 -DOpenCL_LIBRARY="$lib/libOpenCL.so.1.0.0")
    ldconfig -p 2>/dev/null | grep -q "libOpenCL.so.1 " || export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  if ! grep -qs nvidia /etc/OpenCL/vendors/*.icd && ldconfig -p 2>/dev/null | grep -q libnvidia-opencl.so.1; then
    mkdir -p /tmp/molaccel-icd && echo libnvidia-opencl.so.1 >/tmp/molaccel-icd/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/molaccel-icd
  fi
}
setup_opencl

build_all() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null |
    sed 's/^/gpu: /' || echo "gpu: nvidia-smi not found"
  local start=$(date +%s)
  if ! cmake -S . -B "$build" --preset cuda -DMOLACCEL_ENGINES="$engines" -DMOLACCEL_BUILD_FUZZ=OFF "${opencl_args[@]}" \
    >"$logdir/configure.log" 2>&1; then
    tail -30 "$logdir/configure.log"; echo "RESULT: FAIL (configure)"; exit 1
  fi
  if ! cmake --build "$build" -j"$(nproc)" >"$logdir/build.log" 2>&1; then
    grep -E "error|FAILED" "$logdir/build.log" | head -40; echo "RESULT: FAIL (build)"; exit 1
  fi
  note "build ($build, engines $engines): $(( $(date +%s) - start )) s"
}

run_tests() {
  local start=$(date +%s) select=()
  [ -n "$filter" ] && select=(-R "$filter")
  [ -n "$part" ] && select+=(-I "${part%/*},,${part#*/}")
  ctest --test-dir "$build" -L gpu "${select[@]}" --timeout "$timeout" --output-on-failure -j"$jobs" \
    >"$logdir/ctest-gpu.log" 2>&1 || failed=1
  note "GPU tests: $(grep -E 'tests passed|tests failed' "$logdir/ctest-gpu.log" | tail -1) ($(( $(date +%s) - start )) s)"
  grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Exception)" "$logdir/ctest-gpu.log" | head -20
  grep -E -A3 "Failure$|\*\*\*Exception" "$logdir/ctest-gpu.log" | head -40
  start=$(date +%s)
  ctest --test-dir "$build" -L opencl "${select[@]}" --output-on-failure >"$logdir/ctest-opencl.log" 2>&1 || failed=1
  note "OpenCL tests ($("$build/bin/molaccel" info 2>/dev/null | grep -i -m1 "opencl" | cut -c1-80)): $(grep -E 'tests passed|tests failed|No tests' "$logdir/ctest-opencl.log" | tail -1) ($(( $(date +%s) - start )) s)"
  [ $gpu_only -eq 1 ] && return
  start=$(date +%s)
  ctest --test-dir "$build" -L cpu "${select[@]}" -j"$(nproc)" --output-on-failure >"$logdir/ctest-cpu.log" 2>&1 || failed=1
  note "CPU tests: $(grep -E 'tests passed|tests failed' "$logdir/ctest-cpu.log" | tail -1) ($(( $(date +%s) - start )) s)"
}

# Each engine's headline benchmarks; their rows go to the table.
bench_runtime() { "$build/bench/runtime/bench_runtime"; }
bench_lingo() {  # the 32,768^2 kernel and matrices (page-locked), the 367k x 367k top-100 search
  mapfile -t args < <(engine_args lingo)
  "$build/bench/lingo/bench_lingo_allpairs" --gpu-only --data .deps/lingo "${args[@]}"
  "$build/bench/lingo/bench_lingo_search" --quick --queries 367393 --data .deps/lingo
}
bench_align() {  # 20 queries against the synthetic 486k-sequence database
  mapfile -t args < <(engine_args align)
  [ $quick -eq 1 ] || args+=(--repeats 3)
  "$build/bench/align/bench_align_search" --gpu-only "${args[@]}"
}
bench_orbital() {  # C60 6-31G*: one orbital, density of 180 orbitals, a batch of 32 into host memory
  mapfile -t args < <(engine_args orbital)
  "$build/bench/orbital/bench_orbital_c60" "${args[@]}"
  "$build/bench/orbital/bench_orbital_c60" --quick --batch 32 "${args[@]}"
  "$build/bench/orbital/bench_orbital_cube_write"
  [ -x "$build/bench/orbital/bench_orbital_opencl" ] && "$build/bench/orbital/bench_orbital_opencl"
}
bench_display() {  # C60 6-31G* frames: grid, both surfaces, image (and MP4), GPU against the CPU-image path
  "$build/bench/orbital/bench_orbital_display" $([ $quick -eq 1 ] && echo --quick)
}
bench_python() {  # the Python call against the library call (demo workloads, 367k lingo search, orbital fixed cost)
  PYTHONPATH="$build/python" python3 bench/python/bench_overhead.py --device gpu --repeats 5
  PYTHONPATH="$build/python" python3 bench/python/bench_lingo_search.py --data .deps/lingo --device gpu
  PYTHONPATH="$build/python" python3 bench/python/bench_orbital_grid.py --device gpu
}
bench_program() {  # generated linalg programs in every kernel form, and solve() against its graph path, 1e3-1e7 rows
  "$build/bench/linalg/bench_program" --forms
}
bench_opencl() {  # BiCGStab per iteration through OpenCL (host loop, persistent kernel) against ViennaCL
  "$build/bench/linalg/bench_linalg_opencl"
}
bench_linalg() {
  mapfile -t args < <(engine_args linalg)
  "$build/bench/linalg/bench_linalg" --bicgstab-only "${args[@]}"
  [ -x "$build/bench/linalg/bench_linalg_viennacl" ] && "$build/bench/linalg/bench_linalg_viennacl" --quick
  "$build/bench/linalg/bench_program"
  [ -x "$build/bench/linalg/bench_linalg_opencl" ] && "$build/bench/linalg/bench_linalg_opencl"
  [ -x "$build/bench/linalg/bench_linalg_viennacl_opencl" ] && "$build/bench/linalg/bench_linalg_viennacl_opencl"
  return 0
}

run_benchmarks() {
  export MOLACCEL_BENCH_JSON="$logdir/bench.jsonl"
  rm -f "$MOLACCEL_BENCH_JSON"
  local e start
  IFS=';' read -r -a list <<<"${benches:-runtime;$engines}"
  for e in "${list[@]}"; do
    start=$(date +%s)
    if "bench_$e" >"$logdir/bench-$e.log" 2>&1; then
      note "$e benchmarks: OK ($(( $(date +%s) - start )) s)"
    else
      failed=1; note "$e benchmarks: FAILED ($logdir/bench-$e.log)"; tail -5 "$logdir/bench-$e.log"
    fi
  done
  echo
  echo "================ benchmarks ($(date -u +%F), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)) ================"
  grep -hE "^(benchmark|[a-z]+/)" "$logdir"/bench-*.log | awk '!seen[$0]++' | cut -c1-200
}

# The program (and its fixed arguments) that `profile` runs for an engine.
headline_program() {
  case "$1" in
    lingo) echo "$build/bench/lingo/bench_lingo_allpairs --kernel-only --data .deps/lingo" ;;
    align) echo "$build/bench/align/bench_align_search --gpu-only" ;;
    orbital) echo "$build/bench/orbital/bench_orbital_c60" ;;
    linalg) echo "$build/bench/linalg/bench_linalg --bicgstab-only" ;;
    *) echo "unknown engine $1" >&2; exit 2 ;;
  esac
}

profile() {
  local engine=$1 program
  command -v ncu >/dev/null || { echo "ncu not found"; exit 1; }
  program=$(headline_program "$engine")
  quick=1
  mapfile -t args < <(engine_args "$engine")
  # The first kernels of the short benchmark, every section.
  # shellcheck disable=SC2086
  ncu --set full --launch-count 5 -o "$logdir/profile-$engine" --force-overwrite $program "${args[@]}" \
    >"$logdir/profile-$engine.log" 2>&1 || failed=1
  tail -20 "$logdir/profile-$engine.log"
  note "profile of $engine: $logdir/profile-$engine.ncu-rep"
}

sanitize() {
  local start=$(date +%s) select=()
  [ -n "$filter" ] && select=(--filter "$filter")
  scripts/compute-sanitizer.sh --build-dir "$build" --jobs "$jobs" --timeout "$timeout" "${select[@]}" \
    --out "$build/compute-sanitizer" 2>"$logdir/compute-sanitizer-progress.log" || failed=1
  cp "$build/compute-sanitizer/table.md" "$logdir/compute-sanitizer-table.md" 2>/dev/null
  tar czf "$logdir/compute-sanitizer-logs.tgz" -C "$build" compute-sanitizer
  note "compute-sanitizer ($jobs at a time): $(( $(date +%s) - start )) s"
}

build_all
case "$mode" in
  build) ;;
  check) run_tests ;;
  bench) run_benchmarks ;;
  all) run_tests; run_benchmarks ;;
  profile) profile "$profile_engine" ;;
  sanitize) sanitize ;;
esac
echo
echo "================ molaccel $mode ($(( $(date +%s) - t0 )) s) ================"
printf '%s\n' "${summary[@]}"
[ $failed -eq 0 ] && { echo "RESULT: PASS"; exit 0; }
echo "RESULT: FAIL"
exit 1

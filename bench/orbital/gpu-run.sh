#!/usr/bin/env bash
# Orbital engine on a GPU machine: configure, build, run the GPU tests (and the CPU tests, which
# are fast with many cores), the C60 6-31G* benchmark, the 32-orbital batch over 1..all GPUs and
# the demo; prints a short table last.
# Usage (from the repository root): bench/orbital/gpu-run.sh [--quick]
set -uo pipefail
quick=""
[[ "${1:-}" == "--quick" ]] && quick="--quick"
build="${MOLACCEL_GPU_BUILD_DIR:-build-gpu-orbital}"
# MOLACCEL_LOG_DIR: write the full logs (build, tests, benchmark, batch) there.
log="${MOLACCEL_LOG_DIR:-$(mktemp -d)}"
mkdir -p "$log"
status_line() { printf '%-34s %s\n' "$1" "$2"; }

if [[ -z "${MOLACCEL_GPU_BUILD_DIR:-}" ]]; then  # scripts/gpu-check.sh builds everything once
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=orbital \
    -DMOLACCEL_BUILD_FUZZ=OFF > "$log/configure.txt" 2>&1 || { tail -30 "$log/configure.txt"; exit 1; }
  cmake --build "$build" -j16 --target molaccel_cli test_orbital_io test_orbital_reference test_orbital_cpu \
    test_orbital_jit_source test_orbital_cuda test_orbital_cli bench_orbital_c60 bench_orbital_cpu > "$log/build.txt" 2>&1 || { grep -E "error" -A5 "$log/build.txt" | head -60; exit 1; }
fi

ctest --test-dir "$build" -L gpu -R Orbital --output-on-failure > "$log/gpu-tests.txt" 2>&1
gpu_rc=$?
ctest --test-dir "$build" -L cpu -R Orbital -j8 --output-on-failure > "$log/cpu-tests.txt" 2>&1
cpu_rc=$?
tail -25 "$log/gpu-tests.txt"
grep -E "tests passed|FAILED|Failed" "$log/cpu-tests.txt" | head -20

"$build/bench/orbital/bench_orbital_c60" $quick 2>&1 | tee "$log/bench.txt"
# The CPU kernel against gau2grid and the previous CPU kernel, one thread, interleaved rounds.
if [[ -x "$build/bench/orbital/bench_orbital_cpu" ]]; then
  "$build/bench/orbital/bench_orbital_cpu" --rounds $([[ -n "$quick" ]] && echo 5 || echo 9) 2>&1 | tee "$log/bench-cpu.txt"
fi
# A batch of 32 orbitals (one grid each) on 1, 2, ... all visible GPUs.
"$build/bench/orbital/bench_orbital_c60" $quick --batch 32 2>&1 | tee "$log/batch.txt"
batch_rc=${PIPESTATUS[0]}
demo_out=$(mktemp -d)
"$build/bin/molaccel" demo --only orbital -o "$demo_out" 2>&1 | tee "$log/demo.txt"

echo
echo "== orbital on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) =="
status_line "gpu tests" "$(grep -E 'tests passed' "$log/gpu-tests.txt" || echo 'failed (rc '$gpu_rc')')"
status_line "cpu tests" "$(grep -E 'tests passed' "$log/cpu-tests.txt" || echo 'failed (rc '$cpu_rc')')"
grep -E "^orbital/" "$log/bench.txt" | cut -c1-160
grep -E "JIT speed-up|sparse density path|culled JIT" "$log/bench.txt"
grep -E "^orbital/|^CPU kernel" "$log/bench-cpu.txt" 2>/dev/null | cut -c1-200
grep -E "^batch|^path|^sparse basis|^per-orbital|^matrix, page" "$log/batch.txt"
grep -E "^HOMO|^density of" "$log/demo.txt"
[[ $gpu_rc -eq 0 && $cpu_rc -eq 0 && $batch_rc -eq 0 ]]

#!/usr/bin/env bash
# LINGO engine on a CUDA machine: build (Release), GPU tests, benchmarks, then a short table.
# Run from the repository root: bench/lingo/gpu-run.sh [--quick]
# LINGO_SKIP_SEARCH=1 skips the search benchmark; LINGO_SEARCH_FULL=1 adds top-100 of all 367k.
# molecules_367k.smi.gz is looked for in .deps/lingo/ (carry it) or ../shared/data/lingo/.
set -euo pipefail
quick=""
if [[ "${1:-}" == "--quick" ]]; then quick="--quick"; fi
build="${MOLACCEL_GPU_BUILD_DIR:-build-gpu-lingo}"
if [[ -z "${MOLACCEL_GPU_BUILD_DIR:-}" ]]; then  # scripts/gpu-check.sh builds everything once
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=lingo \
    -DMOLACCEL_BUILD_FUZZ=OFF > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
  cmake --build "$build" -j16 --target molaccel_cli test_lingo_cuda test_lingo_cpu bench_lingo_allpairs bench_lingo_search
fi
"$build/bin/molaccel" info
status=0
ctest --test-dir "$build" -L gpu -R 'Lingo' --output-on-failure || status=$?
results="$build/lingo-bench.txt"
: > "$results"
"$build/bench/lingo/bench_lingo_allpairs" $quick 2>&1 | tee -a "$results" || status=$?  # stderr: timelines
if [[ -z "${LINGO_SKIP_SEARCH:-}" ]]; then  # LINGO_SKIP_SEARCH=1: the all-pairs benchmark only
  "$build/bench/lingo/bench_lingo_search" $quick | tee -a "$results" || status=$?
fi
if [[ -n "${LINGO_SEARCH_FULL:-}" ]]; then  # the target: all 367k queries, k = 100
  "$build/bench/lingo/bench_lingo_search" --quick --queries 367393 | tee -a "$results" || status=$?
fi
echo
echo "== lingo summary ($(date -u +%F) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)) =="
grep -E '^(benchmark|lingo/)' "$results" | awk '!seen[$0]++' || true
exit $status

#!/usr/bin/env bash
# LINGO engine on a CUDA machine: build (Release), GPU tests, benchmarks, then a short table.
# Run from the repository root: bench/lingo/gpu-run.sh [--quick]
# molecules_367k.smi.gz is looked for in .deps/lingo/ (carry it) or ../shared/data/lingo/.
set -euo pipefail
quick=""
if [[ "${1:-}" == "--quick" ]]; then quick="--quick"; fi
build=build-gpu-lingo
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=lingo \
  -DMOLACCEL_BUILD_FUZZ=OFF > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j16 --target molaccel_cli test_lingo_cuda test_lingo_cpu bench_lingo_allpairs bench_lingo_search
"$build/bin/molaccel" info
status=0
ctest --test-dir "$build" -L gpu -R 'Lingo' --output-on-failure || status=$?
results="$build/lingo-bench.txt"
: > "$results"
"$build/bench/lingo/bench_lingo_allpairs" $quick | tee -a "$results" || status=$?
"$build/bench/lingo/bench_lingo_search" $quick | tee -a "$results" || status=$?
echo
echo "== lingo summary ($(date -u +%F) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)) =="
grep -E '^(benchmark|lingo/)' "$results" | awk '!seen[$0]++' || true
exit $status

#!/usr/bin/env bash
# GPU check of the align engine: configure and build (Release, CUDA, align only), run the GPU
# tests, run the benchmarks, print a short table last. Run from the repository root.
#   bench/align/gpu-run.sh [--quick]
# MOLACCEL_ALIGN_BENCH_VARIANTS="qp:32:3 qp1:48:2 ..." times those inter-task variants side by side
# (one database build; see bench_align_search --variant); MOLACCEL_ALIGN_BENCH_ARGS adds arguments
# (e.g. "--repeats 3").
set -euo pipefail
quick=""
[[ "${1:-}" == "--quick" ]] && quick="--quick"
build="${MOLACCEL_GPU_BUILD_DIR:-build-gpu-align}"
if [[ -z "${MOLACCEL_GPU_BUILD_DIR:-}" ]]; then  # scripts/gpu-check.sh builds everything once
  mkdir -p "$build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=align \
    -DMOLACCEL_BUILD_FUZZ=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
  cmake --build "$build" -j16 --target test_align_gpu test_align_cpu bench_align_search molaccel_cli 2>&1 | tail -3
fi
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader || true

status=0
ctest --test-dir "$build" -L gpu -R Align --output-on-failure --timeout 500 >"$build/ctest_gpu.txt" 2>&1 || status=1
grep -B3 -A12 -E "Failure|Expected|FAILED|Exception" "$build/ctest_gpu.txt" | head -80 || true
tail -15 "$build/ctest_gpu.txt"

export MOLACCEL_BENCH_JSON="$PWD/$build/bench_align.jsonl"
rm -f "$MOLACCEL_BENCH_JSON"
variant_args=()
for v in ${MOLACCEL_ALIGN_BENCH_VARIANTS:-}; do variant_args+=(--variant "$v"); done
"$build/bench/align/bench_align_search" $quick "${variant_args[@]}" ${MOLACCEL_ALIGN_BENCH_ARGS:-} 2>&1 | tee "$build/bench_align.txt" || status=1
if [[ -z "$quick" ]]; then  # the other strip heights, GPU rows only
  for rows in 32 16; do
    MOLACCEL_ALIGN_STRIP_ROWS=$rows "$build/bench/align/bench_align_search" --gpu-only --repeats 2 2>&1 |
      grep "^align/" | tee -a "$build/bench_align.txt" || status=1
  done
fi

# Instruction mix of the inter-task kernels (SASS), for instructions-per-cell notes: the default
# (qp, merged launch, R = 32, 3 blocks) instance and qp R = 48 / 2 blocks (MOLACCEL_ALIGN_SASS_KERNELS
# overrides).
lib=$(find "$build" -name libmolaccel.a | head -1)
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
if [[ -x "$cuobjdump" && -n "$lib" ]]; then
  for kernel in ${MOLACCEL_ALIGN_SASS_KERNELS:-inter_task_kernel_qpmILi32ELi3EEEv inter_task_kernel_qpmILi48ELi2EEEv}; do
    echo "SASS instruction mix of $kernel:"
    "$cuobjdump" -sass "$lib" 2>/dev/null |
      awk -v k="$kernel" '/Function : /{f = index($0, k) > 0} f' |
      grep -oE '/\*[0-9a-f]{4}\*/ +[A-Z][A-Z0-9_.]*' | awk '{print $2}' | sort | uniq -c | sort -rn | head -16 || true
  done
  "$cuobjdump" -res-usage "$lib" 2>/dev/null | grep -A1 -E "inter_task|intra_task" | grep -oE "Function [^:]*|REG:[0-9]+|SHARED:[0-9]+" | paste - - - || true
fi

echo "== align GPU summary =="
grep -E "^align/|^[[:space:]]*align/" "$build/bench_align.txt" || cat "$build/bench_align.txt"
exit $status

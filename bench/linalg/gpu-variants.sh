#!/usr/bin/env bash
# linalg tuning run on a GPU machine (one call): build the engine, run its GPU tests with the
# default tuning and again with 4 and 8 reduction blocks per SM, then time the variants side by
# side: persistent geometries (blocks x threads) at n <= 1e5, reduction blocks per SM (2, 4, 8)
# for the graph mode at n >= 1e5, and the BLAS-1/BLAS-2 rows (operand sets rotated past L2).
#   bash bench/linalg/gpu-variants.sh          (from the repository root)
set -uo pipefail
cd "$(dirname "$0")/../.."
build="${MOLACCEL_GPU_BUILD_DIR:-build-gpu-linalg}"
log=$(mktemp -d)/linalg
status=0
t0=$(date +%s)
stamp() { echo "-- $(( $(date +%s) - t0 )) s: $*"; }
if [[ -z "${MOLACCEL_GPU_BUILD_DIR:-}" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=linalg \
    -DMOLACCEL_BUILD_FUZZ=OFF > "$log.configure" 2>&1 || { cat "$log.configure"; exit 1; }
  cmake --build "$build" -j16 --target test_linalg_gpu bench_linalg > "$log.build" 2>&1 ||
    { tail -50 "$log.build"; exit 1; }
fi
stamp "built"
bench="$build/bench/linalg/bench_linalg"

echo "== linalg GPU tests (default tuning) =="
ctest --test-dir "$build" -L gpu -R Linalg --output-on-failure --timeout 150 2>&1 | tail -25 || status=1
stamp "tests"
for k in 4 8; do
  echo "== linalg GPU operation and solver tests, MOLACCEL_LINALG_REDUCTION_BLOCKS_PER_SM=$k =="
  MOLACCEL_LINALG_REDUCTION_BLOCKS_PER_SM=$k ctest --test-dir "$build" -L gpu \
    -R "LinalgGpuOperations|ConvergeInBothLaunchModes|ProductsInsideReductions" --timeout 150 2>&1 |
    grep -E "tests passed|Failed|\*\*\*" || status=1
done
stamp "tuning tests"

echo "== bicgstab: persistent geometries vs graph (n <= 1e5) =="
timeout 100 "$bench" --bicgstab-only --max-n=2e5 --modes=graph,persistent \
  --persistent=0x0,1x256,1x512,1x1024,4x1024,8x512,16x1024,33x1024,66x512 2>&1 | grep bicgstab || status=1
stamp "persistent"
for k in 2 4 8; do
  echo "== bicgstab graph, reduction blocks per SM = $k =="
  MOLACCEL_LINALG_REDUCTION_BLOCKS_PER_SM=$k timeout 60 "$bench" --bicgstab-only --min-n=9e4 --max-n=1.1e7 \
    --modes=graph 2>&1 | grep bicgstab || status=1
done
stamp "reduction blocks"
echo "== BLAS-1 / BLAS-2 (operand sets rotated) =="
timeout 60 "$bench" --quick --max-n=1 2>&1 | grep -E "copy-bandwidth|blas1|blas2" || status=1
stamp "done"
exit $status

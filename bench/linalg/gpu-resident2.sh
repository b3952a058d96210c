#!/usr/bin/env bash
# linalg resident-mode variants on a GPU machine in one call (< 5 min on an H100): build this
# engine's GPU tests, benchmark and CLI, run the resident and solver GPU tests (every form,
# barrier and matrix placement), then fp64 BiCGStab on Poisson n = 1e3..MAX_N (2e5) per iteration: graph
# vs the resident geometries in RESIDENT (bench_linalg --resident=: c cluster, g flags,
# o cooperative groups, a counter, e counter with a red arrival; + two-barrier form, - four-barrier
# form, s / l matrix rows in shared memory / from L2), side by side in one process, then the CLI.
# The whole log also goes to $OUT/linalg-resident.log when $OUT is set.
#   bash bench/linalg/gpu-resident2.sh [gtest filter]   (from the repository root)
set -uo pipefail
log=${OUT:-/tmp}/linalg-resident.log
exec > >(tee "$log") 2>&1
source bench/linalg/gpu-common.sh
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
linalg_configure
linalg_build test_linalg_gpu bench_linalg molaccel_cli
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}  # one GPU: the benchmark's solves all run on the same one
linalg_gpu_tests "${1:-LinalgGpuResident*:LinalgGpuSolvers*}" "${TEST_TIMEOUT:-150}"
R="${RESIDENT:-0x0,0x0-l,0x0-,0x0+l,0x0+}"
echo "== bicgstab: graph vs resident ($R) =="
timeout ${BENCH_TIMEOUT:-100} $b/bench/linalg/bench_linalg --bicgstab-only --max-n=${MAX_N:-2.1e5} --modes=graph,resident --resident=$R 2>&1 | grep bicgstab | sed -E 's/ +/ /g; s/linalg.bicgstab-poisson.fp64.//; s/ [0-9.]+ .B.s [0-9.]+% / /; s/, 1 kernels.iter, gpu:[0-9] resident / /; s/rows.thread/rpt/; s/barriers.iteration/bar/' | cut -c1-200; st bench
echo "== CLI =="
for m in resident graph; do timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab --launch $m 2>&1 | tail -2; done
timeout 30 $b/bin/molaccel solve data/linalg/1138_bus.mtx --device gpu --solver cg --precond jacobi --max-iter 20000 --launch resident 2>&1 | tail -2
st done

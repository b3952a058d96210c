#!/usr/bin/env bash
# linalg resident / fused modes: the GPU tests, where the time of an iteration goes, and the
# variants side by side, in one GPU call (< 5 min on an H100): build; the resident, fused and
# solver GPU tests (TESTS); the per-barrier trace (MOLACCEL_LINALG_RESIDENT_TRACE=1: block work,
# reduction, barrier wait of block 0 and of the last arriver, arrival spread, gather) for the
# geometries in TRACE at n = 1e4 and 1e5; fp64 BiCGStab per iteration, graph vs the resident
# geometries in RESIDENT (bench_linalg --resident=, suffixes: c cluster, a counter, n counter with
# a generation word, + / - two / four barriers, A / Z every warp / one read per block gathers the
# block sums) at n = 1e3..2e5, graph vs the fused geometries in FUSED at 1e6 and 1e7; the CLI.
# The whole log goes to $OUT/log.txt when $OUT is set.
#   bash bench/linalg/gpu-trace.sh   (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg_gpu bench_linalg molaccel_cli
linalg_gpu_tests "${TESTS:-LinalgGpuResident.*:LinalgGpuFused.*:LinalgGpuSolvers.*}" "${TEST_TIMEOUT:-100}"
T="${TRACE:-0x0,0x0+,16x512c+,50x512,0x0-}"
echo "== trace ($T) =="
resident_trace "$T" 1.1e5 40 600
st trace
R="${RESIDENT:-0x0,0x0A,50x512A,50x512,0x0+,16x512c+,16x512c,8x512c+,40x256+,0x0-}"
echo "== bicgstab graph vs resident ($R) =="
timeout 60 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=$R 2>&1 | bicgstab_rows; st resident
F="${FUSED:-0x0,0x0A}"
echo "== bicgstab graph vs fused ($F), floor = 320 B/row at the measured copy bandwidth =="
timeout 60 $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph,fused --fused=$F 2>&1 | bicgstab_rows; st fused
echo "== CLI =="
for args in "--solver bicgstab" "--solver bicgstab --precond jacobi" "--solver cg"; do for m in auto fused graph; do
  echo "-- poisson 1000 $args --launch $m"; timeout 30 $b/bin/molaccel solve --poisson 1000 --device gpu $args --tol 1e-6 --max-iter 8000 --launch $m 2>&1 | tail -2; done; done
for m in auto graph; do echo "-- poisson 316 bicgstab $m"; timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab --launch $m 2>&1 | tail -2; done
timeout 30 $b/bin/molaccel solve data/linalg/1138_bus.mtx --device gpu --solver cg --precond jacobi --max-iter 20000 --launch resident 2>&1 | tail -2
st done

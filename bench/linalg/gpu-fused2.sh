#!/usr/bin/env bash
# linalg fused BiCGStab kernel variants and the GPU verification in one call (< 5 min on an H100):
# build; fp64 BiCGStab per iteration at 1e6 and 1e7, graph vs the fused variants in FUSED side by
# side in one process (bench_linalg --fused= suffixes: c / a vector loads through L2 / L1, s / b
# grid-stride / balanced rows; 0x0 = the automatic choice); the resident, fused and solver GPU
# tests (TESTS) with the defaults; graph vs the resident default at 1e3..2e5; the per-barrier
# trace of the fused kernel at 1e6 (automatic vs FUSED_TRACE); the CLI. Whole log in $OUT/log.txt.
#   bash bench/linalg/gpu-fused2.sh   (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg_gpu bench_linalg molaccel_cli
F="${FUSED:-0x0,0x0cs,0x0as,0x0cb,0x5121}"
echo "== bicgstab graph vs fused ($F), floor = 320 B/row at the measured copy bandwidth =="
timeout ${BENCH_TIMEOUT:-70} $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph,fused --fused=$F 2>&1 | bicgstab_rows; st fused
linalg_gpu_tests "${TESTS:-LinalgGpuFused.*:LinalgGpuResident.*:LinalgGpuSolvers.*}" "${TEST_TIMEOUT:-120}"
echo "== bicgstab graph vs resident (0x0) =="
timeout 30 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=0x0 2>&1 | bicgstab_rows; st resident
T="${FUSED_TRACE:-0x0,0x0cs}"
echo "== trace, fused at 1e6 ($T) =="
fused_trace "$T"; st trace
echo "== CLI =="
for args in "--solver bicgstab" "--solver bicgstab --precond jacobi"; do
  echo "-- poisson 1000 $args --launch auto"; timeout 15 $b/bin/molaccel solve --poisson 1000 --device gpu $args --tol 1e-6 --max-iter 8000 2>&1 | tail -2; done
timeout 15 $b/bin/molaccel solve data/linalg/ani4.mtx --device gpu --solver bicgstab --precond jacobi --max-iter 8000 --launch fused 2>&1 | tail -2
st done

#!/usr/bin/env bash
# Split cluster barriers and the grid's rows per thread (one call, ~4.5 min on an H100): build;
# registers and stack of the cluster kernel; the resident, solver and fused GPU tests; fp64
# BiCGStab on Poisson per iteration with the automatic choices at 1e3-2e5 (three runs) and on the
# sides 150-367 (n = 22,500-134,689) with 2 and 4 rows per thread on grids
# (MOLACCEL_LINALG_RESIDENT_GRID_RPT) beside the automatic choice (SWEEP=0 skips); the
# per-barrier trace at 1e4.
#   bash bench/linalg/gpu-split.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg_gpu bench_linalg
obj=$(find $b -name 'resident.cu.o' | head -1)
echo "== registers / stack: resident_kernel<double, BiCGStab, 2 rows, cluster, three barriers, diagonals> =="
cuobjdump -res-usage "$obj" 2>/dev/null | grep -A1 'resident_kernelIdLb0ELi2ELi1ELb1ELi2E' | grep -oE 'REG:[0-9]+ STACK:[0-9]+' | sort -u
linalg_gpu_tests 'LinalgGpuResident.*:LinalgGpuSolvers.*:LinalgGpuFused.*' 150 | grep -E "PASSED|FAILED|Failure|Expected|Which|n=" | head -20
for rep in 1 2 3; do
  echo "== bicgstab per iteration, automatic, run $rep =="
  timeout 60 $B --bicgstab-only --max-n=2.1e5 --modes=resident --resident=0x0 2>&1 | bicgstab_rows
done
st bench
if [[ ${SWEEP:-1} != 0 ]]; then
  for rpt in 0 2 4; do
    echo "== grid rows per thread ${rpt/#0/automatic} =="
    MOLACCEL_LINALG_RESIDENT_GRID_RPT=$rpt timeout 60 $B --bicgstab-only --grids=150,224,260,317,367 --modes=resident --resident=0x0 2>&1 | bicgstab_rows
  done
fi
echo "== trace 1e4 =="
resident_trace 0x0 2e4 30 600
st done

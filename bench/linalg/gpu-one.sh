#!/usr/bin/env bash
# One grid barrier per iteration (BiCGStab form 4, resident_kernel_1), one call on an H100: build;
# registers and stack of the form-4 kernels; the GPU tests in $TESTS (default: the form's own test
# and the batch test); fp64 BiCGStab on Poisson per iteration on the sides $GRIDS, $REPEAT runs,
# with the automatic choice (one barrier on a grid for n > 2,048) beside the two-barrier form
# ("0x0+") and the former automatic choice up to 16,384 rows (a cluster with three barriers,
# "0x0ct"); form 4 at $SWEEP_RPT rows per thread (MOLACCEL_LINALG_RESIDENT_GRID_RPT; SWEEP=0
# skips); FUSED=1: the fused mode at 1e6 and 1e7; $SHAPES: other geometries on $SHAPE_GRIDS; the
# per-barrier trace at 1e4 and 1e5; DEMO=1: the CLI and the demo; then the tests in $TESTS2 if set.
#   bash bench/linalg/gpu-one.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
form4_start LinalgGpuResident.OneBarrierForm:LinalgGpuResident.BatchesAndCap 240
for rep in $(seq 1 "${REPEAT:-2}"); do
  echo "== bicgstab per iteration: automatic | two barriers | cluster, three barriers, run $rep =="
  timeout 90 $B --bicgstab-only --grids="${GRIDS:-100,150,224,317,367,447}" --modes=resident --resident=0x0,0x0+,0x0ct 2>&1 | bicgstab_rows
done
st bench
if [[ ${SWEEP:-1} != 0 ]]; then
  for rpt in ${SWEEP_RPT:-1 2}; do
    echo "== form 4, $rpt rows per thread =="
    MOLACCEL_LINALG_RESIDENT_GRID_RPT=$rpt timeout 60 $B --bicgstab-only --grids=${SWEEP_GRIDS:-150,224,260} --modes=resident --resident=0x0ai 2>&1 | bicgstab_rows
  done
fi
if [[ ${FUSED:-0} != 0 ]]; then
  echo "== fused mode at 1e6 and 1e7 (unchanged kernels; the wider sum slots) =="
  timeout 90 $B --bicgstab-only --min-n=9e5 --modes=fused 2>&1 | bicgstab_rows
fi
if [[ -n ${SHAPES:-} ]]; then
  echo "== other block sizes: $SHAPES =="
  timeout 60 $B --bicgstab-only --grids=${SHAPE_GRIDS:-100,150,224,317} --modes=resident --resident="$SHAPES" 2>&1 | bicgstab_rows
fi
echo "== trace 1e4, 1e5 (automatic) =="
resident_trace 0x0 1.1e5 40 700
form4_finish

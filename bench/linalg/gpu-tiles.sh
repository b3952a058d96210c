#!/usr/bin/env bash
# The one-barrier BiCGStab (form 4) with 2-D tiles of the grid against bands of rows, one call on
# an H100: build; registers and stack of the form-4 kernels; the GPU tests in $TESTS; fp64
# BiCGStab on Poisson per iteration on the sides $GRIDS, $REPEAT runs, tiles (automatic) and
# bands (MOLACCEL_LINALG_RESIDENT_TILES=1) alternately in the same job; tiles forced to each
# I x J of $SWEEP_TILES on the sides $SWEEP_GRIDS; the per-barrier trace at 1e4 and 1e5 of both;
# FUSED=1: the fused mode at 1e6 and 1e7; DEMO=1: the CLI and the demo.
#   bash bench/linalg/gpu-tiles.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
form4_start LinalgGpuResident.OneBarrierForm 300
for rep in $(seq 1 "${REPEAT:-2}"); do
  for mode in 2 1; do
    echo "== bicgstab per iteration, MOLACCEL_LINALG_RESIDENT_TILES=$mode (2 tiles, 1 bands), run $rep =="
    MOLACCEL_LINALG_RESIDENT_TILES=$mode timeout 90 $B --bicgstab-only --grids="${GRIDS:-32,100,150,224,317,447}" \
      --modes=resident --resident=0x0 2>&1 | bicgstab_rows
  done
done
st bench
for t in ${SWEEP_TILES:-}; do
  echo "== tiles $t =="
  MOLACCEL_LINALG_RESIDENT_TILES=$t timeout 60 $B --bicgstab-only --grids=${SWEEP_GRIDS:-100,317} --modes=resident \
    --resident=0x0 2>&1 | bicgstab_rows
done
if [[ ${TRACE:-1} != 0 ]]; then
  for mode in 2 1; do
    echo "== trace 1e4, 1e5, MOLACCEL_LINALG_RESIDENT_TILES=$mode =="
    MOLACCEL_LINALG_RESIDENT_TILES=$mode resident_trace 0x0 1.1e5 40 700
  done
fi
fused_rows
form4_finish

#!/usr/bin/env bash
# The one-barrier BiCGStab (form 4): the block sums and the barrier, one call on an H100: build;
# registers and stack of the form-4 kernels; the GPU tests in $TESTS; fp64 BiCGStab on Poisson
# per iteration on the sides $GRIDS, $REPEAT runs of each of the $VARIANTS in turn (each a
# comma list of settings NAME=V for MOLACCEL_LINALG_RESIDENT_NAME, e.g. SCATTER=0,RING=1), each with the bench
# geometries $RESIDENT side by side in one process (0x0a: the arrival counter, 0x0q: the counter
# whose last arrival does not poll); ITERATIONS: see below; TRACE=1: the per-barrier trace at 1e4 and 1e5 of each
# variant and geometry; FUSED=1: the fused mode at 1e6 and 1e7; DEMO=1: the CLI and the demo;
# $TESTS2: more GPU tests at the end.
#   bash bench/linalg/gpu-sums.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
form4_start LinalgGpuResident.OneBarrierForm 300
variants=${VARIANTS:-"SCATTER=1,CONSTANT=1,RING=1 SCATTER=1,CONSTANT=0,RING=1 SCATTER=1,CONSTANT=1,RING=0"}
# with_variant V COMMAND...: COMMAND (a program or a function) with the settings of variant V in
# its environment (a subshell).
with_variant() (
  for kv in ${1//,/ }; do export "MOLACCEL_LINALG_RESIDENT_$kv"; done
  shift
  "$@"
)
geometries=${RESIDENT:-0x0a,0x0q}
for rep in $(seq 1 "${REPEAT:-2}"); do
  for v in $variants; do
    echo "== bicgstab per iteration, $v, run $rep =="
    with_variant "$v" timeout 90 $B --bicgstab-only \
      --grids="${GRIDS:-32,100,150,224,317,447}" --modes=resident --resident="$geometries" 2>&1 | bicgstab_rows
  done
done
st bench
# ITERATIONS="100 400": the automatic geometry on $ITER_GRIDS with that many iterations per solve
# (the per-solve cost of the launch, the kernel's set-up and the records' copy spread over them).
for it in ${ITERATIONS:-}; do
  echo "== bicgstab per iteration, $it iterations per solve =="
  timeout 90 $B --bicgstab-only --grids="${ITER_GRIDS:-316,317}" --modes=resident --resident=0x0 --iterations="$it" 2>&1 |
    bicgstab_rows
done
if [[ ${TRACE:-1} != 0 ]]; then
  for v in $variants; do
    echo "== trace 1e4, 1e5, $v =="
    with_variant "$v" resident_trace "$geometries" 1.1e5 80 700
  done
fi
fused_rows
form4_finish

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
linalg_log log.txt
linalg_configure
linalg_build test_linalg_gpu bench_linalg ${DEMO:+molaccel_cli}
obj=$(find $b -name 'resident.cu.o' | head -1)
echo "== registers / stack: resident_kernel_1<double | float, rows per thread, diagonals> =="
cuobjdump -res-usage "$obj" 2>/dev/null | grep -A1 'resident_kernel_1' | grep -oE 'Function [^ ]+|REG:[0-9]+ STACK:[0-9]+' |
  sed -E 's/Function .*resident_kernel_1I([df])Li([124])ELi([0-9]+)E.*/\1 \2 rows \3 diagonals:/' | paste - - | sort -u
linalg_gpu_tests "${TESTS:-LinalgGpuResident.OneBarrierForm}" "${TEST_SECONDS:-300}"
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
if [[ ${FUSED:-0} != 0 ]]; then
  echo "== fused mode at 1e6 and 1e7 =="
  timeout 90 $B --bicgstab-only --min-n=9e5 --modes=fused 2>&1 | bicgstab_rows
fi
if [[ -n ${DEMO:-} ]]; then
  echo "== CLI and demo =="
  timeout 30 $b/bin/molaccel solve --poisson 100 --device gpu --solver bicgstab 2>&1 | tail -2
  timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab --precond jacobi 2>&1 | tail -2
  timeout 60 $b/bin/molaccel demo --only linalg --device gpu -o /tmp/demo 2>&1 | tail -4
fi
if [[ -n ${TESTS2:-} ]]; then linalg_gpu_tests "$TESTS2" "${TEST2_SECONDS:-300}"; fi
st done

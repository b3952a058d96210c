#!/usr/bin/env bash
# linalg fused BiCGStab, the matrix as CSR vs by diagonals, and the GPU verification in one call
# (< 5 min on an H100): build; fp64 BiCGStab per iteration at 1e6 and 1e7, graph and the fused
# variants in FUSED side by side in one process, REPS times (default 1; bench_linalg --fused=
# suffixes: r / d the matrix as CSR / by diagonals, c / a vector loads through L2 / L1; 0x0 =
# automatic); graph vs the resident geometries in RESIDENT at 1e3..2e5 (when set); the GPU tests in
# TESTS (with MOLACCEL_LINALG_FUSED_MATRIX=$TEST_MATRIX when set: the automatic choice forced),
# then those in TESTS2 (when set; with the environment assignment TESTS2_ENV, e.g.
# MOLACCEL_LINALG_RESIDENT_CLUSTER_FORM=3) in the time left before LIMIT seconds; the trace at 1e6 (unless
# FUSED_TRACE=-); the CLI. Whole log in $OUT/log.txt.
#   bash bench/linalg/gpu-dia.sh   (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg_gpu bench_linalg molaccel_cli
F="${FUSED:-0x0r,0x0d,0x0cr,0x0cd,0x0ar,0x0ad}"
for rep in $(seq 1 ${REPS:-1}); do
  echo "== bicgstab graph vs fused ($F), run $rep; floor = 320 B/row at the measured copy bandwidth =="
  timeout ${BENCH_TIMEOUT:-60} $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph,fused --fused=$F 2>&1 | bicgstab_rows; st fused
done
if [[ -n "${RESIDENT:-}" ]]; then
  echo "== bicgstab graph vs resident ($RESIDENT) =="
  timeout 40 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=$RESIDENT 2>&1 | bicgstab_rows; st resident
fi
if [[ -n "${TEST_MATRIX:-}" ]]; then export MOLACCEL_LINALG_FUSED_MATRIX=$TEST_MATRIX; echo "(MOLACCEL_LINALG_FUSED_MATRIX=$TEST_MATRIX)"; fi
linalg_gpu_tests "${TESTS:-LinalgGpuFused.*}" "${TEST_TIMEOUT:-120}"
unset MOLACCEL_LINALG_FUSED_MATRIX
if [[ -n "${TESTS2:-}" ]]; then
  left=$(( ${LIMIT:-285} - ($(date +%s) - t0) - 15 ))
  if (( left > 10 )); then
    [[ -n "${TESTS2_ENV:-}" ]] && echo "($TESTS2_ENV)"
    ( [[ -n "${TESTS2_ENV:-}" ]] && export "$TESTS2_ENV"; linalg_gpu_tests "$TESTS2" "$left" )
  else echo "(no time left for $TESTS2)"; fi
fi
T="${FUSED_TRACE:-0x0r,0x0d}"
if [[ "$T" != "-" ]]; then
  echo "== trace, fused at 1e6 ($T) =="
  fused_trace "$T"; st trace
fi
echo "== CLI =="
for args in "--solver bicgstab" "--solver bicgstab --precond jacobi"; do
  echo "-- poisson 1000 $args --launch auto"; timeout 10 $b/bin/molaccel solve --poisson 1000 --device gpu $args --tol 1e-6 --max-iter 8000 2>&1 | tail -2; done
st done

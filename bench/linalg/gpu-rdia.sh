#!/usr/bin/env bash
# linalg resident BiCGStab, the matrix as CSR vs by diagonals, with the GPU verification in one call
# (< 5 min on an H100): build; the kernels' registers / stack (spill) from the object file;
# fp64 BiCGStab per iteration at 1e3..2e5, graph and the resident variants in RESIDENT side by
# side in one process, REPS times (bench_linalg --resident= suffixes r / d: CSR / diagonals,
# - / t / +: four / three / two barriers; 0x0 = automatic); at 1e4 the cluster reading its own
# entries through distributed shared memory vs from shared memory (MOLACCEL_LINALG_RESIDENT_LOCAL=1); the
# per-barrier trace at 1e4 and 1e5 (TRACE); the GPU tests in TESTS (default: the new diagonal
# test) in the time left before LIMIT seconds, then those in TESTS2 (default: the other resident,
# solver and fused tests), with the tree's automatic choices, then TESTS3 with the environment
# assignment TESTS3_ENV (e.g. MOLACCEL_LINALG_RESIDENT_MATRIX=2). Whole log in $OUT/log.txt.
#   bash bench/linalg/gpu-rdia.sh   (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg_gpu bench_linalg
echo "== registers / stack (sm_90) =="
resident_usage() {
  export PATH="$PATH:/usr/local/cuda/bin"
  command -v cuobjdump >/dev/null || { echo "(no cuobjdump)"; return; }
  cuobjdump -res-usage "$1" 2>/dev/null |
    awk '/Function/ {f=$2; sub(/:$/, "", f)} /REG:/ {print f, $1, $2}' | c++filt |
    grep -E "resident_kernel_2<double|resident_kernel<double, false, [124], [01], true" |
    sed -E 's/molaccel::linalg::gpu::\(anonymous namespace\):://g; s/\(kernel_params<[a-z]+>\)//; s/void //; s/ +/ /g' | cut -c1-120
}
resident_usage $b/CMakeFiles/molaccel.dir/src/linalg/cuda/resident.cu.o
R="${RESIDENT:-0x0r,0x0d,0x0}"
for rep in $(seq 1 ${REPS:-2}); do
  echo "== bicgstab graph vs resident ($R), run $rep =="
  timeout 40 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=$R 2>&1 | bicgstab_rows; st resident
done
echo "== 1e4, cluster by diagonals: own entries through distributed shared memory (default) vs from shared memory (MOLACCEL_LINALG_RESIDENT_LOCAL=1) =="
timeout 20 $B --bicgstab-only --min-n=5e3 --max-n=1.1e4 --modes=resident --resident=0x0d 2>&1 | bicgstab_rows
MOLACCEL_LINALG_RESIDENT_LOCAL=1 timeout 20 $B --bicgstab-only --min-n=5e3 --max-n=1.1e4 --modes=resident --resident=0x0d 2>&1 | bicgstab_rows; st local
T="${TRACE:-0x0r,0x0d}"
echo "== trace at 1e4 and 1e5 ($T) =="
resident_trace "$T" 1.1e5 30 900
st trace
left=$(( ${LIMIT:-288} - ($(date +%s) - t0) - 5 ))
linalg_gpu_tests "${TESTS:-LinalgGpuResident.DiagonalsAgreeWithCsr}" "$left"
TESTS2="${TESTS2-LinalgGpuResident.*:LinalgGpuSolvers.*:LinalgGpuFused.*-LinalgGpuResident.DiagonalsAgreeWithCsr}"
if [[ -n "$TESTS2" ]]; then
  left=$(( ${LIMIT:-288} - ($(date +%s) - t0) - 5 ))
  if (( left > 10 )); then linalg_gpu_tests "$TESTS2" "$left"; else echo "(no time left for $TESTS2)"; fi
fi
if [[ -n "${TESTS3:-}" ]]; then
  left=$(( ${LIMIT:-288} - ($(date +%s) - t0) - 3 ))
  if (( left > 10 )); then
    echo "(${TESTS3_ENV:-})"
    ( [[ -n "${TESTS3_ENV:-}" ]] && export "$TESTS3_ENV"; linalg_gpu_tests "$TESTS3" "$left" )
  else echo "(no time left for $TESTS3)"; fi
fi
st done

#!/usr/bin/env bash
# linalg: the GPU verification and the numbers for docs/linalg.md in one call (< 5 min on an H100):
# build (with the ViennaCL baseline when .deps/linalg is carried); every linalg GPU test
# (test_linalg_gpu); fp64 BiCGStab per iteration, graph vs the resident geometries in RESIDENT at
# n = 1e3..2e5 and graph vs fused at 1e6 and 1e7 (bench_linalg, same process); the trace at 1e4;
# the demo; ViennaCL 1.7.1's BiCGStab (--quick: n <= 1e6). Whole log in $OUT/log.txt.
#   bash bench/linalg/gpu-final.sh   (from the repository root; run with carry [".deps"])
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
targets="test_linalg_gpu bench_linalg molaccel_cli"
grep -q "bench_linalg_viennacl" $b/build.ninja && targets="$targets bench_linalg_viennacl"
linalg_build $targets
linalg_gpu_tests "${TESTS:-Linalg*}" "${TEST_TIMEOUT:-110}"
R="${RESIDENT:-0x0,0x0Z,0x0A,50x512A,16x512c}"
echo "== bicgstab graph vs resident ($R) =="
timeout 50 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=$R 2>&1 | bicgstab_rows; st resident
echo "== bicgstab graph vs fused, floor = 320 B/row at the measured copy bandwidth =="
timeout 40 $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph,fused --fused=0x0 2>&1 | bicgstab_rows; st fused
echo "== trace at 1e4 =="
resident_trace 0x0,0x0Z 1.1e4 20 600
echo "== demo =="
timeout 40 $b/bin/molaccel demo --only linalg --device gpu -o /tmp/demo 2>&1 | tail -4; st demo
if [[ -x $b/bench/linalg/bench_linalg_viennacl ]]; then
  echo "== ViennaCL 1.7.1 =="; timeout 60 $b/bench/linalg/bench_linalg_viennacl --quick 2>&1 | grep -iE "bicgstab|n=" | sed -E 's/ +/ /g' | cut -c1-200
else echo "(no ViennaCL)"; fi
st done

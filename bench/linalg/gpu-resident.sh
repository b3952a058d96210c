#!/usr/bin/env bash
# linalg resident-mode check on a GPU machine (one call, ~4-5 min on an H100): build this engine
# (and the ViennaCL baseline when its headers are under .deps), the resident and solver GPU tests,
# fp64 BiCGStab on Poisson n = 1e3..1e7 per iteration: graph vs resident (automatic and the
# geometries in RESIDENT, default below) vs ViennaCL 1.7.1, then the CLI.
#   bash bench/linalg/gpu-resident.sh [all]   (from the repository root; `all`: every GPU test)
set -uo pipefail; b=build-gpu-linalg; t0=$(date +%s); st(){ echo "-- $(( $(date +%s)-t0 )) s $*"; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=linalg -DMOLACCEL_BUILD_FUZZ=OFF >/tmp/c.log 2>&1 || { tail -20 /tmp/c.log; exit 1; }
targets="test_linalg test_linalg_gpu bench_linalg molaccel_cli"
grep -q "bench_linalg_viennacl" $b/build.ninja && targets="$targets bench_linalg_viennacl"
cmake --build $b -j16 --target $targets >/tmp/b.log 2>&1 || { grep -E "error|Error" /tmp/b.log | head -30; tail -20 /tmp/b.log; exit 1; }; st built
filter="LinalgGpuResident*:LinalgGpuSolvers*:LinalgGpuOperations.MatrixTargets"
[[ "${1:-}" == "all" ]] && filter="*"
echo "== GPU tests ($filter) =="
timeout 200 $b/tests/linalg/test_linalg_gpu --gtest_filter="$filter" 2>&1 | grep -vE "^\[ +(RUN|OK) " | grep -E "PASSED|FAILED|Failure|Expected|Which is|actual|Value of|difference|evaluates to|vs |n=|^\[|error|what" | head -80; st tests
B=$b/bench/linalg/bench_linalg
R="${RESIDENT:-0x0,5x512c,16x512c,20x512a,0x512g,0x512o,99x512a,132x512a}"
echo "== bicgstab: graph vs resident ($R) =="
timeout 150 $B --bicgstab-only --max-n=1.1e7 --modes=graph,resident --resident=$R 2>&1 | grep bicgstab | sed -E 's/ +/ /g' | cut -c1-200; st bench
if [[ -x $b/bench/linalg/bench_linalg_viennacl ]]; then
  echo "== ViennaCL 1.7.1 =="; timeout 90 $b/bench/linalg/bench_linalg_viennacl 2>&1 | grep bicgstab | sed -E 's/ +/ /g' | cut -c1-160
else echo "(ViennaCL not built)"; fi; st viennacl
echo "== CLI =="
for m in resident graph; do timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab --launch $m 2>&1 | tail -2; done
timeout 30 $b/bin/molaccel solve data/linalg/1138_bus.mtx --device gpu --solver cg --precond jacobi --max-iter 20000 --launch resident 2>&1 | tail -2
st done

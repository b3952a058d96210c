#!/usr/bin/env bash
# linalg resident-mode check on a GPU machine (one call, ~4-5 min on an H100): build this engine
# (and the ViennaCL baseline when its headers are under .deps), the resident and solver GPU tests,
# fp64 BiCGStab on Poisson n = 1e3..1e7 per iteration: graph vs resident (automatic and the
# geometries in RESIDENT, default below) vs ViennaCL 1.7.1, then the CLI.
#   bash bench/linalg/gpu-resident.sh [all]   (from the repository root; `all`: every GPU test)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_configure
targets="test_linalg test_linalg_gpu bench_linalg molaccel_cli"
grep -q "bench_linalg_viennacl" $b/build.ninja && targets="$targets bench_linalg_viennacl"
linalg_build $targets
filter="LinalgGpuResident*:LinalgGpuSolvers*:LinalgGpuOperations.MatrixTargets"
[[ "${1:-}" == "all" ]] && filter="*"
linalg_gpu_tests "$filter" 200
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

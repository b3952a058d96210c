#!/usr/bin/env bash
# linalg verification run on a GPU machine (one call, ~4 min on an H100): build, every linalg GPU
# test with the default (automatic) choices, fp64 BiCGStab on Poisson per iteration with the
# automatic choices (graph beside it; resident up to 2e5 rows, fused above), EXTRA resident
# geometries side by side (default "50x512d": 4 rows per thread on 50 blocks, the matrix by
# diagonals), the CLI and the demo.
#   bash bench/linalg/gpu-verify.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg test_linalg_gpu bench_linalg molaccel_cli
echo "== GPU tests, defaults =="
ctest --test-dir $b -L gpu -R Linalg -j2 --output-on-failure --timeout 200 2>&1 |
  grep -E "tests passed|tests failed|\(Failed\)|Failure|Expected|Which is|actual|Value of" | head -40; st tests
echo "== bicgstab, automatic choices (and ${EXTRA-50x512d}) =="
timeout 60 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=0x0${EXTRA-,50x512d} 2>&1 | bicgstab_rows
timeout 40 $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph,fused --fused=0x0 2>&1 | bicgstab_rows; st bench
echo "== CLI =="
timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab 2>&1 | tail -2
timeout 30 $b/bin/molaccel solve --poisson 1000 --device gpu --solver bicgstab --tol 1e-6 --max-iter 8000 2>&1 | tail -2
timeout 30 $b/bin/molaccel solve data/linalg/1138_bus.mtx --device gpu --solver cg --precond jacobi --max-iter 20000 2>&1 | tail -2
timeout 60 $b/bin/molaccel demo --only linalg --device gpu -o /tmp/demo 2>&1 | tail -4; st done

#!/usr/bin/env bash
# linalg verification run on a GPU machine (one call, ~4 min on an H100): build, every linalg GPU
# test with the default (automatic) choices, fp64 BiCGStab on Poisson per iteration with the
# automatic choices (graph beside it; resident up to 2e5 rows, fused above; the resident rows
# REPEAT times, default 3), EXTRA resident geometries side by side (e.g. EXTRA=,99x512d: 2 rows
# per thread on 99 blocks at 1e5), the CLI and the demo.
#   bash bench/linalg/gpu-verify.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg test_linalg_gpu bench_linalg molaccel_cli
echo "== GPU tests, defaults =="
ctest --test-dir $b -L gpu -R Linalg -j2 --output-on-failure --timeout 200 2>&1 |
  grep -E "tests passed|tests failed|\(Failed\)|Failure|Expected|Which is|actual|Value of" | head -40; st tests
echo "== bicgstab, automatic choices${EXTRA:+ (and ${EXTRA#,})} =="
timeout 60 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=0x0${EXTRA:-} 2>&1 | bicgstab_rows
for ((rep = 2; rep <= ${REPEAT:-3}; ++rep)); do
  timeout 40 $B --bicgstab-only --max-n=2.1e5 --modes=resident --resident=0x0 2>&1 | bicgstab_rows
done
timeout 40 $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph,fused --fused=0x0 2>&1 | bicgstab_rows; st bench
echo "== CLI =="
timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab 2>&1 | tail -2
timeout 30 $b/bin/molaccel solve --poisson 1000 --device gpu --solver bicgstab --tol 1e-6 --max-iter 8000 2>&1 | tail -2
timeout 30 $b/bin/molaccel solve data/linalg/1138_bus.mtx --device gpu --solver cg --precond jacobi --max-iter 20000 2>&1 | tail -2
timeout 60 $b/bin/molaccel demo --only linalg --device gpu -o /tmp/demo 2>&1 | tail -4; st done

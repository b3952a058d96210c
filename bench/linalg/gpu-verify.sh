#!/usr/bin/env bash
# linalg verification run on a GPU machine (one call, ~100 s on an H100): build, every linalg GPU
# test with the default tuning, fp64 BiCGStab on Poisson n = 1e3..1e7 in all launch modes, the
# CSR group-size alternatives at n >= 1e6, the CLI and demo, and the BLAS-1/BLAS-2 rows.
#   bash bench/linalg/gpu-verify.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_configure
linalg_build test_linalg test_linalg_gpu bench_linalg molaccel_cli
echo "== GPU tests, defaults =="; ctest --test-dir $b -L gpu -R Linalg --output-on-failure --timeout 150 2>&1 | grep -E "Test +#|tests passed|Failure|Expected|Which is|actual|Value of|n=|vs " | head -60; st tests
echo "== bicgstab, defaults =="; timeout 90 $B --bicgstab-only --max-n=1.1e7 --modes=graph,stream,persistent 2>&1 | grep bicgstab | cut -c1-190; st bench
for cfg in "MOLACCEL_LINALG_CSR_GROUP=4" "MOLACCEL_LINALG_CSR_GROUP=1"; do echo "== graph: $cfg =="; env $cfg timeout 40 $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph 2>&1 | grep bicgstab | cut -c1-150; done; st variants
echo "== CLI =="; for m in graph persistent; do timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab --launch $m 2>&1 | tail -2; done
timeout 30 $b/bin/molaccel solve data/linalg/1138_bus.mtx --device gpu --solver cg --precond jacobi --max-iter 20000 2>&1 | tail -2
timeout 60 $b/bin/molaccel demo --only linalg --device gpu -o /tmp/demo 2>&1 | tail -4; st cli
echo "== BLAS =="; timeout 60 $B --quick --max-n=1 2>&1 | grep -E "copy-bandwidth|blas1-paper/fused|blas2" | cut -c1-150; st done

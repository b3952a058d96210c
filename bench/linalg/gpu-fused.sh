#!/usr/bin/env bash
# linalg fused mode (streaming two-barrier BiCGStab, launch_mode::fused) on a GPU machine in one
# call (< 9 min on an H100): build this engine's GPU tests, benchmark and CLI, run the fused GPU
# tests (and the resident and solver ones: the shared resident.cu), then fp64 BiCGStab on 2-D
# Poisson n = 1e5..1e7 per iteration, graph vs fused geometries in FUSED (bench_linalg --fused=:
# BLOCKSxTHREADS, 0x0 automatic, a trailing 1 / 2 after the thread count = registers for 1 / 2
# blocks of 512 per SM), side by side in one process, then the CLI.
# The whole log also goes to $OUT/linalg-fused.log when $OUT is set.
#   bash bench/linalg/gpu-fused.sh [gtest filter]   (from the repository root)
set -uo pipefail
log=${OUT:-/tmp}/linalg-fused.log
exec > >(tee "$log") 2>&1
source bench/linalg/gpu-common.sh
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
linalg_configure
linalg_build test_linalg_gpu bench_linalg molaccel_cli
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}  # one GPU: the benchmark's solves all run on the same one
linalg_gpu_tests "${1:-LinalgGpuFused*:LinalgGpuResident*:LinalgGpuSolvers*}" "${TEST_TIMEOUT:-240}"
F="${FUSED:-0x0,0x5121,0x256}"
echo "== bicgstab: graph vs fused ($F), floor = 320 B/row at the measured copy bandwidth =="
timeout ${BENCH_TIMEOUT:-200} $b/bench/linalg/bench_linalg --bicgstab-only --min-n=${MIN_N:-1e5} --max-n=${MAX_N:-1.1e7} --modes=graph,fused --fused=$F 2>&1 | grep bicgstab | sed -E 's/ +/ /g; s/linalg.bicgstab-poisson.fp64.//; s/ [0-9.]+ .B.s [0-9.]+% / /; s/gpu:[0-9] //' | cut -c1-220; st bench
echo "== CLI =="
for sv in bicgstab cg; do for m in fused graph; do echo "-- $sv $m"; timeout 60 $b/bin/molaccel solve --poisson 1000 --device gpu --solver $sv --tol 1e-6 --max-iter 8000 --launch $m 2>&1 | tail -2; done; done
timeout 30 $b/bin/molaccel solve data/linalg/ani4.mtx --device gpu --solver bicgstab --precond jacobi --max-iter 8000 --launch fused 2>&1 | tail -2
st done

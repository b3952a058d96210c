#!/usr/bin/env bash
# Round-5 verification on one H100: lingo + linalg built with the cuda preset, their GPU tests,
# linalg's BiCGStab per iteration (automatic choices), lingo's all-vs-all loop (new default, one
# launch; the fourth round's kernel and passes side by side) and the pinned pipelines.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/verify}"; mkdir -p "$out"
t0=$(date +%s); st() { echo "-- $(( $(date +%s) - t0 )) s $*"; }
scripts/gpu-check.sh --engines "lingo;linalg" --no-bench --no-cpu-tests --gpu-jobs 2 --test-timeout 240 2>&1 | tail -8
st tested
source bench/linalg/gpu-common.sh
B=build/cuda/bench/linalg/bench_linalg
echo "== linalg: fp64 BiCGStab on Poisson, per iteration, automatic choices =="
timeout 50 $B --bicgstab-only --max-n=2.1e5 --modes=graph,resident --resident=0x0 2>&1 | bicgstab_rows
timeout 40 $B --bicgstab-only --min-n=9e5 --max-n=1.1e7 --modes=graph,fused --fused=0x0 2>&1 | bicgstab_rows
st linalg
echo "== lingo: all-vs-all loops (default; sorted-hp and sorted-hp8l in the fourth round's 1 GiB passes) and pipelines =="
LINGO_VARIANTS=",sorted-hp@budget,sorted-hp8l@budget" timeout 150 build/cuda/bench/lingo/bench_lingo_allpairs --quick --gpu-only \
  >"$out/lingo-bench.txt" 2>"$out/lingo-timelines.txt"
grep -E '^lingo/' "$out/lingo-bench.txt" | awk '{$1=$1};1' | cut -c1-180
st lingo

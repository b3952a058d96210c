#!/usr/bin/env bash
# One GPU call for the lingo engine's tuning rounds: Release build, GPU tests (and the CPU piece
# tests), the all-pairs benchmark without the CPU rows (--gpu-only, or LINGO_BENCH_ARGS=""; kernel variants side by side
# from LINGO_VARIANTS, the page-locked pipeline with its per-pass timelines), then optionally
# (LINGO_PROFILE=1) Nsight Compute on one pass of a kernel variant and the SASS of the hashed
# kernels; LINGO_TEST_VARIANT="NAME ..." runs the GPU tests again with each as the default kernel
# (after the benchmark). LINGO_DEFAULT_TESTS=last runs the GPU tests with the default kernel after
# those (a variant that may become the default is tested first), =0 not at all.
# LINGO_SEARCH="default NAME ..." runs top-100 of all 367k x 367k (bench_lingo_search) with each
# kernel (default = the binary's default), after the all-pairs benchmark.
# MOLACCEL_LINGO_OCCUPANCY=1 prints the sorted kernels' resident blocks per SM (timelines.txt).
# Writes everything under ${OUT:-lingo-out}. Run from the repository root; carry
# .deps/lingo (molecules_367k.smi.gz).
set -uo pipefail
out="${OUT:-lingo-out}"
mkdir -p "$out"
build=build-gpu-lingo
start=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - start )) s)"; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=lingo \
  -DMOLACCEL_BUILD_FUZZ=OFF > "$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
cmake --build "$build" -j16 --target molaccel_cli test_lingo_cuda test_lingo_pieces bench_lingo_allpairs bench_lingo_search \
  > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
stamp built
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
status=0
"$build/tests/lingo/test_lingo_pieces" --gtest_brief=1 > "$out/pieces.log" 2>&1 || { status=1; tail -30 "$out/pieces.log"; }
tail -3 "$out/pieces.log"
default_tests() {
  ctest --test-dir "$build" -L gpu -R 'Lingo' --output-on-failure > "$out/gpu-tests.log" 2>&1 || { status=1; tail -60 "$out/gpu-tests.log"; }
  echo "with the default kernel:"; tail -4 "$out/gpu-tests.log"
  stamp tested
}
[[ "${LINGO_DEFAULT_TESTS:-first}" == first ]] && default_tests
"$build/bench/lingo/bench_lingo_allpairs" --quick ${LINGO_BENCH_ARGS---gpu-only} > "$out/bench.txt" 2> "$out/timelines.txt" || status=1
stamp benched
grep -E '^lingo/' "$out/bench.txt" | awk '{$1=$1};1' | cut -c1-200
grep -E 'lingo occupancy' "$out/timelines.txt" | head -1
grep -E 'lingo timeline: [0-9]+ passes|copy ceiling|lingo kernel timeline( of variant|: [0-9]+ passes|: host)|^lingo timeline: (fp32|pass)' "$out/timelines.txt" | head -${LINGO_TIMELINE_LINES:-60}
for v in ${LINGO_SEARCH:-}; do
  [[ "$v" == default ]] && unset MOLACCEL_LINGO_GPU_KERNEL || export MOLACCEL_LINGO_GPU_KERNEL="$v"
  "$build/bench/lingo/bench_lingo_search" --quick --queries 367393 > "$out/search-$v.txt" 2>&1 || status=1
  unset MOLACCEL_LINGO_GPU_KERNEL
  echo "search with $v: $(grep -E '^lingo/search-top100/cuda' "$out/search-$v.txt" | awk '{$1=$1};1' | cut -c1-160)"
  stamp "searched $v"
done
# The whole GPU suite again with each of LINGO_TEST_VARIANT (space-separated) as the default kernel
# (after the benchmark, so that a run cut short by its time limit still has the timings).
for v in ${LINGO_TEST_VARIANT:-}; do
  MOLACCEL_LINGO_GPU_KERNEL="$v" ctest --test-dir "$build" -L gpu -R 'Lingo' --output-on-failure \
    > "$out/gpu-tests-$v.log" 2>&1 || { status=1; tail -60 "$out/gpu-tests-$v.log"; }
  echo "with MOLACCEL_LINGO_GPU_KERNEL=$v:"; tail -4 "$out/gpu-tests-$v.log"
  stamp "tested $v"
done
[[ "${LINGO_DEFAULT_TESTS:-first}" == last ]] && default_tests
if [[ -n "${LINGO_PROFILE:-}" ]]; then
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  lib=$(find "$build" -name 'libmolaccel*.so*' | head -1); [[ -z "$lib" ]] && lib="$build/bench/lingo/bench_lingo_allpairs"
  # The SASS of the sorted-h family's 11-plane packed kernels only (the whole binary's is too large).
  cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
  [[ -n "$cuobjdump" ]] && "$cuobjdump" -sass "$lib" 2>/dev/null |
    awk '/Function :/ { keep = ($0 ~ /sorted_h_kernelILi11ELb1ELb0/) } keep' > "$out/sass.txt"
  for v in ${LINGO_PROFILE_VARIANTS:-default}; do
    [[ "$v" == default ]] && vv="" || vv="$v"
    stamp "ncu $v"
    LINGO_VARIANTS="$vv" timeout 90 "$ncu" --launch-skip 1 --launch-count 1 -k regex:hashed_similarity \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section SourceCounters \
      "$build/bench/lingo/bench_lingo_allpairs" --quick --kernel-only > "$out/ncu-$v.txt" 2>&1
    grep -E 'hashed_similarity|Duration|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occupancy|Executed Instructions  |Registers Per|Block Limit|Stall|L1/TEX Hit|Mem Busy|Max Bandwidth|Memory Throughput|Compute \(SM\)|Branch Instructions Ratio|Avg. Active Threads|Avg. Not Predicated' "$out/ncu-$v.txt" | cut -c1-150 | head -45
  done
fi
stamp done
exit $status

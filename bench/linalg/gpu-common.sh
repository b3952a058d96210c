# Sourced (from the repository root) by the linalg one-call GPU scripts (gpu-resident.sh,
# gpu-verify.sh, gpu-trace.sh, gpu-fused2.sh, gpu-final.sh): the engine-only Release build folder
# $b, the benchmark binary $B, the timer st, and the steps they share.
b=build-gpu-linalg; B=$b/bench/linalg/bench_linalg; t0=$(date +%s); st(){ echo "-- $(( $(date +%s)-t0 )) s $*"; }
# linalg_log FILE: everything printed from here on also goes to $OUT/FILE (/tmp/FILE without $OUT);
# names the GPU and its clocks first.
linalg_log() {
  exec > >(tee "${OUT:-/tmp}/$1") 2>&1
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | head -1
}
linalg_configure() {
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=linalg \
    -DMOLACCEL_BUILD_FUZZ=OFF >/tmp/c.log 2>&1 || { tail -20 /tmp/c.log; exit 1; }
}
# linalg_build TARGET...: configure if needed, build the targets; the errors and the log tail on
# failure. The benchmark's solves then all run on one GPU.
linalg_build() {
  [[ -f $b/build.ninja ]] || linalg_configure
  cmake --build $b -j16 --target "$@" >/tmp/b.log 2>&1 || { grep -E "error|Error" /tmp/b.log | head -30; tail -20 /tmp/b.log; exit 1; }
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  st built
}
# linalg_gpu_tests FILTER SECONDS: test_linalg_gpu on FILTER, failures and summary lines only.
linalg_gpu_tests() {
  echo "== GPU tests ($1) =="
  timeout "$2" $b/tests/linalg/test_linalg_gpu --gtest_filter="$1" 2>&1 | grep -vE "^\[ +RUN " |
    grep -E "PASSED|FAILED|Failure|Expected|Which is|actual|Value of|difference|evaluates to|vs |n=|^\[|error|what" | head -80
  st tests
}
# bicgstab_rows: bench_linalg's BiCGStab rows (stdin), failed geometries dropped, one short line each.
bicgstab_rows() {
  grep bicgstab | grep -v failed |
    sed -E 's/ +/ /g; s/linalg.bicgstab-poisson.fp64.//; s/ [0-9.]+ .B.s [0-9.]+% / /; s/, 1 kernels.iter, gpu:[0-9] (resident|fused) / /; s/gpu:[0-9] //; s/rows.thread/rpt/; s/barriers.iteration/bar/; s/, floor [0-9.]+ us//' |
    cut -c1-200
}

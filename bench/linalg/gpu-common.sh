# Sourced (from the repository root) by bench/linalg/gpu-resident.sh, gpu-resident2.sh, gpu-fused.sh
# and gpu-verify.sh: the engine-only Release build folder $b, the timer st, and the configure,
# build and GPU-test steps they share.
b=build-gpu-linalg; t0=$(date +%s); st(){ echo "-- $(( $(date +%s)-t0 )) s $*"; }
linalg_configure() {
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=linalg \
    -DMOLACCEL_BUILD_FUZZ=OFF >/tmp/c.log 2>&1 || { tail -20 /tmp/c.log; exit 1; }
}
# linalg_build TARGET...: configure if needed, build the targets; the errors and the log tail on failure.
linalg_build() {
  [[ -f $b/build.ninja ]] || linalg_configure
  cmake --build $b -j16 --target "$@" >/tmp/b.log 2>&1 || { grep -E "error|Error" /tmp/b.log | head -30; tail -20 /tmp/b.log; exit 1; }
  st built
}
# linalg_gpu_tests FILTER SECONDS: test_linalg_gpu on FILTER, failures and summary lines only.
linalg_gpu_tests() {
  echo "== GPU tests ($1) =="
  timeout "$2" $b/tests/linalg/test_linalg_gpu --gtest_filter="$1" 2>&1 | grep -vE "^\[ +RUN " |
    grep -E "PASSED|FAILED|Failure|Expected|Which is|actual|Value of|difference|evaluates to|vs |n=|^\[|error|what" | head -80
  st tests
}

# Sourced (from the repository root) by the linalg one-call GPU scripts (gpu-resident.sh,
# gpu-verify.sh, gpu-trace.sh, gpu-fused2.sh, gpu-dia.sh, gpu-rdia.sh, gpu-final.sh, gpu-split.sh,
# gpu-one.sh, gpu-stalls.sh, gpu-tiles.sh, gpu-sums.sh) and by
# scripts/gpu-verify-round.sh: the engine-only Release build folder $b, the benchmark binary $B,
# the timer st, and the steps they share.
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
    grep -E "PASSED|FAILED|Failure|Expected|Which is|actual|Value of|difference|evaluates to|vs |n=|^\[|error|what|exception" | head -80
  st tests
}
# bicgstab_rows: bench_linalg's BiCGStab rows (stdin), failed geometries dropped, one short line each.
bicgstab_rows() {
  grep bicgstab | grep -v failed |
    sed -E 's/ +/ /g; s/linalg.bicgstab-poisson.fp64.//; s/ [0-9.]+ .B.s [0-9.]+% / /; s/, 1 kernels.iter, gpu:[0-9] (resident|fused) / /; s/gpu:[0-9] //; s/rows.thread/rpt/; s/barriers.iteration/bar/; s/, floor [0-9.]+ us//' |
    cut -c1-200
}
# resident_trace VARIANTS MAX_N SECONDS WIDTH: the per-barrier trace
# (MOLACCEL_LINALG_RESIDENT_TRACE=1) of the resident variants from 5e3 up to MAX_N rows, the last
# of the bench's three repeats, lines cut at WIDTH.
resident_trace() {
  MOLACCEL_LINALG_RESIDENT_TRACE=1 timeout "$3" $B --bicgstab-only --min-n=5e3 --max-n="$2" --modes=resident --resident="$1" 2>&1 |
    grep -E "^trace" | sed -E 's/ +/ /g' | cut -c1-"$4" | awk 'NR%3==0'
}
# fused_trace VARIANTS: the per-barrier trace of the fused variants at 1e6, the second repeat.
fused_trace() {
  MOLACCEL_LINALG_RESIDENT_TRACE=1 timeout 25 $B --bicgstab-only --min-n=9e5 --max-n=1.1e6 --modes=fused --fused="$1" 2>&1 |
    grep -E "^trace" | sed -E 's/ +/ /g' | cut -c1-760 | awk -F: '{c[$1]++; if (c[$1]==2) print}'
}
# form4_registers: registers and stack of the one-barrier kernels (resident_kernel_1<double | float,
# rows per thread, diagonals unrolled>) from the built object.
form4_registers() {
  local obj
  obj=$(find $b -name 'resident.cu.o' | head -1)
  echo "== registers / stack: resident_kernel_1<double | float, rows per thread, diagonals> =="
  cuobjdump -res-usage "$obj" 2>/dev/null | grep -A1 'resident_kernel_1' | grep -oE 'Function [^ ]+|REG:[0-9]+ STACK:[0-9]+' |
    sed -E 's/Function .*resident_kernel_1I([df])Li([124])ELi([0-9]+)E.*/\1 \2 rows \3 diagonals:/' | paste - - | sort -u
}
# cli_and_demo: two CLI solves (the last lines: residuals and time per iteration) and the linalg demo.
cli_and_demo() {
  echo "== CLI and demo =="
  timeout 30 $b/bin/molaccel solve --poisson 100 --device gpu --solver bicgstab 2>&1 | tail -2
  timeout 30 $b/bin/molaccel solve --poisson 316 --device gpu --solver bicgstab --precond jacobi 2>&1 | tail -2
  timeout 60 $b/bin/molaccel demo --only linalg --device gpu -o /tmp/demo 2>&1 | tail -4
}
# form4_start DEFAULT_TESTS SECONDS: the opening steps of the form-4 scripts (gpu-one.sh,
# gpu-tiles.sh, gpu-sums.sh): the log, the build (with the CLI when DEMO is set), the form-4
# registers, the GPU tests in $TESTS (else DEFAULT_TESTS) within $TEST_SECONDS (else SECONDS).
form4_start() {
  linalg_log log.txt
  linalg_configure
  linalg_build test_linalg_gpu bench_linalg ${DEMO:+molaccel_cli}
  form4_registers
  linalg_gpu_tests "${TESTS:-$1}" "${TEST_SECONDS:-$2}"
}
# form4_finish: their closing steps: DEMO=1 the CLI and the demo, then the GPU tests in $TESTS2.
form4_finish() {
  if [[ -n ${DEMO:-} ]]; then cli_and_demo; fi
  if [[ -n ${TESTS2:-} ]]; then linalg_gpu_tests "$TESTS2" "${TEST2_SECONDS:-300}"; fi
  st done
}
# fused_rows: FUSED=1: the fused mode's BiCGStab rows at 1e6 and 1e7.
fused_rows() {
  if [[ ${FUSED:-0} != 0 ]]; then
    echo "== fused mode at 1e6 and 1e7 =="
    timeout 90 $B --bicgstab-only --min-n=9e5 --modes=fused 2>&1 | bicgstab_rows
  fi
}

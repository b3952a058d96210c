#!/usr/bin/env bash
# linalg on the GPU machine: build (Release, CUDA, this engine only), run the GPU tests, the
# benchmarks (the ViennaCL 1.7.1 baseline first, then molaccel when its headers are under
# .deps/linalg/root/usr/include) and print a short table last.
#   bench/linalg/gpu-run.sh [--quick]      (from the repository root)
set -uo pipefail
quick=""
if [[ "${1:-}" == "--quick" ]]; then quick="--quick"; fi
cd "$(dirname "$0")/../.."
build="${MOLACCEL_GPU_BUILD_DIR:-build-gpu-linalg}"
log=$(mktemp -d)/linalg
status=0

if [[ -z "${MOLACCEL_GPU_BUILD_DIR:-}" ]]; then  # scripts/gpu-check.sh builds everything once
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=linalg \
    -DMOLACCEL_BUILD_FUZZ=OFF > "$log.configure" 2>&1 || { cat "$log.configure"; exit 1; }
  cmake --build "$build" -j16 --target test_linalg test_linalg_gpu bench_linalg molaccel_cli > "$log.build" 2>&1 ||
    { tail -50 "$log.build"; exit 1; }
  if grep -q "bench_linalg_viennacl" "$build/build.ninja"; then
    cmake --build "$build" -j16 --target bench_linalg_viennacl > "$log.viennacl" 2>&1 ||
      { echo "(ViennaCL baseline failed to build)"; tail -20 "$log.viennacl"; }
  fi
fi

echo "== linalg GPU tests =="
ctest --test-dir "$build" -L gpu -R Linalg --output-on-failure --timeout 150 2>&1 | tail -40 || status=1

echo "== linalg CLI =="
for mode in persistent graph stream; do
  timeout 60 "$build/bin/molaccel" solve --poisson 316 --device gpu --solver bicgstab --launch $mode 2>&1 | tail -3 || status=1
done
timeout 60 "$build/bin/molaccel" solve data/linalg/1138_bus.mtx --device gpu --solver cg --precond jacobi --max-iter 20000 2>&1 || status=1

timeout 90 "$build/bin/molaccel" demo --only linalg --device gpu -o "$log.demo" 2>&1 | tail -5 || status=1

echo "== linalg benchmarks =="
export MOLACCEL_BENCH_JSON="$log.json"
if [[ -x "$build/bench/linalg/bench_linalg_viennacl" ]]; then
  timeout 120 "$build/bench/linalg/bench_linalg_viennacl" $quick 2>&1 | tee "$log.bench" || status=1
else
  echo "(ViennaCL not found: baseline skipped)"
fi
timeout 240 "$build/bench/linalg/bench_linalg" $quick 2>&1 | tee -a "$log.bench" || status=1

echo "== linalg summary (median per iteration / per call) =="
grep -E "bicgstab-poisson|blas1-paper/fused|blas2-paper|copy-bandwidth" "$log.bench" | sed 's/  */ /g' | cut -c1-200
exit $status

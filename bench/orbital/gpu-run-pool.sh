#!/usr/bin/env bash
# The chunk pool (default GPU tiling) against the previous fixed tiles on the GPUs of this machine:
# build, the orbital GPU and CPU tests, the one-launch density kernel (the floor of the library's
# density), then the 32-orbital batch and the density through the library with the chunk pool and
# with MOLACCEL_ORBITAL_TILING=tiles, interleaved twice, variants of the pool (chunks per grid,
# host drain), and one traced run of each tiling (MOLACCEL_ORBITAL_TRACE=1: per request the time
# since the previous one and its host preparation, per share/tile its device times).
# Usage (repository root): bench/orbital/gpu-run-pool.sh   (a few logs copied to $OUT when set)
set -uo pipefail
build="${MOLACCEL_GPU_BUILD_DIR:-build-gpu-orbital}"
log="$(mktemp -d)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=orbital \
  -DMOLACCEL_BUILD_FUZZ=OFF > "$log/configure.txt" 2>&1 || { tail -30 "$log/configure.txt"; exit 1; }
cmake --build "$build" -j16 --target molaccel_cli test_orbital_io test_orbital_reference test_orbital_cpu \
  test_orbital_jit_source test_orbital_cuda test_orbital_cli bench_orbital_c60 > "$log/build.txt" 2>&1 \
  || { grep -E "error" -A5 "$log/build.txt" | head -60; exit 1; }
grep -E "warning" "$log/build.txt" | head -10
ctest --test-dir "$build" -L gpu -R Orbital --output-on-failure > "$log/gpu-tests.txt" 2>&1
gpu_rc=$?
ctest --test-dir "$build" -L cpu -R Orbital -j8 --output-on-failure > "$log/cpu-tests.txt" 2>&1
cpu_rc=$?
grep -E "Failure|Expected|Which is|actual|FAILED|tests passed" -A3 "$log/gpu-tests.txt" | head -60
grep -E "tests passed|FAILED|Failed" "$log/cpu-tests.txt" | head -20
bench="$build/bench/orbital/bench_orbital_c60"
"$bench" --quick --density-kernel 2>&1 | grep -E "density|sparse" | cut -c1-150 | tee "$log/density-kernel.txt"
rows() { grep -E "^sparse basis|^per-orbital|^matrix, page|^density|identical" | cut -c1-150; }
for round in 1 2; do
  for tiling in tiles pool; do
    echo "== round $round, tiling $tiling"
    MOLACCEL_ORBITAL_TILING=$tiling "$bench" --quick --batch 32 2>&1 | tee "$log/batch-$tiling-$round.txt" | rows
  done
done
for v in "MOLACCEL_ORBITAL_CHUNKS=12" "MOLACCEL_ORBITAL_CHUNKS=48" "MOLACCEL_ORBITAL_DRAIN_PIECE_MIB=8" \
         "MOLACCEL_ORBITAL_DRAIN_THREADS=8 MOLACCEL_ORBITAL_DRAIN_PIECE_MIB=8"; do
  echo "== pool, $v"
  env $v "$bench" --quick --batch 32 2>&1 | rows
done
for tiling in tiles pool; do
  MOLACCEL_ORBITAL_TRACE=1 MOLACCEL_ORBITAL_TILING=$tiling "$bench" --quick --batch 32 > "$log/trace-$tiling.txt" 2>&1
  echo "== trace, tiling $tiling: requests (matrix ordinary x4, per-orbital JIT x4, page-locked x4, density x4)"
  grep -E "orbital trace request" "$log/trace-$tiling.txt" | sed 's/orbital trace request: //' | cut -c1-150
done
echo "-- pool: the last requests, per share:"
grep -E "orbital trace" "$log/trace-pool.txt" | tail -4 | cut -c1-200
[[ -n "${OUT:-}" ]] && cp "$log/gpu-tests.txt" "$log/trace-pool.txt" "$log/trace-tiles.txt" "$OUT/" 2>/dev/null
echo "gpu tests rc=$gpu_rc cpu tests rc=$cpu_rc"
grep -E "tests passed" "$log/gpu-tests.txt" "$log/cpu-tests.txt"
[[ $gpu_rc -eq 0 && $cpu_rc -eq 0 ]]

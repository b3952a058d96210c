#!/usr/bin/env bash
# One GPU, the align pipeline's chunk size against the size of a device's share: the 486k
# synthetic database and a quarter of it (one device's share on 4 GPUs), each with the automatic
# chunk size and 2, 8 and 16 M residues (MOLACCEL_ALIGN_CHUNK_RESIDUES), per-device trace lines.
# Run from the repository root on a GPU machine: bash bench/align/gpu-share.sh
set -uo pipefail
b=build-gpu-align
mkdir -p $b
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOLACCEL_CUDA=ON -DMOLACCEL_ENGINES=align -DMOLACCEL_BUILD_FUZZ=OFF >/dev/null 2>&1
cmake --build $b -j16 --target bench_align_search 2>&1 | tail -1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for n in 486000 121500; do
  for c in 0 2097152 8388608 16777216; do
    echo "== sequences $n chunk_residues $c"
    MOLACCEL_ALIGN_TRACE=1 MOLACCEL_ALIGN_CHUNK_RESIDUES=$c $b/bench/align/bench_align_search --gpu-only --repeats 3 --sequences $n 2>&1 | grep -E "^align/.*(compute only|upload)|align trace gpu" | tail -3 | cut -c1-200
  done
done

#!/usr/bin/env bash
# MPI on the GPU machine, which reaches no package registry.
#   scripts/mpi-gpu.sh fetch                  here: Open MPI's Debian packages into .deps/mpi (~14 MB)
#   scripts/mpi-gpu.sh check                  there: install them, build the cuda preset with MPI,
#                                             run the tests under mpirun (ctest -L mpi)
#   scripts/mpi-gpu.sh align QUERIES DBDIR    there: 1 rank x 1 GPU, 2 ranks x 1 GPU, 1 rank x 2 GPUs;
#   scripts/mpi-gpu.sh lingo QUERIES DB.smi   outputs compared byte for byte, times from --json
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/cuda
bin=$build/bin/molaccel
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun's, for root in containers
out="${OUT:-build/mpi-gpu}"
mkdir -p "$out"
what="${1:-}"
shift || true
case "$what" in
  fetch)
    # What Debian 12 adds for libopenmpi-dev and openmpi-bin on the project's base image.
    mkdir -p .deps/mpi
    (cd .deps/mpi && apt-get download libopenmpi-dev openmpi-bin openmpi-common libopenmpi3 libpmix2 libpmix-dev \
      libhwloc15 libhwloc-dev libhwloc-plugins libfabric1 libucx0 libpsm-infinipath1 libpsm2-2 librdmacm1 \
      libibverbs1 libibverbs-dev ibverbs-providers libnl-3-200 libnl-route-3-200 libnl-3-dev libnl-route-3-dev \
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-2.1-7 libevent-extra-2.1-7 libevent-openssl-2.1-7 \
      libevent-dev libmunge2 libxnvctrl0 ocl-icd-libopencl1 libnuma-dev libltdl7 libltdl-dev)
    du -sh .deps/mpi
    ;;
  check)
    if ! command -v mpirun >/dev/null 2>&1; then
      dpkg -i .deps/mpi/*.deb >"$out/dpkg.log" 2>&1 || { tail -20 "$out/dpkg.log"; exit 1; }
    fi
    export PATH="/usr/local/cuda/bin:$PATH"
    cmake --preset cuda -DMOLACCEL_MPI=ON -DMOLACCEL_BUILD_FUZZ=OFF >"$out/configure.log" 2>&1 ||
      { tail -20 "$out/configure.log"; exit 1; }
    cmake --build --preset cuda -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head; exit 1; }
    ctest --test-dir "$build" -L mpi --output-on-failure
    # One rank per GPU: which devices each rank took (the report's kernel names the GPU).
    gpus=$(nvidia-smi -L | wc -l)
    mpirun --oversubscribe -np "$gpus" "$bin" -v align search data/align/demo_queries.fasta \
      data/align/demo_db.fasta -k 3 -o "$out/demo_hits.tsv" 2>&1 | grep -i -E "gpu|cuda|rank" | head -20
    ;;
  align | lingo)
    queries=$1 db=$2
    run() {  # name ranks CUDA_VISIBLE_DEVICES molaccel-args...
      local name=$1 n=$2 devices=$3
      shift 3
      CUDA_VISIBLE_DEVICES=$devices mpirun --oversubscribe -np "$n" -x CUDA_VISIBLE_DEVICES "$bin" -q \
        --json "$out/$name.json" "$@" -o "$out/$name.tsv"
      if command -v jq >/dev/null 2>&1; then
        echo "$name: $(jq -c '{total_seconds, seconds, job_seconds, scoring_seconds_by_rank, merge}' "$out/$name.json")"
      else
        echo "$name:" && cat "$out/$name.json"
      fi
    }
    if [ "$what" = align ]; then args=(align search "$queries" "$db" -k 10); else args=(lingo search "$queries" "$db" -k 100); fi
    run "${what}_1rank_1gpu" 1 0 "${args[@]}"
    run "${what}_2ranks_1gpu_each" 2 0,1 "${args[@]}"
    run "${what}_1rank_2gpus" 1 0,1 "${args[@]}"
    cmp "$out/${what}_1rank_1gpu.tsv" "$out/${what}_2ranks_1gpu_each.tsv" &&
      cmp "$out/${what}_1rank_1gpu.tsv" "$out/${what}_1rank_2gpus.tsv" && echo "outputs identical"
    ;;
  *) sed -n '2,7p' "$0" >&2; exit 2 ;;
esac

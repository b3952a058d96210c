#!/usr/bin/env bash
# MPI on the GPU machine, which reaches no package registry.
#   scripts/mpi-gpu.sh fetch                  here: Open MPI's Debian packages into .deps/mpi (~14 MB)
#   scripts/mpi-gpu.sh check                  there: install them, build the cuda preset with MPI,
#                                             run the tests under mpirun (ctest -L mpi)
#   scripts/mpi-gpu.sh build                  there: only the build (TARGETS="molaccel_cli bench_exchange"
#                                             builds those alone: enough for `bench` and the mpi tests)
#   scripts/mpi-gpu.sh align QUERIES DBDIR    there: 1 rank x 1 GPU, 2 ranks x 1 GPU, 1 rank x 2 GPUs;
#   scripts/mpi-gpu.sh lingo QUERIES DB.smi   outputs compared byte for byte, times from --json
#   scripts/mpi-gpu.sh bench DBDIR SMILES [BUILD]
#       there (2 GPUs): the issue's measurements in one command: align data/align/queries20.fasta
#       against the makedb directory DBDIR (top 10) and lingo search SMILES against itself (top 100),
#       each as 1 rank x 1 GPU, 2 ranks x 1 GPU (one GPU per rank, by local rank) and 1 rank x 2
#       GPUs; a table of search phase and whole command (from --json), their ratios against the
#       targets, the merge's ms and bytes per rank; outputs compared byte for byte. First, the
#       transport's bandwidth between two ranks (bench/runtime/bench_exchange). BUILD: the build
#       directory; by default build/cuda, which it builds with MPI first as `check` does (a CPU
#       build passed as BUILD runs the same table on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/cuda
bin=$build/bin/molaccel
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun's, for root in containers
out="${OUT:-build/mpi-gpu}"
mkdir -p "$out"
what="${1:-}"
shift || true
# Open MPI from .deps/mpi where mpirun is missing, then the cuda preset built with MPI.
build_with_mpi() {
  if ! command -v mpirun >/dev/null 2>&1; then
    dpkg -i .deps/mpi/*.deb >"$out/dpkg.log" 2>&1 || { tail -20 "$out/dpkg.log"; exit 1; }
  fi
  export PATH="/usr/local/cuda/bin:$PATH"
  cmake --preset cuda -DMOLACCEL_MPI=ON -DMOLACCEL_BUILD_FUZZ=OFF >"$out/configure.log" 2>&1 ||
    { tail -20 "$out/configure.log"; exit 1; }
  local targets=()
  [ -n "${TARGETS:-}" ] && read -r -a targets <<<"--target $TARGETS"
  cmake --build --preset cuda -j"$(nproc)" "${targets[@]}" >"$out/build.log" 2>&1 ||
    { grep -E "error" "$out/build.log" | head; exit 1; }
}
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
  build) build_with_mpi ;;
  check)
    build_with_mpi
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
      # --bind-to none as in bench: mpirun's default binding slows the ranks' host work (lingo's
      # formatting took 1.56-1.60 s with it on a 2 x H200 host against 0.78-0.87 s without).
      CUDA_VISIBLE_DEVICES=$devices mpirun --oversubscribe --bind-to none -np "$n" -x CUDA_VISIBLE_DEVICES "$bin" -q \
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
  bench)
    [ $# -ge 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
    dbdir=$1 smiles=$2 bin=${3:-$build}/bin/molaccel
    [ $# -ge 3 ] || build_with_mpi  # the default: the cuda preset, built (or brought up to date) here
    launcher=(mpirun --oversubscribe --bind-to none)  # ranks share the host's cores, not one each
    [ "$(id -u)" -eq 0 ] && launcher+=(--allow-run-as-root)
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l || true)
    echo "GPUs: ${gpus:-0}; $("${launcher[@]}" --version | head -1)"
    # What the transport between two ranks gives (the merges' exchanges), beside a memcpy.
    exchange=$(dirname "$(dirname "$bin")")/bench/runtime/bench_exchange
    [ -x "$exchange" ] && "${launcher[@]}" -np 2 "$exchange" | sed -n '/ring shift\|to rank 0\|memcpy/p' | cut -c1-90
    device=()  # on GPUs, never a silent fallback to the CPU
    [ "${gpus:-0}" -gt 0 ] && device=(--device gpu)
    # name ranks devices molaccel-args...: one run under mpirun, its report in $out/NAME.json.
    bench_run() {
      local name=$1 n=$2 devices=$3
      shift 3
      CUDA_VISIBLE_DEVICES=$devices "${launcher[@]}" -np "$n" -x CUDA_VISIBLE_DEVICES "$bin" -q \
        --json "$out/$name.json" "$@" "${device[@]}" -o "$out/$name.tsv" || { echo "$name failed" >&2; exit 1; }
    }
    for engine in align lingo; do
      if [ $engine = align ]; then
        args=(align search data/align/queries20.fasta "$dbdir" -k 10)
      else
        args=(lingo search "$smiles" "$smiles" -k 100)
      fi
      bench_run "${engine}_1x1" 1 0 "${args[@]}"
      bench_run "${engine}_2x1" 2 0,1 "${args[@]}"
      bench_run "${engine}_1x2" 1 0,1 "${args[@]}"
      same=yes
      for run in 2x1 1x2; do
        cmp -s "$out/${engine}_1x1.tsv" "$out/${engine}_$run.tsv" ||
          { same=no; echo "$engine $run: OUTPUT DIFFERS from 1 rank x 1 GPU"; }
      done
      [ $same = yes ] && echo "$engine: the three outputs are identical"
    done
    python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def phases(engine, run):
    r = json.load(open(f"{out}/{engine}_{run}.json"))
    if engine == "align":  # scoring, the slowest rank's when there are several
        search = max(r["scoring_seconds_by_rank"]) if "scoring_seconds_by_rank" in r else r["scoring_seconds"]
        device = r.get("kernel", "")
    else:  # the search call (with the ring's exchanges across ranks)
        search, device = r["seconds"], r.get("backend", "")
    return search, r["total_seconds"], device, r.get("merge")
print(f"{'':22}{'search s':>10}{'whole s':>10}  device (rank 0)")
for engine in ("align", "lingo"):
    t = {run: phases(engine, run) for run in ("1x1", "2x1", "1x2")}
    for run, label in (("1x1", "1 rank x 1 GPU"), ("2x1", "2 ranks x 1 GPU"), ("1x2", "1 rank x 2 GPUs")):
        print(f"{engine + ' ' + label:22}{t[run][0]:10.3f}{t[run][1]:10.3f}  {t[run][2]}")
    s1, w1 = t["1x1"][0], t["1x1"][1]
    s2, w2 = t["2x1"][0], t["2x1"][1]
    sp, wp = t["1x2"][0], t["1x2"][1]
    ok = lambda c: "ok" if c else "MISSED"
    print(f"  2 ranks / 1 rank:  search {s1 / s2:.2f}x (target >= 1.9: {ok(s1 / s2 >= 1.9)}), "
          f"whole {w1 / w2:.2f}x (target >= 1.7: {ok(w1 / w2 >= 1.7)})")
    print(f"  2 ranks vs 1 rank x 2 GPUs: search {s2 / sp - 1:+.1%}, whole {w2 / wp - 1:+.1%} "
          f"(target within 5%: {ok(s2 <= sp * 1.05 and w2 <= wp * 1.05)})")
    merge = t["2x1"][3] or {}
    ranks = merge.get("by_rank") or [merge]
    for i, m in enumerate(ranks):
        print(f"  merge rank {i}: {1e3 * m.get('seconds', 0):.1f} ms, {m.get('bytes_sent', 0)} bytes sent, "
              f"{m.get('bytes_received', 0)} received")
PY
    ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac

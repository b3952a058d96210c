#!/usr/bin/env bash
# Scaling over 1, 2, 4 and 8 GPUs of one host. Each run sees a subset of the GPUs through
# CUDA_VISIBLE_DEVICES and asks molaccel for all of them (--device gpu), so the tile scheduler
# spreads the same job over 1, 2, 4 or 8 devices in one process; with Open MPI the same jobs also
# run as one rank per GPU (each rank takes the GPU of its local rank). Outputs are compared byte
# for byte across every count. Also runs the GPU tests with every GPU visible, which exercises the
# multi-GPU tile paths. Run on a multi-GPU machine from the repository root.
#   scripts/multi-gpu-scaling.sh [--db FASTA] [--only align|lingo|orbital|tests]...
#                                [--tuning ENGINE:k=v]... [--test-jobs N]
# --db adds the align runs on a real database (a FASTA file, e.g. the 486k UniProt-derived one of
# ../shared/data/README.md) beside the synthetic one; --only limits the parts that run (default:
# all); --tuning adds runs of that engine's benchmark with the setting, beside the default (align:
# long_threshold=N, chunk_residues=N); --test-jobs runs N GPU tests at once at the end (default 1).
set -uo pipefail
cd "$(dirname "$0")/.."
tunings=()
test_jobs=1
real_db=""
parts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --db) real_db="$2"; shift 2 ;;
    --only) parts+=("$2"); shift 2 ;;
    --tuning) tunings+=("$2"); shift 2 ;;
    --test-jobs) test_jobs="$2"; shift 2 ;;
    *) sed -n '2,14p' "$0" >&2; exit 2 ;;
  esac
done
build=build/cuda
out="${OUT:-build/scaling}"   # logs
work="${TMPDIR:-/tmp}/molaccel-scaling"   # large inputs and outputs
mkdir -p "$out" "$work"
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }
wants() { [ ${#parts[@]} -eq 0 ] || [[ " ${parts[*]} " == *" $1 "* ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun's, for root in containers
cmake --preset cuda -DMOLACCEL_BUILD_FUZZ=OFF -DMOLACCEL_MPI=AUTO >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
cmake --build --preset cuda -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head; exit 1; }
gpus=$(nvidia-smi -L | wc -l)
echo "GPUs: $gpus x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
sets=("0")
[ "$gpus" -ge 2 ] && sets+=("0,1")
[ "$gpus" -ge 4 ] && sets+=("0,1,2,3")
[ "$gpus" -ge 8 ] && sets+=("0,1,2,3,4,5,6,7")
mpi=""
command -v mpirun >/dev/null 2>&1 && grep -q "molaccel: MPI ON" "$out/configure.log" && mpi=yes
count() { local IFS=,; set -- $1; echo $#; }

# run_scaled ENGINE LABEL JSON_KEY COMMAND...: the command on every GPU set, in one process
# (--device gpu) and, with MPI, as one rank per GPU; whole-command seconds, the compute phase from
# the --json report (JSON_KEY), speed-up over one GPU, and a byte comparison of every output.
run_scaled() {
  local engine=$1 label=$2 key=$3
  shift 3
  local base="" jbase="" first=""
  for mode in process mpi; do
    [ "$mode" = mpi ] && [ -z "$mpi" ] && { echo "$engine $label: no MPI in this build, rank runs skipped"; continue; }
    for s in "${sets[@]}"; do
      local n name t j launcher=()
      n=$(count "$s")
      name="$engine-$label-$mode-$n"
      [ "$mode" = mpi ] && launcher=(mpirun --oversubscribe --bind-to none -np "$n" -x CUDA_VISIBLE_DEVICES)
      t0=$(date +%s.%N)
      CUDA_VISIBLE_DEVICES=$s "${launcher[@]}" $build/bin/molaccel -q "$@" --device gpu \
        -o "$work/$name.out" --json "$out/$name.json" || echo "$name failed"
      t=$(calc "$(date +%s.%N) - $t0")
      j=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$out/$name.json" "$key" 2>/dev/null || echo 0)
      [ -z "$base" ] && base=$t && jbase=$j && first="$work/$name.out"
      printf '%-6s %-10s %-7s %4s GPUs %8.2f s %6.2fx   %s %.3f s (%.2fx)\n' "$engine" "$label" "$mode" "$n" "$t" \
        "$(calc "$base / $t")" "$key" "$j" "$(calc "$jbase / ($j + 1e-9)")"
      cmp -s "$first" "$work/$name.out" || echo "$name: OUTPUT DIFFERS from 1 GPU in one process"
      # Rank runs: each rank's scoring (align), the merge's cost and the stages (rank 0's report).
      [ "$mode" = mpi ] && python3 -c "import json,sys; r = json.load(open(sys.argv[1])); print('   ', json.dumps({k: r[k] for k in ('scoring_seconds_by_rank', 'merge', 'stages') if k in r}))" "$out/$name.json" 2>/dev/null
    done
  done
}

# align: the 20 queries against a synthetic database with db5k's length distribution (486k
# sequences, ~178 M residues, fixed seed) and, with --db, the real database, searched from a makedb
# directory, scores only.
if wants align; then
python3 bench/align/make_synthetic_db.py "$work/synthetic486k.fasta"
$build/bin/molaccel -q align makedb "$work/synthetic486k.fasta" -o "$work/synthdb" >/dev/null || exit 1
echo
run_scaled align synthetic scoring_seconds align search data/align/queries20.fasta "$work/synthdb" --no-traceback -k 10
if [ -n "$real_db" ]; then
  $build/bin/molaccel -q align makedb "$real_db" -o "$work/realdb" >/dev/null || exit 1
  run_scaled align real scoring_seconds align search data/align/queries20.fasta "$work/realdb" --no-traceback -k 10
  run_scaled align real-tb scoring_seconds align search data/align/queries20.fasta "$work/realdb" -k 10
fi
fi

# align, the GPU part alone: bench_align_search times the same search with 1..N devices (compute
# + upload + layout, in-memory database; and with loading from a makedb directory).
# MOLACCEL_TRACE=align adds, per device and search, where its time goes (set-up, short-subject
# chunks, long subjects, rescoring) to the log.
if wants align; then
MOLACCEL_TRACE=align $build/bench/align/bench_align_search --gpu-only --repeats 3 --max-gpus "$gpus" \
  >"$out/align-bench.log" 2>"$out/align-trace.log"
grep -E "^align/|GPUs|gpus" "$out/align-bench.log" || echo "bench_align_search failed"
for t in "${tunings[@]}"; do
  [[ "$t" == align:* ]] || continue
  echo "align, --tuning ${t#align:}:"
  $build/bench/align/bench_align_search --gpu-only --repeats 3 --max-gpus "$gpus" --tuning "${t#align:}" 2>&1 \
    | grep -E "^align/" | grep -v loading | cut -c1-110
done
echo "align trace, last search per GPU count (ms from the tile's start):"
grep "trace align" "$out/align-trace.log" \
  | awk '{ buf = buf $0 "\n" } /tiles,/ { last[$4] = buf; buf = "" } END { for (k = 1; k in last; ++k) printf "%s", last[k] }'
fi

# orbital: a batch of 32 orbitals of C60 6-31G* (172^3 grid each) on 1..N GPUs, results in host
# memory, checked bitwise identical across GPU counts.
if wants orbital; then
$build/bench/orbital/bench_orbital_c60 --quick --batch 32 2>&1 | tee "$out/orbital-batch.log" \
  | grep -E "^batch|^path|^sparse basis|^per-orbital|^matrix, page|^density|identical|GPUs" || echo "orbital batch failed"

# The host link: device-to-host and host-to-device copies from 1..N GPUs at once into one
# page-locked buffer (the ceiling of any multi-GPU result that must land in host memory).
$build/bench/runtime/bench_runtime 2>&1 | grep -E "aggregate" || echo "bench_runtime failed"
fi

# lingo: top-100 of the 367k set against itself. Whole command (reading, encoding, the TSV of
# 36.7 M hits) and the search phase alone (the tiles over the GPUs, from the --json report). The
# set is decompressed first: ranks parse slices of a plain .smi file (a .gz is read whole by each).
data=.deps/lingo/molecules_367k.smi.gz
if wants lingo && [ -f "$data" ]; then
  gzip -dc "$data" >"$work/molecules_367k.smi"
  run_scaled lingo 367k-top100 job_seconds lingo search "$work/molecules_367k.smi" "$work/molecules_367k.smi" -k 100
fi

# Last, so that the numbers above come back even if time runs out: every GPU test with all GPUs
# visible (the multi-GPU tile paths).
wants tests || exit 0
ctest --test-dir $build -L gpu -j"$test_jobs" --timeout 400 >"$out/ctest-gpu-all-visible.log" 2>&1
echo "GPU tests with all $gpus GPUs visible: $(grep -E 'tests passed|tests failed' "$out/ctest-gpu-all-visible.log")"
grep -E "\(Failed\)" "$out/ctest-gpu-all-visible.log" | head


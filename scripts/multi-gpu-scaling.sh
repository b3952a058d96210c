#!/usr/bin/env bash
# Scaling over 1, 2 and 4 GPUs of one host. Each run sees a subset of the GPUs through
# CUDA_VISIBLE_DEVICES and asks molaccel for all of them (--device gpu), so the tile scheduler
# spreads the same job over 1, 2 or 4 devices. Also runs the GPU tests with every GPU visible,
# which exercises the multi-GPU tile paths. Run on a multi-GPU machine from the repository root.
#   scripts/multi-gpu-scaling.sh
#   scripts/multi-gpu-scaling.sh [--tuning ENGINE:k=v]... [--test-jobs N]
# --tuning adds runs of that engine's benchmark with the setting, beside the default (align:
# long_threshold=N, chunk_residues=N); --test-jobs runs N GPU tests at once at the end (default 1).
set -uo pipefail
cd "$(dirname "$0")/.."
tunings=()
test_jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tuning) tunings+=("$2"); shift 2 ;;
    --test-jobs) test_jobs="$2"; shift 2 ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
build=build/cuda
out="${OUT:-build/scaling}"   # logs
work="${TMPDIR:-/tmp}/molaccel-scaling"   # large inputs and outputs
mkdir -p "$out" "$work"
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }
cmake --preset cuda -DMOLACCEL_BUILD_FUZZ=OFF >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
cmake --build --preset cuda -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head; exit 1; }
gpus=$(nvidia-smi -L | wc -l)
echo "GPUs: $gpus x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
sets=("0")
[ "$gpus" -ge 2 ] && sets+=("0,1")
[ "$gpus" -ge 4 ] && sets+=("0,1,2,3")

# align: the 20 queries against a synthetic database with db5k's length distribution (486k
# sequences, ~178 M residues, fixed seed), searched from a makedb directory, scores only.
python3 - "$work/synthetic486k.fasta" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(2010)
lengths = np.array([int(l) for l in open("bench/align/db5k_lengths.txt") if l.strip() and not l.startswith("#")])
n = 486000
picked = rng.choice(lengths, size=n)
aa = np.frombuffer(b"ARNDCQEGHILKMFPSTWYV", dtype=np.uint8)
freq = np.array([8.25,5.53,4.06,5.45,1.37,3.93,6.75,7.07,2.27,5.96,9.66,5.84,2.42,3.86,4.70,6.56,5.34,1.08,2.92,6.87])
seq = aa[rng.choice(20, size=int(picked.sum()), p=freq / freq.sum())].tobytes()
with open(sys.argv[1], "wb") as f:
    pos = 0
    for i, l in enumerate(picked):
        f.write(b">s%d\n" % i); f.write(seq[pos:pos + l]); f.write(b"\n"); pos += l
print(f"synthetic database: {n} sequences, {picked.sum() / 1e6:.1f} M residues")
PY
$build/bin/molaccel -q align makedb "$work/synthetic486k.fasta" -o "$work/synthdb" >/dev/null || exit 1
residues=$(grep -v '^>' "$work/synthetic486k.fasta" | tr -d '\n' | wc -c)
qlen=$(grep -v '^>' data/align/queries20.fasta | tr -d '\n' | wc -c)
echo
printf '%-8s %-12s %10s %12s %8s\n' engine gpus seconds rate speedup
base=""
for s in "${sets[@]}"; do
  t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$s $build/bin/molaccel -q align search data/align/queries20.fasta "$work/synthdb" \
    --device gpu --no-traceback -k 10 -o "$work/hits-$s.tsv" --json "$out/align-$s.json" || echo "align search failed on $s"
  t=$(calc "$(date +%s.%N) - $t0")
  [ -z "$base" ] && base=$t
  # total_seconds: loading + scoring + output, after the devices are set up; the rest of the
  # process time is start-up (CUDA contexts, device queries) and exit.
  js=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('scoring %.2f s, after set-up %.2f s' % (r['scoring_seconds'], r['total_seconds']))" "$out/align-$s.json" 2>/dev/null)
  printf '%-8s %-12s %10.2f %9.2f TCUPS %7.2fx   %s\n' align "$s" "$t" "$(calc "$qlen * $residues / $t / 1e12")" "$(calc "$base / $t")" "$js"
done
cmp -s "$work/hits-0.tsv" "$work/hits-${sets[-1]}.tsv" && echo "align: hits identical on 1 and ${#sets[@]} GPU sets" || echo "align: HITS DIFFER between GPU counts"

# align, the GPU part alone: bench_align_search times the same search with 1..N devices (compute
# + upload + layout, in-memory database; and with loading from a makedb directory).
# MOLACCEL_TRACE=align adds, per device and search, where its time goes (set-up, short-subject
# chunks, long subjects, rescoring) to the log.
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

# orbital: a batch of 32 orbitals of C60 6-31G* (172^3 grid each) on 1..N GPUs, results in host
# memory, checked bitwise identical across GPU counts.
$build/bench/orbital/bench_orbital_c60 --quick --batch 32 2>&1 | tee "$out/orbital-batch.log" \
  | grep -E "^batch|^path|^sparse basis|^per-orbital|^matrix, page|^density|identical|GPUs" || echo "orbital batch failed"

# The host link: device-to-host and host-to-device copies from 1..N GPUs at once into one
# page-locked buffer (the ceiling of any multi-GPU result that must land in host memory).
$build/bench/runtime/bench_runtime 2>&1 | grep -E "aggregate" || echo "bench_runtime failed"

# lingo: top-100 of the 367k set against itself. Whole command (reading, encoding, the TSV of
# 36.7 M hits) and the search phase alone (the tiles over the GPUs, from the --json report).
data=.deps/lingo/molecules_367k.smi.gz
if [ -f "$data" ]; then
  base=""; jbase=""
  for s in "${sets[@]}"; do
    t0=$(date +%s.%N)
    CUDA_VISIBLE_DEVICES=$s $build/bin/molaccel -q lingo search "$data" "$data" -k 100 --device gpu -o "$work/lingo-$s.tsv" \
      --json "$out/lingo-$s.json" || echo "lingo search failed on $s"
    t=$(calc "$(date +%s.%N) - $t0")
    j=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['job_seconds'])" "$out/lingo-$s.json" 2>/dev/null || echo 0)
    [ -z "$base" ] && base=$t && jbase=$j
    printf '%-8s %-12s %10.2f %12s %7.2fx   search phase %.2f s (%.2fx)\n' lingo "$s" "$t" "367k^2 top100" \
      "$(calc "$base / $t")" "$j" "$(calc "$jbase / ($j + 1e-9)")"
  done
  cmp -s "$work/lingo-0.tsv" "$work/lingo-${sets[-1]}.tsv" && echo "lingo: hits identical on 1 and ${#sets[@]} GPU sets" || echo "lingo: HITS DIFFER between GPU counts"
fi

# Last, so that the numbers above come back even if time runs out: every GPU test with all GPUs
# visible (the multi-GPU tile paths).
ctest --test-dir $build -L gpu -j"$test_jobs" --timeout 400 >"$out/ctest-gpu-all-visible.log" 2>&1
echo "GPU tests with all $gpus GPUs visible: $(grep -E 'tests passed|tests failed' "$out/ctest-gpu-all-visible.log")"
grep -E "\(Failed\)" "$out/ctest-gpu-all-visible.log" | head


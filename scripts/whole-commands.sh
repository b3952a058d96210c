#!/usr/bin/env bash
# Whole commands as a user types them, next to their compute phase (the --json report's stages),
# on the GPU machine after `scripts/gpu.sh` built build/cuda (or --build DIR). Each command runs
# twice (the first warms the JIT cache and the page cache); the second is reported.
#   scripts/whole-commands.sh [--build DIR]
# Rows: lingo search 367k x 367k top-100 into TSV, .npy and .tsv.gz; align search of the 20
# queries against the synthetic 486k database with and without traceback; orbital grid of the C60
# total density at 0.05 A into a cube file.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build/cuda
[ "${1:-}" = --build ] && build=$2
bin=$build/bin/molaccel
work="${TMPDIR:-/tmp}/molaccel-whole"
out="${OUT:-build/whole}"
mkdir -p "$work" "$out"
stages() {  # the report's stages, else its *seconds keys
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); s=r.get('stages') or {k: v for k, v in r.items() if k.endswith('seconds') and isinstance(v, (int, float))}; print(' '.join('%s %.2f' % (k, v) for k, v in s.items()))" "$1" 2>/dev/null
}
row() {  # name command...: the second of two runs, whole seconds and the report's stages
  local name=$1 t0 t
  shift
  "$@" --json "$out/$name.json" >/dev/null 2>"$out/$name.err" || { echo "$name: FAILED"; tail -3 "$out/$name.err"; return; }
  t0=$(date +%s.%N)
  "$@" --json "$out/$name.json" >/dev/null 2>"$out/$name.err" || { echo "$name: FAILED"; return; }
  t=$(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $t0 }")
  printf '%-26s %7s s   %s\n' "$name" "$t" "$(stages "$out/$name.json")"
}
echo "whole commands ($(date -u +%F), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
smi=.deps/lingo/molecules_367k.smi.gz
if [ -f "$smi" ]; then
  for o in tsv npy tsv.gz; do
    row "lingo-search-367k.$o" "$bin" -q lingo search "$smi" "$smi" -k 100 -o "$work/hits.$o"
    ls -la "$work/hits.$o" | awk '{ printf "%28s %.0f MB\n", "", $5 / 1e6 }'
  done
fi
[ -d "$work/synthdb" ] || { python3 bench/align/make_synthetic_db.py "$work/synth.fasta" >/dev/null &&
  "$bin" -q align makedb "$work/synth.fasta" -o "$work/synthdb" >/dev/null; }
row align-search-486k-scores "$bin" -q align search data/align/queries20.fasta "$work/synthdb" -k 10 --no-traceback -o "$work/a.tsv"
row align-search-486k-traceback "$bin" -q align search data/align/queries20.fasta "$work/synthdb" -k 10 -o "$work/b.tsv"
c60=.deps/orbital/c60_sto3g.molden.gz  # ../shared/data/orbital/c60_sto3g (scripts/fetch-gpu-deps.sh)
if [ -f "$c60" ]; then
  row orbital-c60-density-0.05A "$bin" -q orbital grid "$c60" --density total --spacing 0.05 -o "$work/d.cube"
  ls -la "$work/d.cube" | awk '{ printf "%28s %.0f MB\n", "", $5 / 1e6 }'
fi

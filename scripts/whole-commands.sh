#!/usr/bin/env bash
# Whole commands as a user types them, next to their compute phase (the --json report's stages),
# on the GPU machine after `scripts/gpu.sh` built build/cuda (or --build DIR). Each command runs
# twice (the first warms the JIT cache and the page cache); the second is reported. It writes over
# the first run's output file; rows with large outputs also run a third time into a new file (the
# old one removed first, untimed), since replacing a file makes the file system free the old one's
# blocks inside the rename (about 0.2 s per 440 MB on an ext4 with online discard).
#   scripts/whole-commands.sh [--build DIR] [--startup] [--rows REGEX]
# Rows: lingo search 367k x 367k top-100 into TSV, .npy and .tsv.gz; align search of the 20
# queries against the synthetic 486k database with and without traceback; orbital grid of the C60
# total density at 0.05 A into a cube file.
# --rows REGEX: only the rows whose name matches (e.g. lingo, align-search, orbital-c60).
# --startup: only the start-up rows: the CUDA driver alone (initialisation, a context, exit; then
# holding memory, and with the context reset before the exit), align search, scores only (whole
# command, compute, and the difference: start-up, loading and output), and the first orbital grid
# of a basis set whose JIT kernel is not cached, on the GPU (threonine HOMO with an empty JIT cache
# directory: when the cube file was written and when the process ended), then the same with the
# cache filled, then with --device auto (the CPU for this grid).
set -uo pipefail
cd "$(dirname "$0")/.."
build=build/cuda
startup=0
rows=.
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --startup) startup=1; shift ;;
    --rows) rows=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--startup] [--rows REGEX]" >&2; exit 2 ;;
  esac
done
bin=$build/bin/molaccel
work="${TMPDIR:-/tmp}/molaccel-whole"
out="${OUT:-build/whole}"
mkdir -p "$work" "$out"
stages() {  # the report's stages, else its *seconds keys
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); s=r.get('stages') or {k: v for k, v in r.items() if k.endswith('seconds') and isinstance(v, (int, float))}; print(' '.join('%s %.2f' % (k, v) for k, v in s.items()))" "$1" 2>/dev/null
}
timed() {  # label json command...: one run, timed from the shell: its line (and JSON.whole); 1 if it failed
  local label=$1 json=$2 t0 t
  shift 2
  t0=$(date +%s.%N)
  "$@" --json "$json" >/dev/null 2>"${json%.json}.err" || { echo "$label: FAILED"; tail -3 "${json%.json}.err"; return 1; }
  t=$(awk "BEGIN { printf \"%.3f\", $(date +%s.%N) - $t0 }")
  echo "$t" >"${json%.json}.whole"
  printf '%-26s %7s s   %s\n' "$label" "$t" "$(stages "$json")"
}
row() {  # name command...: the second of two runs, whole seconds and the report's stages
  local name=$1
  shift
  "$@" --json "$out/$name.json" >/dev/null 2>"$out/$name.err" || { echo "$name: FAILED"; tail -3 "$out/$name.err"; return 1; }
  timed "$name" "$out/$name.json" "$@"
}
fresh_row() {  # name output command...: row, then once more into a new file
  local name=$1 output=$2
  shift 2
  row "$name" "$@" || return
  rm -f "$output"
  sync
  timed "  into a new file" "$out/$name.new.json" "$@"
}
echo "whole commands ($(date -u +%F), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
synthdb() {
  [ -d "$work/synthdb" ] || { python3 bench/align/make_synthetic_db.py "$work/synth.fasta" >/dev/null &&
    "$bin" -q align makedb "$work/synth.fasta" -o "$work/synthdb" >/dev/null; }
}
if [ "$startup" = 1 ]; then
  # The CUDA driver alone, in a process that does nothing else (Python, ctypes): cuInit, the first
  # GPU's primary context, and the exit that tears it down. No CUDA command can start and end in
  # less; three runs. Then with 2 GiB of device memory and 256 MiB page-locked, as a command holds
  # them, ended by the exit alone and with the context reset first (cuDevicePrimaryCtxReset: what
  # releasing the GPU before the host's last work would move earlier).
  for mode in bare alloc alloc+reset; do
    for run in 1 2 3; do
      python3 - "$mode" <<'PY'
import ctypes, subprocess, sys, time
code = '''
import ctypes, sys, time
cu = ctypes.CDLL("libcuda.so.1")
t1 = time.time()
assert cu.cuInit(0) == 0; t2 = time.time()
dev = ctypes.c_int(); ctx = ctypes.c_void_p()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
t3 = time.time()
if sys.argv[1] != "bare":
    d = ctypes.c_uint64(); h = ctypes.c_void_p()
    assert cu.cuCtxSetCurrent(ctx) == 0 and cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(2 << 30)) == 0
    assert cu.cuMemHostAlloc(ctypes.byref(h), ctypes.c_size_t(256 << 20), 0) == 0
reset = time.time()
if sys.argv[1] == "alloc+reset":
    assert cu.cuDevicePrimaryCtxReset_v2(dev) == 0
print(t2 - t1, t3 - t2, time.time() - reset, time.time())
'''
def wall(args):
    t = time.time(); out = subprocess.run(args, capture_output=True, text=True).stdout; return time.time() - t, out
base, _ = wall([sys.executable, "-c", "pass"])
t, out = wall([sys.executable, "-c", code, sys.argv[1]])
init, context, reset, at = map(float, out.split())
print("%-26s cuInit %.3f s, context %.3f s, reset %.3f s, exit %.3f s (an empty Python process: %.3f s)"
      % ("cuda-driver-" + sys.argv[1], init, context, reset, time.time() - at, base))
PY
    done
  done
  synthdb
  row align-search-486k-scores "$bin" -q align search data/align/queries20.fasta "$work/synthdb" -k 10 --no-traceback -o "$work/a.tsv"
  python3 - "$out/align-search-486k-scores.json" "$out/align-search-486k-scores.whole" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); whole = float(open(sys.argv[2]).read())
c = r["stages"]["compute"]
print("%28s whole %.3f s, compute %.3f s: start-up + loading + output %.3f s" % ("", whole, c, whole - c))
before = r.get("before_start_seconds", float("nan"))
print("%28s outside the stages: %.3f s before the command began, %.3f s after it ended (exit); device start"
      " %.3f s beside read + load" % ("", before, whole - r["total_seconds"] - before,
                                       r.get("device_start_seconds", float("nan"))))
PY
  # Cold: a JIT cache directory of its own, empty; the grid's file time against the start.
  cache=$(mktemp -d)
  # On the GPU (--device gpu: under auto a grid this small runs on the CPU), cold and warm, then as
  # a user types it (auto).
  for run in cold warm auto; do
    rm -f "$work/t.cube"
    python3 - "$run" "$bin" "$cache" "$work/t.cube" "$out/orbital-first-grid-$run.json" <<'PY'
import json, os, subprocess, sys, time
run, binary, cache, cube, report = sys.argv[1:]
env = dict(os.environ, MOLACCEL_CACHE_DIR=cache)
t0 = time.time()
rc = subprocess.call([binary, "-q", "orbital", "grid", "data/orbital/threonine_631gs.molden", "--orbital", "homo",
                      "-o", cube, "--json", report] + ([] if run == "auto" else ["--device", "gpu"]), env=env)
ended = time.time() - t0
if rc != 0:
    sys.exit(print("orbital-first-grid-%s: FAILED" % run))
r = json.load(open(report))
print("%-26s grid written at %.2f s, process ended at %.2f s, compute %.3f s, %s"
      % ("orbital-first-grid-" + run, os.stat(cube).st_mtime - t0, ended, r["seconds"], r["backend"]))
PY
  done
  rm -rf "$cache"
  exit 0
fi
want() { [[ $1 =~ $rows ]]; }
smi=.deps/lingo/molecules_367k.smi.gz
if [ -f "$smi" ] && want lingo-search-367k; then
  for o in tsv npy tsv.gz; do
    fresh_row "lingo-search-367k.$o" "$work/hits.$o" "$bin" -q lingo search "$smi" "$smi" -k 100 -o "$work/hits.$o"
    ls -la "$work/hits.$o" | awk '{ printf "%28s %.0f MB\n", "", $5 / 1e6 }'
  done
fi
if want align-search-486k; then
  synthdb
  row align-search-486k-scores "$bin" -q align search data/align/queries20.fasta "$work/synthdb" -k 10 --no-traceback -o "$work/a.tsv"
  row align-search-486k-traceback "$bin" -q align search data/align/queries20.fasta "$work/synthdb" -k 10 -o "$work/b.tsv"
fi
c60=.deps/orbital/c60_sto3g.molden.gz  # ../shared/data/orbital/c60_sto3g (scripts/fetch-gpu-deps.sh)
if [ -f "$c60" ] && want orbital-c60; then
  fresh_row orbital-c60-density-0.05A "$work/d.cube" "$bin" -q orbital grid "$c60" --density total --spacing 0.05 -o "$work/d.cube"
  ls -la "$work/d.cube" | awk '{ printf "%28s %.0f MB\n", "", $5 / 1e6 }'
fi

#!/usr/bin/env bash
# A fuzzing campaign over every libFuzzer target: each target runs on all cores (-jobs) until it
# has executed --runs inputs in all, starting from its corpus under fuzz/; the grown corpus is then
# minimised (-merge=1) and its coverage read back. Prints one table row per target (executions,
# seconds, executions/s, coverage edges and features of the minimised corpus, its size, findings)
# and keeps crash, leak and timeout inputs under the output folder. Fuzzers need no GPU.
#   scripts/fuzz-campaign.sh [--build] [--runs N] [--seconds S] [--jobs J] [--bin DIR] [--only NAME]...
#                            [--keep]
# --build: first build the 'fuzz' preset, with clang from PATH or else the newest
# /usr/lib/llvm-*/bin/clang (the GPU machine's image has one there);
# --runs: executions per target (default 1000000); --seconds: also stop each target after S seconds
# (the table then shows how many ran); --jobs: processes per target (default: cores);
# --bin: folder holding the fuzz_* executables (default build/fuzz/fuzz, the 'fuzz' preset's);
# --keep: copy each minimised corpus back over its folder under fuzz/ (to commit). Output: $OUT
# or build/fuzz-campaign.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=1000000
jobs=$(nproc)
bin=build/fuzz/fuzz
keep=""
seconds_limit=0
build=""
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --seconds) seconds_limit=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    --keep) keep=yes; shift ;;
    --build) build=yes; shift ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
  esac
done
if [ -n "$build" ]; then
  cc=$(command -v clang || ls -d /usr/lib/llvm-*/bin/clang 2>/dev/null | sort -V | tail -1)
  [ -n "$cc" ] || { echo "fuzz-campaign.sh: no clang found" >&2; exit 1; }
  cmake --preset fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cc++" >/dev/null ||
    { echo "fuzz-campaign.sh: configuring the fuzz preset failed" >&2; exit 1; }
  cmake --build --preset fuzz -j"$(nproc)" >/dev/null 2>&1 || cmake --build --preset fuzz -j1 2>&1 | tail -30
fi
out=$(realpath -m "${OUT:-build/fuzz-campaign}")
mkdir -p "$out"
root=$(pwd)

# NAME CORPUS pairs from fuzz/*/CMakeLists.txt (molaccel_add_fuzz(NAME n ... CORPUS dir), which
# may span lines).
targets() {
  for f in fuzz/*/CMakeLists.txt; do
    local dir
    dir=$(dirname "$f")
    tr '\n' ' ' <"$f" | grep -o 'molaccel_add_fuzz([^)]*)' |
      sed -E 's/.*NAME ([A-Za-z0-9_]+).*CORPUS \$\{CMAKE_CURRENT_SOURCE_DIR\}\/([^ )]+).*/\1 '"${dir//\//\\/}"'\/\2/'
  done
}

per_job=$(( (runs + jobs - 1) / jobs ))
printf '%-32s %12s %9s %10s %8s %8s %14s %9s\n' target executions seconds "exec/s" cov ft "corpus" findings
status=0
while read -r name corpus; do
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  exe="$bin/$name"
  [ -x "$exe" ] || exe=$(find "$bin" -name "$name" -type f -perm -u+x | head -1)
  if [ -z "$exe" ] || [ ! -x "$exe" ]; then
    printf '%-32s not built\n' "$name"; status=1; continue
  fi
  exe=$(realpath "$exe")
  dir="$out/$name"
  rm -rf "$dir" && mkdir -p "$dir/corpus" "$dir/min" "$dir/findings"
  cp -r "$corpus/." "$dir/corpus/"
  start=$(date +%s.%N)
  # Each job is a separate fuzzer process with the same flags; all share (and grow) one corpus.
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 "$exe" -runs="$per_job" -max_total_time="$seconds_limit" -jobs="$jobs" -workers="$jobs" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$dir/findings/" corpus \
    >"$dir/campaign.log" 2>&1)
  seconds=$(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }")
  executed=$(cat "$dir"/fuzz-*.log 2>/dev/null | awk '/stat::number_of_executed_units/ { s += $2 } END { print s + 0 }')
  (cd "$dir" && "$exe" -merge=1 min corpus >merge.log 2>&1)
  read -r cov ft < <("$exe" -runs=0 "$dir/min" 2>&1 | sed -nE 's/.*INITED cov: ([0-9]+) ft: ([0-9]+).*/\1 \2/p' | tail -1)
  files=$(find "$dir/min" -type f | wc -l)
  bytes=$(du -sb "$dir/min" | cut -f1)
  findings=$(find "$dir/findings" -type f | wc -l)
  [ "$findings" -gt 0 ] && status=1
  printf '%-32s %12d %9s %10.0f %8s %8s %14s %9d\n' "$name" "$executed" "$seconds" \
    "$(awk "BEGIN { print $executed / $seconds }")" "${cov:-?}" "${ft:-?}" "$files files $((bytes / 1024)) KiB" "$findings"
  if [ -n "$keep" ]; then
    rm -rf "${root:?}/$corpus" && mkdir -p "$root/$corpus" && cp "$dir/min/"* "$root/$corpus/"
  fi
done < <(targets)
exit $status

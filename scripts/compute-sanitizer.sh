#!/usr/bin/env bash
# compute-sanitizer over every GPU test (ctest -L gpu), one process per test and tool, on the GPU
# machine; prints a table of errors per test and tool (also written to OUT/table.md).
#
#   scripts/compute-sanitizer.sh [--build-dir DIR] [--tools memcheck,racecheck,synccheck]
#                                [--timeout SECONDS] [--filter REGEX] [--out DIR] [--jobs N]
#
# Each test runs as ctest would run it (its command and working directory, from
# `ctest --show-only=json-v1`) under `compute-sanitizer --tool T`, with the test argument
# --sanitizer-sizes appended: the tests that take minutes under the sanitizer (align's long
# sequences, linalg's solver sweeps) then run smaller inputs through the same kernels
# (tests/testing/test_arguments.hpp). A cell is the tool's error count (racecheck: hazards
# reported as errors), "skip" for a test that skipped, "FAIL(rc)" for a test that failed on its
# own, "timeout" past --timeout (default 900 s). --jobs N runs N sanitizer processes at once (they
# share the GPU; the sanitizers are bound by the host's cores). Exit status: 0 when every cell is 0
# or skip. Two more kinds of cell count as clean: "no GPU call" (a test that checks an error path
# before any CUDA call; the sanitizer then exits non-zero by itself) and "0 +N API" for the tests in
# provokes_api_errors below, whose N CUDA API errors are the point of the test (an out-of-memory
# cudaMalloc that must become a clear error): their memory errors are counted apart from those.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build/default
tools=memcheck,racecheck,synccheck
timeout_s=900
filter=.
jobs=1
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --tools) tools=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "compute-sanitizer.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
out=${out:-$build_dir/compute-sanitizer}
sanitizer=$(command -v compute-sanitizer || true)
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$sanitizer" ]; then
  echo "compute-sanitizer.sh: compute-sanitizer not found (CUDA toolkit's bin/)" >&2
  exit 2
fi
if [ ! -f "$build_dir/CTestTestfile.cmake" ]; then
  echo "compute-sanitizer.sh: no tests in $build_dir (build it first: cmake --build --preset default)" >&2
  exit 2
fi
mkdir -p "$out"

# name <TAB> working directory <TAB> command <TAB> environment (arguments and VAR=value entries
# separated by the unit separator \x1f; the environment is the test's ENVIRONMENT property, e.g.
# the Python tests' PYTHONPATH)
ctest --test-dir "$build_dir" -L gpu --show-only=json-v1 2>/dev/null | python3 -c '
import json, re, sys
data = json.load(sys.stdin)
pattern = re.compile(sys.argv[1])
for test in data.get("tests", []):
    if not pattern.search(test["name"]) or "command" not in test:
        continue
    props = {p["name"]: p["value"] for p in test.get("properties", [])}
    wd = props.get("WORKING_DIRECTORY", ".")
    env = props.get("ENVIRONMENT", [])
    env = [env] if isinstance(env, str) else env
    print(test["name"] + "\t" + wd + "\t" + "\x1f".join(test["command"]) + "\t" + "\x1f".join(env))
' "$filter" > "$out/tests.tsv"
count=$(wc -l < "$out/tests.tsv")
if [ "$count" -eq 0 ]; then
  echo "compute-sanitizer.sh: no GPU tests match '$filter' in $build_dir" >&2
  exit 2
fi

# Tests whose CUDA API errors are intended (memcheck reports each API error as an error).
provokes_api_errors='^(GpuRuntime\.OutOfMemoryIsACudaErrorThatSaysSo)$'

IFS=, read -r -a tool_list <<< "$tools"
mkdir -p "$out/cells"
rm -f "$out/cells/"*

# One test under one tool; its cell goes to $out/cells/<test>.<tool>.
sanitize_one() {
  local n=$1 name=$2 wd=$3 command=$4 environment=$5 tool=$6 safe log rc errors value argv envs extra=()
  safe=$(echo "$name" | tr -c 'A-Za-z0-9_.-' '_')
  log="$out/$safe.$tool.log"
  IFS=$'\x1f' read -r -a argv <<< "$command"
  IFS=$'\x1f' read -r -a envs <<< "$environment"
  [ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
  set +e
  (cd "$wd" && env "${envs[@]}" timeout "$timeout_s" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 \
    "${argv[@]}" --sanitizer-sizes) > "$log" 2>&1
  rc=$?
  set -e
  errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p; s/.*RACECHECK SUMMARY: [0-9]* hazards\? displayed (\([0-9]*\) error.*/\1/p' "$log" | tail -1)
  api=$(grep -c "Program hit .* on CUDA API call" "$log" || true)
  if [ "$rc" -eq 124 ]; then
    value=timeout
  elif grep -q "Target application terminated before first instrumented API call" "$log" &&
    grep -q "\[  PASSED  \] [1-9]" "$log"; then
    value="no GPU call"
  elif [ "$api" -gt 0 ] && [[ "$name" =~ $provokes_api_errors ]] && [ "${errors:-0}" -ge "$api" ]; then
    value="$((errors - api)) +$api API"
  elif [ "$rc" -eq 77 ] || { grep -q "\[  SKIPPED \]" "$log" && ! grep -q "\[  PASSED  \] [1-9]" "$log"; }; then
    value=skip
  elif [ "$rc" -ne 0 ] && [ "$rc" -ne 99 ]; then
    value="FAIL($rc)"
  else
    value=${errors:-?}
  fi
  echo "$value" > "$out/cells/$safe.$tool"
  echo "[$n/$count] $tool $name: $value" >&2  # as it goes: a run cut short still says what it found
}

n=0
while IFS=$'\t' read -r name wd command environment; do
  n=$((n + 1))
  for tool in "${tool_list[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    sanitize_one "$n" "$name" "$wd" "$command" "$environment" "$tool" < /dev/null &
  done
done < "$out/tests.tsv"
wait

bad=0
cell_of() {
  local file
  file="$out/cells/$(echo "$1" | tr -c 'A-Za-z0-9_.-' '_').$2"
  if [ -f "$file" ]; then cat "$file"; else echo "?"; fi
}
{
  printf '| test |'
  for tool in "${tool_list[@]}"; do printf ' %s |' "$tool"; done
  printf '\n|---|'
  for tool in "${tool_list[@]}"; do printf -- '---|'; done
  printf '\n'
  while IFS=$'\t' read -r name _; do
    printf '| %s |' "$name"
    for tool in "${tool_list[@]}"; do printf ' %s |' "$(cell_of "$name" "$tool")"; done
    printf '\n'
  done < "$out/tests.tsv"
} > "$out/table.md"
cat "$out/table.md"
# Each cell that is not clean, in a few lines from its log (the kinds of hazard or error with the
# kernel and source line, a test's failures), in one file: what to read first when the logs are
# many or do not come back from the GPU machine.
for file in "$out/cells/"*; do
  case "$(cat "$file")" in
    0|skip|"no GPU call"|"0 +"*" API") ;;
    *)
      bad=1
      log="$out/$(basename "$file").log"
      {
        echo "== $(basename "$file"): $(cat "$file")"
        grep -E "(Error|Warning|Hazard).*detected|^=========  +(Write|Read|at) |Failure|FAILED|Which is|Expected|exception" "$log" 2>/dev/null |
          sed -E 's/0x[0-9a-f]+/0x../g; s/\(([0-9]+,){2}[0-9]+\)/(..)/g' | sort | uniq -c | sort -rn | head -12
      } >> "$out/findings.txt"
      ;;
  esac
done
[ -f "$out/findings.txt" ] && cat "$out/findings.txt"
echo "logs: $out" >&2
exit $bad

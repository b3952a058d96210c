#!/usr/bin/env bash
# Where the warps of the resident BiCGStab kernel wait, one call on an H100: build; the GPU tests
# in $TESTS (default: every linalg GPU test); then, for each side in $GRIDS (default 100 and 317:
# n = 1e4 and 1e5), the time per iteration ($REPEAT runs) and Nsight Compute's warp-stall
# breakdown (cycles per issued instruction by reason, largest first) of one launch of the kernel
# matching $KERNEL (default the one-barrier form, resident_kernel_1) with the choice $RESIDENT
# (default automatic; NCU=0 skips ncu). AB=VARIABLE: each of these with VARIABLE=0 and VARIABLE=1 (an A/B of a
# run-time switch in one call).
#   bash bench/linalg/gpu-stalls.sh      (from the repository root)
set -uo pipefail
source bench/linalg/gpu-common.sh
linalg_log log.txt
linalg_configure
linalg_build test_linalg_gpu bench_linalg
linalg_gpu_tests "${TESTS:-LinalgGpu*}" "${TEST_SECONDS:-400}"
export PATH=$PATH:/usr/local/cuda/bin
ab=${AB:-MOLACCEL_UNUSED_SWITCH}
values=${AB:+0 1}
for side in ${GRIDS:-100 317}; do
  for rep in $(seq 1 "${REPEAT:-1}"); do
    for v in ${values:-0}; do
      echo "== side $side: per iteration${AB:+, $ab=$v} =="
      env "$ab=$v" timeout 60 $B --bicgstab-only --grids=$side --modes=resident --resident="${RESIDENT:-0x0}" 2>&1 | bicgstab_rows
    done
  done
  [[ ${NCU:-1} == 0 ]] && continue
  if ! command -v ncu >/dev/null; then echo "(no ncu)"; continue; fi
  for v in ${values:-0}; do
    echo "== side $side: warp stalls per issued instruction (ncu, one launch of ${KERNEL:-resident_kernel_1})${AB:+, $ab=$v} =="
    env "$ab=$v" timeout 240 ncu -k "regex:${KERNEL:-resident_kernel_1}" --launch-skip 2 -c 1 \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      $B --bicgstab-only --grids=$side --modes=resident --resident="${RESIDENT:-0x0}" 2>&1 | grep -vE "^==PROF==" |
      grep -E "smsp__|ERR|rror|\(.*\)x\(" | sed -E 's/ +/ /g; s/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio inst//' |
      sort -t' ' -k3 -g -r | cut -c1-160 | awk '$NF != "0" && $NF != "0.00"' | head -24
  done
done
st done

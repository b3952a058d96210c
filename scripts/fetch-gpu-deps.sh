#!/usr/bin/env bash
# Prepares .deps/ (git-ignored) for runs on the GPU machine, which reaches no package registry:
# the Debian packages of the benchmark baselines, unpacked under .deps/<engine>/root, and the
# large lingo benchmark set. Run here (Debian/Ubuntu with apt), then carry ".deps" in the call:
#   scripts/fetch-gpu-deps.sh && (device run) scripts/gpu.sh all
set -euo pipefail
cd "$(dirname "$0")/.."
fetch() {  # engine package...
  local engine=$1; shift
  mkdir -p ".deps/$engine/debs" ".deps/$engine/root"
  (cd ".deps/$engine/debs" && apt-get download "$@")
  for deb in ".deps/$engine/debs"/*.deb; do dpkg -x "$deb" ".deps/$engine/root"; done
}
apt-get update -qq || true
fetch align parasail libparasail8 libparasail-dev      # parasail 2.6: CPU baseline and score cross-check
fetch orbital libgg2 libgg-dev                         # gau2grid 2.0.7: CPU baseline
fetch linalg libviennacl-dev                           # ViennaCL 1.7.1 (header-only): GPU baseline
fetch opencl ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers opencl-c-headers  # the ICD loader
[ -f ../shared/data/orbital/c60_sto3g/c60_sto3g.molden.gz ] && cp ../shared/data/orbital/c60_sto3g/c60_sto3g.molden.gz .deps/orbital/
mkdir -p .deps/lingo
if [ -f ../shared/data/lingo/molecules_367k.smi.gz ]; then
  cp ../shared/data/lingo/molecules_367k.smi.gz .deps/lingo/
else
  echo "note: molecules_367k.smi.gz not found next to the checkout (../shared/data/lingo); lingo's large benchmarks will be skipped" >&2
fi
du -sh .deps/*

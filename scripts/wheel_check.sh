#!/usr/bin/env bash
# Checks the `pip install .` packaging without building the C++ a second time: pip builds
# the wheel through scikit-build-core (pyproject.toml) in the test build's own folder,
# where everything is already built, so packing it only installs the `python` component
# (the module, its stubs, the CLI). The wheel then goes into a fresh virtual environment
# (numpy from PyPI) and tests/python/wheel_smoke.py runs there, outside the source tree.
# scripts/test.sh runs this after the tests; KILN_BUILD_DIR names the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${KILN_BUILD_DIR:-build}
PY=${PYTHON:-python3}
CACHE="$BUILD/CMakeCache.txt"
[ -f "$CACHE" ] || { echo "wheel_check: no $CACHE: build first (scripts/test.sh)" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
CACHE="$BUILD/CMakeCache.txt"
cached() { sed -n "s/^$1:[A-Z]*=//p" "$CACHE"; }
WORK=$(mktemp -d)
# scikit-build-core leaves its variables (SKBUILD*, an install prefix in a temporary
# folder) in the cache: put the folder back as it was, so that a later `cmake --install`
# of it installs what it did before.
PREFIX=$(cached CMAKE_INSTALL_PREFIX)
PYTHON_OPT=$(cached KILN_PYTHON)
restore() {
  # (quiet: cmake warns that scikit-build-core's CMAKE_C_COMPILER is unused)
  cmake -U 'SKBUILD*' -DCMAKE_INSTALL_PREFIX="$PREFIX" -DKILN_PYTHON="$PYTHON_OPT" "$BUILD" \
    >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; echo "wheel_check: could not restore $CACHE" >&2; }
  rm -rf "$WORK"
}
trap restore EXIT

# The build folder keeps its generator and its options (pyproject.toml's defaults turn the
# tests and benchmarks off, which would drop them from this folder).
echo "wheel_check: packing $BUILD into a wheel"
CMAKE_GENERATOR="$(cached CMAKE_GENERATOR)" "$PY" -m pip wheel -q --no-build-isolation \
  --no-deps --disable-pip-version-check -w "$WORK/dist" -C build-dir="$BUILD" \
  -C cmake.define.KILN_TESTS="$(cached KILN_TESTS)" \
  -C cmake.define.KILN_BENCH="$(cached KILN_BENCH)" \
  -C cmake.define.KILN_CUDA="$(cached KILN_CUDA)" . >"$WORK/pip-wheel.log" 2>&1 ||
  { cat "$WORK/pip-wheel.log"; echo "wheel_check: pip wheel failed" >&2; exit 1; }
WHEEL=$(ls "$WORK"/dist/kiln-*.whl)
echo "wheel_check: $(basename "$WHEEL") ($(du -h "$WHEEL" | cut -f1)) into a fresh venv"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --disable-pip-version-check "$WHEEL" >"$WORK/pip-install.log" 2>&1 ||
  { cat "$WORK/pip-install.log"; echo "wheel_check: pip install failed" >&2; exit 1; }
cd "$WORK"
"$WORK/venv/bin/python" "$ROOT/tests/python/wheel_smoke.py" \
  "$ROOT/models/fixtures/bert_tiny_opset14_none.onnx"

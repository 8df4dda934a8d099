#!/usr/bin/env bash
# Checks the formatting (scripts/format.sh --check), builds kiln and runs every test
# (GoogleTest through CTest, the ONNX conformance floor, the end-to-end comparisons
# against onnxruntime, the Python package's pytest suites), packs the built Python module
# into a wheel and smoke-tests it in a fresh virtual environment (scripts/wheel_check.sh),
# then runs the fuzz targets for 25 s each (scripts/fuzz.sh). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/format.sh --check
BUILD=${KILN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"${KILN_JOBS:-2}"
ctest --test-dir "$BUILD" --output-on-failure -j"${KILN_JOBS:-2}"
KILN_BUILD_DIR="$BUILD" scripts/wheel_check.sh
# The libFuzzer targets (clang, ASan + UBSan, build-fuzz/), each for a short fixed time
# after their regression inputs: a parser regression fails here (KILN_FUZZ_SECONDS=0 skips).
if [ "${KILN_FUZZ_SECONDS:-25}" != 0 ]; then
  scripts/fuzz.sh "${KILN_FUZZ_SECONDS:-25}"
fi

#!/usr/bin/env bash
# Builds kiln and runs every test (GoogleTest through CTest, the ONNX conformance floor and
# the end-to-end comparisons against onnxruntime). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${KILN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"${KILN_JOBS:-2}"
ctest --test-dir "$BUILD" --output-on-failure -j"${KILN_JOBS:-2}"

#!/usr/bin/env bash
# The main job on the bundled default model: installs what is missing, builds kiln, then
# imports models/fixtures/default.onnx (a small BERT-shaped encoder with a pooler, exported
# opset-14 style), runs it on seeded random token ids and prints an output summary and the
# time. Extra arguments are passed to `kiln run` (e.g. --shape batch=4,sequence=64).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${KILN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"${KILN_JOBS:-2}" --target kiln | grep -v "^\[" || true
MODEL=models/fixtures/default.onnx
echo "== kiln inspect $MODEL (summary)"
"$BUILD/kiln" inspect "$MODEL" | sed -n '/ nodes, /,$p'
echo "== kiln opt $MODEL (node counts; -O2 fusion summary)"
"$BUILD/kiln" opt "$MODEL" -O1 --shape batch=1,sequence=128 --quiet
"$BUILD/kiln" opt "$MODEL" -O2 --shape batch=1,sequence=128 --pass-stats --quiet 2>&1 \
  | sed -n '/^fusions:/,$p'
echo "== kiln run $MODEL (as imported, then fused with -O2: same outputs)"
"$BUILD/kiln" run "$MODEL" --random-inputs --shape batch=1,sequence=128 --vocab 1000 "$@"
"$BUILD/kiln" run "$MODEL" --random-inputs --shape batch=1,sequence=128 --vocab 1000 -O2 "$@"

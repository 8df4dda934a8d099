#!/usr/bin/env bash
# The main job on the bundled default model: installs what is missing, builds kiln, then
# compiles models/fixtures/default.onnx (a small BERT-shaped encoder with a pooler, exported
# opset-14 style) into a plan with shape buckets, prints the pass summary, fusion counts and
# memory plan, runs the plan, and benchmarks it beside onnxruntime on the same shape and
# thread count; then compiles it for CUDA at fp16 and says whether this machine can run
# that plan (and benchmarks it where it can). Extra arguments go to `kiln bench` and
# `kiln run` (e.g. --threads 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${KILN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"${KILN_JOBS:-2}" --target kiln | grep -v "^\[" || true
MODEL=models/fixtures/default.onnx
PLAN="$BUILD/default.kiln"
SHAPE=batch=1,sequence=128
THREADS=$(nproc)
echo "== kiln compile $MODEL (passes, fusions, buckets)"
"$BUILD/kiln" compile "$MODEL" -o "$PLAN" --profile batch=1:8,sequence=32:128 --verbose
echo "== kiln inspect $PLAN (memory plan of the $SHAPE bucket)"
"$BUILD/kiln" inspect "$PLAN" | sed -n '/sequence=128\]/,/^$/p' | head -4
echo "== kiln run $PLAN --shape $SHAPE (random token ids)"
"$BUILD/kiln" run "$PLAN" --random-inputs --shape "$SHAPE" --vocab 1000 "$@"
echo "== latency at $SHAPE, $THREADS threads: kiln, then onnxruntime on the same model"
"$BUILD/kiln" bench "$PLAN" --shape "$SHAPE" --threads "$THREADS" "$@" | grep -v "^plan "
python3 bench/ort_bench.py "$MODEL" --batch 1 --seq 128 --threads "$THREADS"
GPU_PLAN="$BUILD/default_cuda_fp16.kiln"
echo "== kiln compile $MODEL --target cuda --precision fp16 (every op a device kernel)"
"$BUILD/kiln" compile "$MODEL" -o "$GPU_PLAN" --target cuda --precision fp16 \
  --profile batch=1:8,sequence=32:128 --quiet
"$BUILD/kiln" plan-info "$GPU_PLAN" | grep -E "^(target|manifest|options|weights|compatible)"
if "$BUILD/kiln" plan-info "$GPU_PLAN" | grep -q "^compatible: yes"; then
  "$BUILD/kiln" bench "$GPU_PLAN" --shape "$SHAPE" | grep -v "^plan "
fi

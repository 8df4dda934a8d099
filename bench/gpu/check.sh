#!/usr/bin/env bash
# The GPU check, in one call on a GPU machine (bench/gpu/README.md): unpacks the bundle
# bench/gpu/make_bundle.sh built (carried as .gpu-bundle), starts its binaries through the
# bundled loader with this machine's driver and cuBLAS, and runs in order:
#   1. the device, the bundle and `kiln --version`;
#   2. every CUDA test (kiln_cuda_tests: 791 one-op cases vs the reference executor, the
#      fixtures vs the CPU executor at fp32/fp16/bf16, padding, device I/O, graph replay
#      bit-identity, 4 threads x 100 runs, data errors, traces) and the cuda plan mutation
#      test with a GPU present;
#   3. the end-to-end check: cuda plans of every fixture vs onnxruntime (e2e_check.py);
#   4. the fused attention kernels vs PyTorch SDPA on issue 10's shapes (attn_bench.py);
#   5. the benchmarks vs PyTorch eager and torch.compile (torch_bench.py), with the fused
#      attention's end-to-end effect (plans with and without --no-flash-attention);
#   6. re-ranking with realistic lengths: a packed cuda plan vs its padded buckets vs
#      PyTorch eager padded and length-sorted (rerank_gpu.py, issue 16);
#   7. generation: `kiln generate` on fp32 and fp16 cuda plans of a Qwen2-0.5B-layered
#      decoder (paged device cache, split-KV decode) vs PyTorch greedy generate and the
#      bandwidth floor (generate_gpu.py, issue 13);
# then prints one short table (summary.py). Results and logs go to $OUT (the device tool's
# return folder) or /tmp/kiln-gpu. Each stage runs even when an earlier one fails; the exit
# status is 1 if any failed. Budget: <= 9 minutes on an H200 (KILN_GPU_QUICK=1 skips
# torch.compile, the slowest part). KILN_GPU_STAGES="2 7" runs only those stages (1 and the
# summary always run).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-/tmp/kiln-gpu}
mkdir -p "$OUT"
LOG="$OUT/check.log"
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG"; }
T0=$(date +%s)
status=0
STAGES=${KILN_GPU_STAGES:-2 3 4 5 6 7}
want() { [[ " $STAGES " == *" $1 "* ]]; }
QUICK=()
[ -n "${KILN_GPU_QUICK:-}" ] && QUICK=(--quick)

BUNDLE=.gpu-bundle/kiln-bundle.tar.xz
[ -f "$BUNDLE" ] || { echo "check: $BUNDLE missing: run bench/gpu/make_bundle.sh first and carry .gpu-bundle"; exit 2; }
B=/tmp/kiln-bundle
rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf "$BUNDLE"

# cuBLASLt (the machine's CUDA 13) and the driver's libraries.
CUDA_LIBS=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__) + " " + " ".join(os.path.join(p, "cublas", "lib") for p in nvidia.__path__))' 2>/dev/null); do
  [ -e "$d/libcublasLt.so.13" ] && CUDA_LIBS="$CUDA_LIBS:$d"
done
DRIVER_LIBS=""
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
  compgen -G "$d/libcuda.so*" >/dev/null && DRIVER_LIBS="$DRIVER_LIBS:$d"
done
LIBPATH="$B/lib${CUDA_LIBS}${DRIVER_LIBS}"
mkdir -p "$B/wrap"
for bin in kiln kiln_cuda_tests kiln_runtime_tests kiln_gpu_bench; do
  printf '#!/bin/sh\nexec "%s/lib/ld-linux-x86-64.so.2" --library-path "%s" "%s/bin/%s" "$@"\n' \
    "$B" "$LIBPATH" "$B" "$bin" > "$B/wrap/$bin"
  chmod +x "$B/wrap/$bin"
done
# The test binaries find fixtures under the path they were built in.
BUILT_IN=$(strings "$B/bin/kiln_cuda_tests" | grep -m1 -o '/[^ ]*/models/fixtures' | sed 's#/models/fixtures##')
if [ -n "$BUILT_IN" ] && [ "$BUILT_IN" != "$REPO" ] && [ ! -e "$BUILT_IN" ]; then
  mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$REPO" "$BUILT_IN"
fi

say "1. device and bundle"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  cat "$B/VERSION" "$B/COMMIT" 2>/dev/null
  echo "cuBLASLt from:${CUDA_LIBS:- (not found)}"; echo "driver from:${DRIVER_LIBS:- (not found)}"
  "$B/wrap/kiln" --version; } 2>&1 | tee -a "$LOG" | tee "$OUT/device.txt"

if want 2; then
say "2. CUDA tests"
"$B/wrap/kiln_cuda_tests" --gtest_brief=1 --gtest_output="json:$OUT/cuda_tests.json" \
  > "$OUT/cuda_tests.log" 2>&1 || status=1
tail -n 30 "$OUT/cuda_tests.log" | tee -a "$LOG"
"$B/wrap/kiln_runtime_tests" --gtest_filter='PlanMutation.Cuda*' > "$OUT/mutation.log" 2>&1 || status=1
grep -E "cuda plan mutation|PASSED|FAILED" "$OUT/mutation.log" | tee -a "$LOG"
fi

want 3 && {
say "3. end to end: cuda plans of every fixture vs onnxruntime"
python3 bench/gpu/e2e_check.py --kiln "$B/wrap/kiln" --json "$OUT/e2e.json" > "$OUT/e2e.log" 2>&1 || status=1
grep -E "MISS|^e2e:" "$OUT/e2e.log" | tail -n 40 | tee -a "$LOG"
}

want 4 && {
say "4. attention kernels vs PyTorch SDPA"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu/attn_bench.py --gpu-bench "$B/wrap/kiln_gpu_bench" \
  --json "$OUT/attention.json" > "$OUT/attention.log" 2>&1 || { status=1; tail -n 20 "$OUT/attention.log" | tee -a "$LOG"; }
}

want 5 && {
say "5. benchmarks vs PyTorch"
PYTHONUNBUFFERED=1 timeout "${KILN_GPU_BENCH_TIMEOUT:-270}" python3 bench/gpu/torch_bench.py \
  --kiln "$B/wrap/kiln" --gpu-bench "$B/wrap/kiln_gpu_bench" --json "$OUT/bench.json" \
  > "$OUT/bench.log" 2>&1 || { status=1; tail -n 20 "$OUT/bench.log" | tee -a "$LOG"; }
}

want 6 && {
say "6. re-ranking with realistic lengths: packed vs padded vs PyTorch"
for arch in bert xlmr; do
  PYTHONUNBUFFERED=1 timeout "${KILN_GPU_RERANK_TIMEOUT:-150}" python3 bench/gpu/rerank_gpu.py \
    --arch $arch --kiln "$B/wrap/kiln" --gpu-bench "$B/wrap/kiln_gpu_bench" \
    --json "$OUT/rerank_$arch.json" > "$OUT/rerank_$arch.log" 2>&1 \
    || { status=1; tail -n 20 "$OUT/rerank_$arch.log" | tee -a "$LOG"; }
done
}

want 7 && {
say "7. generation: kiln generate on a cuda plan vs PyTorch"
PYTHONUNBUFFERED=1 timeout "${KILN_GPU_GENERATE_TIMEOUT:-240}" python3 bench/gpu/generate_gpu.py \
  --kiln "$B/wrap/kiln" --repeats 2 "${QUICK[@]}" --json "$OUT/generate.json" \
  > "$OUT/generate.log" 2>&1 || { status=1; tail -n 20 "$OUT/generate.log" | tee -a "$LOG"; }
}

say "summary ($(( $(date +%s) - T0 )) s)"
python3 bench/gpu/summary.py "$OUT" | tee "$OUT/summary.txt"
exit $status

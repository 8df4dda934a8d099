#!/usr/bin/env bash
# Builds kiln with its CUDA backend here (Release, sm_80 + sm_90) and packs what
# bench/gpu/check.sh runs on a GPU machine into .gpu-bundle/kiln-bundle.tar.xz: the
# binaries (kiln, kiln_cuda_tests, kiln_runtime_tests, kiln_gpu_bench) and every shared
# library they load except the GPU driver and cuBLAS (the GPU machine brings its own CUDA
# 13), this machine's glibc and dynamic loader included, so the binaries run whatever the
# GPU machine's distribution is (check.sh starts them through the bundled loader).
# Why a bundle: the GPU machine has nvcc, cmake and Python with torch, but none of kiln's
# Debian dev packages (abseil, protobuf, onnx, oneDNN) and no package registry.
# .gpu-bundle/ is git-ignored; carry it in the device call (bench/gpu/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
# The build tree scripts/test.sh uses (the same Release configuration, so it stays warm);
# KILN_BUILD_DIR=dir for another.
BUILD=${KILN_BUILD_DIR:-build}
OUT=.gpu-bundle
scripts/setup.sh
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON >/dev/null
cmake --build "$BUILD" -j"${KILN_JOBS:-2}" \
  --target kiln kiln_cuda_tests kiln_runtime_tests kiln_gpu_bench | grep -v '^\[' || true
BINS=("$BUILD/kiln" "$BUILD/tests/kiln_cuda_tests" "$BUILD/tests/kiln_runtime_tests"
      "$BUILD/bench/kiln_gpu_bench")
rm -rf "$OUT/stage"
mkdir -p "$OUT/stage/bin" "$OUT/stage/lib"
for b in "${BINS[@]}"; do
  [ -x "$b" ] || { echo "make_bundle: $b was not built" >&2; exit 1; }
  cp "$b" "$OUT/stage/bin/"
  strip --strip-unneeded "$OUT/stage/bin/$(basename "$b")"
done
# Shared libraries, resolved here; the driver (libcuda) and cuBLAS stay the GPU machine's.
for b in "${BINS[@]}"; do ldd "$b"; done | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' |
  sort -u | grep -v -E 'libcuda\.so|libcublas|libcudart\.so|libnvidia' | while read -r lib; do
  cp -L "$lib" "$OUT/stage/lib/"
done
# glibc's stub libraries that libcuda and cuBLAS link against: theirs must match our libc.
for stub in libdl.so.2 libpthread.so.0 librt.so.1 libm.so.6 libc.so.6; do
  [ -e "$OUT/stage/lib/$stub" ] || cp -L "/lib/x86_64-linux-gnu/$stub" "$OUT/stage/lib/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$OUT/stage/lib/"
git rev-parse HEAD > "$OUT/stage/COMMIT" 2>/dev/null || true
"$BUILD/kiln" --version | head -2 > "$OUT/stage/VERSION"
tar -C "$OUT/stage" -cJf "$OUT/kiln-bundle.tar.xz" .
rm -rf "$OUT/stage"
echo "make_bundle: $OUT/kiln-bundle.tar.xz ($(du -h "$OUT/kiln-bundle.tar.xz" | cut -f1)," \
     "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?))"

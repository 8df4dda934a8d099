#!/usr/bin/env bash
# The end-to-end benchmark in one command: installs what it needs (scripts/setup.sh plus
# requirements-bench.txt), builds kiln, kiln_rag_bench and kiln_kernels_bench (Release,
# in $KILN_BENCH_BUILD_DIR, default build-bench), runs bench/e2e_bench.py (arguments are
# passed through: --quick, --threads 1,2, --models minilm,base, --runs, --warmup,
# --cpu-isa avx2 for both sides as on an AVX2-only CPU, ...),
# then writes the PNGs (bench/plot.py -> docs/img/) and the end-to-end section of
# docs/benchmarks.md (bench/report.py). KILN_BENCH_NO_DOCS=1 keeps docs/ untouched.
# Timings only mean something on an otherwise idle machine: the load average is printed
# before the run and recorded in the results.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUILD=${KILN_BENCH_BUILD_DIR:-build-bench}

scripts/setup.sh
if ! "$PY" -c "import matplotlib" 2>/dev/null; then
  echo "bench: installing PyPI packages from requirements-bench.txt"
  "$PY" -m pip install -q --disable-pip-version-check -r requirements-bench.txt \
    || "$PY" -m pip install -q --disable-pip-version-check --break-system-packages \
         -r requirements-bench.txt
fi

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_BENCH=ON -DKILN_TESTS=OFF >/dev/null
TARGETS=(kiln kiln_rag_bench kiln_kernels_bench)
[ "$(uname -m)" = x86_64 ] && TARGETS+=(kiln_cpuid_mask)  # --cpu-isa avx2
cmake --build "$BUILD" -j"${KILN_JOBS:-$(nproc)}" --target "${TARGETS[@]}"

echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" \
     "(timings need an idle machine)" >&2
export KILN_BENCH_COMMAND="scripts/bench.sh${*:+ $*}"  # recorded as the results' command
OUT=$("$PY" bench/e2e_bench.py --build-dir "$BUILD" "$@" | tail -n 1)
echo "bench: results in $OUT" >&2
if [ "${KILN_BENCH_NO_DOCS:-0}" != 1 ]; then
  "$PY" bench/plot.py "$OUT" >&2
  "$PY" bench/report.py "$OUT" >&2
fi

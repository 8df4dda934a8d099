#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: the ONNX importer, the IR text parser, the .npy
# reader, the plan loader; clang, ASan + UBSan) in build-fuzz/ and runs each for SECONDS
# (default 60), starting from seeds made from the repository (the fixtures' ONNX files,
# the IR texts of the pass tests, a few .npy files, a compiled plan when build/kiln
# exists) and the regression inputs in fuzz/regressions/<target>/ (each run first, as a
# plain test). Prints per target the executions, the corpus size and what it found; a
# crash leaves its input in build-fuzz/crashes/<target>/ and fails the script (exit 1) —
# copy it into fuzz/regressions/<target>/ once fixed.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      TARGET: onnx_import ir_text npy plan_load
# The test command (scripts/test.sh) runs every target for KILN_FUZZ_SECONDS (25) each.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(onnx_import ir_text npy plan_load)
scripts/setup.sh
B=${KILN_FUZZ_BUILD_DIR:-build-fuzz}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DKILN_FUZZ=ON -DKILN_CUDA=OFF -DKILN_TESTS=OFF -DKILN_BENCH=OFF \
  >/dev/null
cmake --build "$B" -j"${KILN_JOBS:-2}" --target $(printf 'kiln_fuzz_%s ' "${TARGETS[@]}") \
  | grep -E "error|warning: unused" || true

# Seeds (rebuilt each time; cheap).
S="$B/seeds"
rm -rf "$S" && mkdir -p "$S"/{onnx_import,ir_text,npy,plan_load}
find models/fixtures -name '*.onnx' -size -2M -exec cp {} "$S/onnx_import/" \;
python3 - "$S" <<'PY'
import pathlib, re, sys
import numpy as np
seeds = pathlib.Path(sys.argv[1])
n = 0
for src in sorted(pathlib.Path("tests").rglob("*_test.cc")):
    for m in re.finditer(r'R"\((graph [^\n]*\{\n.*?\n\})\)"', src.read_text(), re.S):
        (seeds / "ir_text" / f"{n:04d}.kir").write_text(m.group(1) + "\n")
        n += 1
for i, a in enumerate([np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 4), np.int64),
                       np.array([True, False]), np.zeros((0, 3), np.float16),
                       np.arange(24, dtype=np.int32).reshape(2, 3, 4), np.float64(1.5)]):
    np.save(seeds / "npy" / f"{i}.npy", a)
PY
KILN=${KILN_BUILD_DIR:-build}/kiln
if [ -x "$KILN" ]; then
  "$KILN" compile models/fixtures/default.onnx -o "$S/plan_load/default.kiln" \
    --profile batch=1:2,sequence=8:16 --quiet
  "$KILN" compile models/fixtures/bert_tiny_opset17_none.onnx -o "$S/plan_load/cuda.kiln" \
    --target cuda --precision fp16 --shape batch=1,sequence=8 --quiet
fi

# The targets' scratch files (inputs written for the file-reading APIs) stay in the build.
case "$B" in /*) TMPDIR="$B/tmp" ;; *) TMPDIR="$PWD/$B/tmp" ;; esac
export TMPDIR
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
status=0
printf '%-12s %12s %8s %s\n' target executions corpus found
for t in "${TARGETS[@]}"; do
  bin="$B/fuzz/kiln_fuzz_$t"
  corpus="$B/corpus/$t"
  crashes="$B/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  log="$B/fuzz-$t.log"
  found="nothing"
  # The regression inputs first, each once.
  if compgen -G "fuzz/regressions/$t/*" >/dev/null; then
    if ! "$bin" -runs=0 fuzz/regressions/$t/* >"$B/regress-$t.log" 2>&1; then
      found="a regression input fails (see $B/regress-$t.log)"
      status=1
    fi
  fi
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  set +e
  "$bin" "$corpus" "$S/$t" "${dict[@]}" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 \
    -timeout=20 -print_final_stats=1 -artifact_prefix="$crashes/" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  size=$(ls "$corpus" | wc -l)
  if [ $rc -ne 0 ]; then
    found="CRASH (exit $rc): $(ls -t "$crashes" | head -1) — $(grep -m1 -E 'ERROR|runtime error|deadly' "$log" || true)"
    status=1
  fi
  printf '%-12s %12s %8s %s\n' "$t" "$execs" "$size" "$found"
done
exit $status

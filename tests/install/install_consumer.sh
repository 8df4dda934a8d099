#!/usr/bin/env bash
# install_consumer: builds examples/run_plan against the installed package (a copy of
# $KILN_PREFIX moved elsewhere: the package must be relocatable; find_package(kiln),
# kiln::kiln), compiles models/fixtures/default.onnx with the INSTALLED kiln, runs the
# example on the plan and checks the printed outputs. default.onnx (BERT tiny, hidden 64)
# has outputs last_hidden_state [batch,sequence,64] and pooler_output [batch,64]
# (models/README.md).
source "$(dirname "$0")/common.sh"
work=$1
rm -rf "$work"
mkdir -p "$work"
# The package must be relocatable: use a copy of the installed tree in another place.
cp -a "$KILN_PREFIX" "$work/relocated"
KILN_PREFIX="$work/relocated"
kiln="$KILN_PREFIX/bin/kiln"

step "configure + build examples/run_plan against $KILN_PREFIX"
consumer_configure "$KILN_SOURCE_DIR/examples/run_plan" "$work/build"
consumer_build "$work/build"
[[ -x "$work/build/run_plan" ]] || fail "run_plan was not built"

step "installed kiln compile default.onnx"
"$kiln" compile "$KILN_SOURCE_DIR/models/fixtures/default.onnx" -o "$work/default.kiln" \
    --profile batch=1:2,sequence=8:16 --quiet > "$work/compile.log" 2>&1 \
  || { cat "$work/compile.log" >&2; fail "kiln compile failed"; }
[[ "$(head -c 8 "$work/default.kiln")" == "KILNPLAN" ]] || fail "default.kiln is not a plan"

# run_plan PLAN [SYMBOL=N]... -> expected output lines (name dtype dims), in order.
check_run() {
  local expect=$1
  shift
  local rc=0
  "$work/build/run_plan" "$work/default.kiln" "$@" > "$work/run.out" 2> "$work/run.err" || rc=$?
  if [[ $rc -ne 0 ]]; then
    cat "$work/run.out" "$work/run.err" >&2
    fail "run_plan $* exited $rc"
  fi
  cat "$work/run.out"
  local got
  got=$(sed -n 's/^output \([^ ]* [^ ]* [^ ]*\) sum=.*/\1/p' "$work/run.out")
  [[ "$got" == "$expect" ]] || fail "run_plan $*: outputs
$got
expected
$expect"
  grep -Eq 'sum=(-?nan|-?inf)' "$work/run.out" && fail "run_plan $*: non-finite checksum"
  return 0
}

step "run_plan on an exact bucket"
check_run "last_hidden_state f32 [2,16,64]
pooler_output f32 [2,64]" batch=2 sequence=16
step "run_plan on a padded shape"
check_run "last_hidden_state f32 [1,11,64]
pooler_output f32 [1,64]" batch=1 sequence=11
grep -q '(padded)' "$work/run.out" || fail "sequence 11 should run padded in bucket 16"

step "run_plan errors are one clear line"
if "$work/build/run_plan" "$work/default.kiln" batch=2 sequence=64 > /dev/null 2> "$work/err"; then
  fail "sequence 64 is outside every bucket but run_plan succeeded"
fi
grep -q '^run_plan: INVALID_ARGUMENT: .*' "$work/err" || fail "unexpected error: $(cat "$work/err")"
echo "PASS install_consumer"

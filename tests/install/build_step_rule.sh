#!/usr/bin/env bash
# build_step_rule: kiln_compile_model() from the installed package (consumer_compile/)
# rebuilds the plan exactly when the model, the options or the kiln binary change:
#   build -> plan; build again -> untouched, no "kiln compile" in the log; touch the model
#   -> rebuilt; reconfigure with other SHAPES -> rebuilt (and the plan differs); reconfigure
#   with the same SHAPES -> untouched; KILN_EXECUTABLE = a copy of the installed kiln ->
#   rebuilt; touch that copy -> rebuilt; a failing compile leaves the old plan intact.
# "rebuilt" = the build log shows "kiln compile" and the plan's mtime changed.
source "$(dirname "$0")/common.sh"
work=$1
rm -rf "$work"
mkdir -p "$work/model" "$work/bin"
cp "$KILN_SOURCE_DIR/models/fixtures/default.onnx" "$work/model/default.onnx"
src="$(dirname "$0")/consumer_compile"
bld="$work/build"
plan="$bld/plans/default.kiln"

mtime() { stat -c %y "$1"; }

configure() {  # configure SHAPES [-Dextra...]
  local shapes=$1
  shift
  consumer_configure "$src" "$bld" "-DKILN_TEST_MODEL=$work/model/default.onnx" \
      "-DKILN_TEST_SHAPES=$shapes" "$@"
}

expect_rebuilt() {  # expect_rebuilt MTIME_BEFORE WHY
  local before=$1 why=$2
  consumer_build "$bld"
  grep -q 'kiln compile' "$bld.build.log" \
    || { cat "$bld.build.log"; fail "$why: the plan was not recompiled"; }
  [[ -f "$plan" ]] || fail "$why: no plan at $plan"
  [[ "$(head -c 8 "$plan")" == "KILNPLAN" ]] || fail "$why: $plan is not a plan"
  [[ "$(mtime "$plan")" != "$before" ]] || fail "$why: the plan's mtime did not change"
  [[ -e "$plan.tmp" ]] && fail "$why: $plan.tmp left behind"
  return 0
}

expect_untouched() {  # expect_untouched MTIME_BEFORE WHY
  local before=$1 why=$2
  consumer_build "$bld"
  grep -q 'kiln compile' "$bld.build.log" \
    && { cat "$bld.build.log"; fail "$why: the plan was recompiled"; }
  [[ "$(mtime "$plan")" == "$before" ]] || fail "$why: the plan's mtime changed"
  return 0
}

step "first build (installed kiln::kiln_cli)"
configure "batch=1,sequence=16"
grep -qx "exe=kiln::kiln_cli $KILN_PREFIX/bin/kiln" "$bld/kiln_compile_model/default_plan.options" \
  || fail "the rule does not run the installed kiln::kiln_cli"
expect_rebuilt "" "first build"
cp "$plan" "$work/plan_b1"

step "second build: nothing to do"
expect_untouched "$(mtime "$plan")" "second build"

step "touch the model"
t=$(mtime "$plan")
touch "$work/model/default.onnx"
expect_rebuilt "$t" "touched model"

step "reconfigure with other SHAPES"
t=$(mtime "$plan")
configure "batch=2,sequence=16"
expect_rebuilt "$t" "SHAPES batch=2"
cmp -s "$plan" "$work/plan_b1" && fail "SHAPES batch=2 gave the same plan as batch=1"

step "reconfigure with the same SHAPES: nothing to do"
stamp="$bld/kiln_compile_model/default_plan.options"
s=$(mtime "$stamp")
t=$(mtime "$plan")
configure "batch=2,sequence=16"
[[ "$(mtime "$stamp")" == "$s" ]] || fail "reconfiguring with the same options rewrote $stamp"
expect_untouched "$t" "same SHAPES"

step "KILN_EXECUTABLE = a copy of the installed kiln"
cp "$KILN_PREFIX/bin/kiln" "$work/bin/kiln"
t=$(mtime "$plan")
configure "batch=2,sequence=16" "-DKILN_EXECUTABLE=$work/bin/kiln"
expect_rebuilt "$t" "KILN_EXECUTABLE set"
expect_untouched "$(mtime "$plan")" "KILN_EXECUTABLE unchanged"

step "touch the kiln binary"
t=$(mtime "$plan")
touch "$work/bin/kiln"
expect_rebuilt "$t" "touched kiln binary"

step "int8 with its default accuracy gate"
t=$(mtime "$plan")
cp "$plan" "$work/plan_fp32"
configure "batch=2,sequence=16" "-DKILN_EXECUTABLE=$work/bin/kiln" "-DKILN_TEST_PRECISION=int8"
expect_rebuilt "$t" "PRECISION int8"
cmp -s "$plan" "$work/plan_fp32" && fail "the int8 plan equals the fp32 one"
grep -q 'gates: cosine>=0.99' "$bld.build.log" && fail "--quiet: a met gate prints nothing"

step "an accuracy gate not met fails the build and keeps the old plan"
# The same command line (CMake's Makefile generator itself deletes the output of a custom
# command whose command changed), through a kiln whose gate cannot be met.
cp "$plan" "$work/plan_int8"
cat > "$work/bin/kiln" <<SH
#!/bin/sh
exec "$KILN_PREFIX/bin/kiln" "\$@" --accept "cosine>=1.5"
SH
chmod +x "$work/bin/kiln"
if "$KILN_CMAKE" --build "$bld" -j2 > "$bld.build.log" 2>&1; then
  fail "the build succeeded although the accuracy gate cannot be met"
fi
grep -q 'fails its accuracy gate' "$bld.build.log" || { cat "$bld.build.log"; fail "no gate message"; }
grep -q 'NOT MET: last_hidden_state: cosine' "$bld.build.log" || fail "the figures are not in the log"
cmp -s "$plan" "$work/plan_int8" || fail "a failed accuracy gate changed $plan"
ls "$bld/plans" | grep -q 'tmp' && fail "a temporary plan was left in $bld/plans"
cp "$KILN_PREFIX/bin/kiln" "$work/bin/kiln"
configure "batch=2,sequence=16" "-DKILN_EXECUTABLE=$work/bin/kiln" "-DKILN_TEST_PRECISION=fp32"
expect_rebuilt "$(mtime "$plan")" "back to fp32"

step "a failing compile leaves the old plan"
cp "$plan" "$work/plan_good"
cat > "$work/bin/kiln" <<'SH'
#!/bin/sh
# Fake kiln: writes garbage to the -o file, then fails like an unsupported model.
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then echo garbage > "$2"; fi
  shift
done
echo "kiln: unsupported: fake failure" >&2
exit 3
SH
chmod +x "$work/bin/kiln"
if "$KILN_CMAKE" --build "$bld" -j2 > "$bld.build.log" 2>&1; then
  fail "the build succeeded although kiln compile failed"
fi
grep -q 'fake failure' "$bld.build.log" || fail "the fake kiln did not run"
cmp -s "$plan" "$work/plan_good" || fail "a failed compile changed $plan"

# Inside kiln's own build the rule runs the `kiln` target: a stand-in target here.
step "in-tree: the kiln target is built first and its relink recompiles the plan"
bld="$work/intree"
plan="$bld/plans/default.kiln"
cp "$(dirname "$0")/consumer_intree/stand_in_kiln.cc" "$work/stand_in_kiln.cc"
"$KILN_CMAKE" -S "$(dirname "$0")/consumer_intree" -B "$bld" -G "$KILN_GENERATOR" \
    "-DCMAKE_CXX_COMPILER=$KILN_CXX" "-DKILN_STAND_IN_SOURCE=$work/stand_in_kiln.cc" \
    "-DKILN_COMPILE_CMAKE=$KILN_SOURCE_DIR/tools/cmake/KilnCompile.cmake" \
    "-DKILN_TEST_MODEL=$work/model/default.onnx" > "$bld.configure.log" 2>&1 \
  || { cat "$bld.configure.log" >&2; fail "configuring consumer_intree failed"; }
grep -qx 'exe=target kiln' "$bld/kiln_compile_model/default_plan.options" \
  || fail "in-tree: the rule does not run the kiln target"
expect_rebuilt "" "in-tree first build"
expect_untouched "$(mtime "$plan")" "in-tree second build"
t=$(mtime "$plan")
touch "$work/stand_in_kiln.cc"
expect_rebuilt "$t" "in-tree kiln relinked"
grep -q 'Linking CXX executable kiln' "$bld.build.log" || fail "in-tree: kiln was not relinked"
echo "PASS build_step_rule"

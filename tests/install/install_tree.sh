#!/usr/bin/env bash
# install_tree: `cmake --install` of this build tree into $KILN_PREFIX (the fixture for
# install_consumer and build_step_rule), then checks the installed layout: headers, the
# static components, the kiln binary, the package files, and that every installed header
# includes only installed kiln headers, absl or the standard library (no generated or
# private header such as plan.pb.h).
source "$(dirname "$0")/common.sh"
work=$1
rm -rf "$KILN_PREFIX" "$work"
mkdir -p "$work"

step "cmake --install $KILN_BUILD_DIR --prefix $KILN_PREFIX"
"$KILN_CMAKE" --install "$KILN_BUILD_DIR" --prefix "$KILN_PREFIX" > "$work/install.log" 2>&1 \
  || { cat "$work/install.log" >&2; fail "cmake --install failed"; }

step "layout"
[[ -x "$KILN_PREFIX/bin/kiln" ]] || fail "bin/kiln is missing or not executable"
"$KILN_PREFIX/bin/kiln" --version | grep -q '^kiln [0-9]' || fail "bin/kiln --version"
for c in ir reference onnx passes kernels_cpu plan compiler runtime; do
  [[ -f "$KILN_PREFIX/$KILN_LIBDIR/libkiln_$c.a" ]] || fail "$KILN_LIBDIR/libkiln_$c.a missing"
done
cmakedir="$KILN_PREFIX/$KILN_LIBDIR/cmake/kiln"
for f in kilnConfig.cmake kilnConfigVersion.cmake kilnTargets.cmake KilnCompile.cmake; do
  [[ -f "$cmakedir/$f" ]] || fail "$KILN_LIBDIR/cmake/kiln/$f missing"
done
compgen -G "$cmakedir/kilnTargets-*.cmake" > /dev/null \
  || fail "no per-configuration kilnTargets-*.cmake in $cmakedir"
grep -q 'add_library(kiln::kiln INTERFACE IMPORTED)' "$cmakedir/kilnTargets.cmake" \
  || fail "kiln::kiln is not exported"
grep -q 'add_executable(kiln::kiln_cli IMPORTED)' "$cmakedir/kilnTargets.cmake" \
  || fail "kiln::kiln_cli is not exported"

step "installed headers are closed"
inc="$KILN_PREFIX/include"
(cd "$KILN_SOURCE_DIR/include" && find kiln -name '*.h' | sort) > "$work/src_headers"
(cd "$inc" && find kiln -name '*.h' | sort) > "$work/inst_headers"
cmp -s "$work/src_headers" "$work/inst_headers" \
  || fail "installed headers differ from include/kiln:
$(diff "$work/src_headers" "$work/inst_headers")"
[[ -s "$work/inst_headers" ]] || fail "no headers installed"
while read -r h; do
  while read -r dep; do
    case "$dep" in
      absl/*) ;;
      kiln/*) [[ -f "$inc/$dep" ]] || fail "$h includes $dep, which is not installed" ;;
      *) fail "$h includes \"$dep\", which is neither kiln/ nor absl/ (private or generated)" ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$inc/$h")
  grep -Eq '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(kiln/|plan/|[^>]*\.pb\.h>)' "$inc/$h" \
    && fail "$h includes a kiln, plan or protobuf header with <...>; use \"kiln/...\""
done < "$work/inst_headers"
echo "PASS install_tree"

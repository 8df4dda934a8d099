# Helpers shared by the install tests (sourced). Environment from tests/install/CMakeLists.txt:
# KILN_SOURCE_DIR, KILN_BUILD_DIR, KILN_PREFIX, KILN_LIBDIR, KILN_CMAKE, KILN_GENERATOR,
# KILN_CXX, KILN_CXX_LAUNCHER.
set -u -o pipefail

for v in KILN_SOURCE_DIR KILN_BUILD_DIR KILN_PREFIX KILN_LIBDIR KILN_CMAKE KILN_GENERATOR \
         KILN_CXX; do
  if [[ -z "${!v:-}" ]]; then
    echo "FAIL: environment variable $v is not set (run through ctest)" >&2
    exit 1
  fi
done

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

step() {
  echo "--- $*"
}

# Configures a consumer project: consumer_configure SRC BUILD [-Dextra...]
consumer_configure() {
  local src=$1 bld=$2
  shift 2
  local launcher=()
  if [[ -n "${KILN_CXX_LAUNCHER:-}" ]]; then
    launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=${KILN_CXX_LAUNCHER}")
  fi
  "$KILN_CMAKE" -S "$src" -B "$bld" -G "$KILN_GENERATOR" -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_CXX_COMPILER=$KILN_CXX" "${launcher[@]}" "-DCMAKE_PREFIX_PATH=$KILN_PREFIX" \
      "$@" > "$bld.configure.log" 2>&1 \
    || { cat "$bld.configure.log" >&2; fail "configuring $src failed"; }
  # The package must come from the install prefix, never from the build tree.
  grep -qx "kiln_DIR:PATH=$KILN_PREFIX/$KILN_LIBDIR/cmake/kiln" "$bld/CMakeCache.txt" \
    || fail "$src did not find kiln in $KILN_PREFIX: $(grep '^kiln_DIR' "$bld/CMakeCache.txt")"
}

# Builds a consumer project, log in $bld.build.log: consumer_build BUILD
consumer_build() {
  local bld=$1
  "$KILN_CMAKE" --build "$bld" -j2 > "$bld.build.log" 2>&1 \
    || { cat "$bld.build.log" >&2; fail "building $bld failed"; }
}

#!/usr/bin/env bash
# Formats every C++ and CUDA source with .clang-format (Google style, 100 columns), or with
# --check lists the files that are not formatted and fails (scripts/test.sh runs the check).
# clang-format is Debian's (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.inc')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "format: ${#bad[@]} file(s) differ from .clang-format; run scripts/format.sh:" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
  exit 0
fi
clang-format -i "${files[@]}"

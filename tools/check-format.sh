#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source differs from what clang-format makes of it with the checked-in .clang-format
# (ctest format_check; `tools/check-format.sh --fix` rewrites the files instead).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | grep -v '^\.dev/')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
else
  clang-format --dry-run --Werror "${files[@]}"
  echo "format_check: ${#files[@]} files formatted as .clang-format says"
fi

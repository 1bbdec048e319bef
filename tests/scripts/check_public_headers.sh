#!/usr/bin/env bash
# The installed API is include/symmoe alone (CMakeLists.txt installs that folder): every header there compiles on
# its own against it (plus the generated version.hpp), so none reaches an internal header of src/ (warp roles,
# compiled-kernel tables, scratch layouts), which a retune may change.
# Usage: check_public_headers.sh CXX GENERATED_INCLUDE_DIR [CUDA_INCLUDE_DIR]; without a CUDA include directory the
# headers that include a CUDA header are skipped (named).
set -euo pipefail
cxx=$1 generated=$2 cuda=${3:-}
cd "$(dirname "$0")/../.."
mapfile -t headers < <(git ls-files 'include/symmoe/*.hpp')
flags=(-std=c++20 -fsyntax-only -x c++ -I include -I "$generated")
[ -n "$cuda" ] && flags+=(-isystem "$cuda")
failed=0 checked=0
for h in "${headers[@]}"; do
  if [ -z "$cuda" ] && grep -q '#include <cuda' "$h"; then
    echo "skipped (no CUDA headers): $h"
    continue
  fi
  if ! echo "#include \"${h#include/}\"" | "$cxx" "${flags[@]}" -; then
    echo "not self-contained against include/ alone: $h"
    failed=1
  fi
  checked=$((checked + 1))
done
echo "public headers: $checked compiled on their own"
exit $failed

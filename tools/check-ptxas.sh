#!/usr/bin/env bash
# CUDA compiler launcher of the symmoe_cuda library (CMakeLists.txt, option SYMMOE_CHECK_SPILLS): runs the compile
# given as arguments (e.g. `ccache nvcc ... -Xptxas=-v ...`) and fails it when ptxas reports, for any kernel or
# device function, register spills or a stack frame (local memory): the shipped kernels keep everything in
# registers and shared memory. The object file of a failing compile is removed, so the next build fails again.
# usage: check-ptxas.sh [--show] <compiler command...>    (--show: print the whole ptxas -v report)
set -uo pipefail
show=0
if [ "${1:-}" = "--show" ]; then
  show=1
  shift
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>"$log"
rc=$?
# The ptxas -v report: "Compiling entry function 'F'" or "Function properties for F", then
# "N bytes stack frame, N bytes spill stores, N bytes spill loads".
if [ "$show" = 1 ]; then
  cat "$log" >&2
else
  grep -v -E "^ptxas info|bytes stack frame|^    Compile time" "$log" >&2
fi
[ "$rc" -ne 0 ] && exit "$rc"
# Known exceptions, each with its byte limits: tools/ptxas-known-spills.txt (a kernel listed there still fails when
# it spills more than listed, and every entry names what removes it).
known="$(dirname "$0")/ptxas-known-spills.txt"
bad=$(awk '
  FNR == NR {
    if ($0 !~ /^[[:space:]]*(#|$)/) { n++; pat[n] = $1; max_stack[n] = $2; max_stores[n] = $3; max_loads[n] = $4 }
    next
  }
  /Compiling entry function/ { fn = $0; sub(/.*function \047/, "", fn); sub(/\047.*/, "", fn) }
  /Function properties for/ { fn = $0; sub(/.*Function properties for /, "", fn) }
  /bytes stack frame/ {
    stack = $1; stores = $5; loads = $9
    if (stack + 0 == 0 && stores + 0 == 0 && loads + 0 == 0) next
    for (i = 1; i <= n; ++i)
      if (fn == pat[i] && stack + 0 <= max_stack[i] && stores + 0 <= max_stores[i] && loads + 0 <= max_loads[i]) next
    print "  " fn ": " $0
  }' "$known" "$log")
if [ -n "$bad" ]; then
  out=""
  prev=""
  for arg in "$@"; do
    [ "$prev" = "-o" ] && out=$arg
    prev=$arg
  done
  [ -n "$out" ] && rm -f "$out"
  echo "check-ptxas: register spills or local memory (stack frame) in kernels of ${out:-this object}:" >&2
  echo "$bad" | sed 's/^ *\([^:]*\): */  \1\n      /' >&2
  echo "check-ptxas: the shipped kernels must keep their state in registers and shared memory (CMake option" \
       "SYMMOE_CHECK_SPILLS; ptxas -v numbers above)" >&2
  exit 1
fi
exit 0

#!/usr/bin/env bash
# On the GPU machine: profiles `symmoe run` (the fused layer, checked against composed) and checks that symmoe's
# NVTX ranges (domain "symmoe": moe.fused.forward, moe.composed.*, ep.*, gemm.*) were recorded. Nsight Systems when
# installed (range summary), else Nsight Compute (kernels profiled only inside the moe.fused.forward range).
# Exit 0 when a range is found; the profiler's report is in OUT_DIR.
# usage: tools/nvtx-check.sh [symmoe binary, default .dev/bin/symmoe] [OUT_DIR, default $OUT or /tmp]
set -euo pipefail
bin=${1:-.dev/bin/symmoe}
out=${2:-${OUT:-/tmp}}
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$out"
if command -v nsys >/dev/null; then
  nsys profile -t cuda,nvtx -o "$out/symmoe-run" --force-overwrite true "$bin" run --reps 3 > "$out/nsys-run.log" 2>&1
  { nsys stats -q --report nvtx_sum "$out/symmoe-run.nsys-rep" 2>/dev/null ||
    nsys stats -q --report nvtxsum "$out/symmoe-run.nsys-rep"; } | tee "$out/nvtx-ranges.txt"
  grep -q "moe.fused.forward" "$out/nvtx-ranges.txt" && echo "nvtx-check: symmoe ranges found (Nsight Systems)"
elif command -v ncu >/dev/null; then
  # With an include filter ncu profiles only kernels launched inside the range: one profiled kernel proves it.
  ncu --nvtx --nvtx-include "symmoe@moe.fused.forward/" --launch-count 1 --section LaunchStats \
    "$bin" run --reps 1 2>&1 | tee "$out/ncu-nvtx.txt"
  grep -q '==PROF== Profiling "' "$out/ncu-nvtx.txt" &&
    echo "nvtx-check: a kernel profiled inside symmoe@moe.fused.forward (Nsight Compute)"
else
  echo "nvtx-check: neither nsys nor ncu found"; exit 2
fi

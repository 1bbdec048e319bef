#!/usr/bin/env bash
# Runtime checks on the device machine, in one call (prints a short table last):
#   gpu_test_runtime in-process (ranks = GPUs, and 8 virtual ranks), the same under `symmoe launch -n 2`
#   (multi-process backend), and `symmoe bench p2p` (results as JSON lines under $OUT/results).
# usage: tools/device-check-runtime.sh [binary dir, default .dev/runtime]   (binaries built here, carried there)
set -u
BIN=$(realpath "${1:-.dev/runtime}")
OUT=${OUT:-/tmp/symmoe-runtime}
mkdir -p "$OUT/results"
export SYMMOE_GPU_KIND=${SYMMOE_GPU_KIND:-nvidia-h200-x2} NCCL_NVLS_ENABLE=0
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
declare -a ROWS
step() {  # step NAME LIMIT_S command...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s%N)
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  ROWS+=("$(printf '%-12s rc=%-4s %6d ms  %s' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" \
    "$(grep -hE '^\[  (PASSED|FAILED)  \]|tests? ran' "$OUT/$name"*.log 2>/dev/null | tr '\n' ' ' | cut -c1-110)")")
}
step inproc 180 "$BIN/gpu_test_runtime"
step multiproc 180 "$BIN/symmoe" launch -n 2 --timeout 170 -- sh -c \
  "\"$BIN/gpu_test_runtime\" > \"$OUT/multiproc_rank\$RANK.log\" 2>&1"
step bench 120 "$BIN/symmoe" bench p2p --out "$OUT/results"
step bench_ep8 60 "$BIN/symmoe" bench p2p --ranks 8 --sms 33 --bytes 67108864 --out "$OUT/results"
step bench_mp 90 "$BIN/symmoe" launch -n 2 --timeout 85 -- "$BIN/symmoe" bench p2p --sms 8,32,132 --out "$OUT/results"
if command -v compute-sanitizer > /dev/null; then  # bounded waits: a serialising tool fails, never hangs
  step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/gpu_test_runtime" \
    --gtest_filter='*Exchange*one_per_gpu*:*Stall*one_per_gpu*'
fi
echo "== failures =="
grep -hE '^\[  FAILED  \]|Failure|error' "$OUT"/inproc.log "$OUT"/multiproc*.log "$OUT"/bench.log | head -20
echo "== stall / stress lines =="
grep -hE '^\[(stall|stress)\]' "$OUT"/inproc.log "$OUT"/multiproc_rank0.log | cut -c1-220
echo "== p2p =="
sed -n '/^op /,$p' "$OUT/bench.log"
echo "== p2p multi-process =="
sed -n '/^op /,$p' "$OUT/bench_mp.log" | grep -E "^op|rtt|barrier| 132 "
echo "== p2p 8 virtual ranks (latencies) =="
sed -n '/^op /,$p' "$OUT/bench_ep8.log" | grep -E "^op|rtt|barrier"
echo "== memcheck =="
tail -3 "$OUT/memcheck.log" 2>/dev/null
echo "== summary =="
printf '%s\n' "${ROWS[@]}"
# Few files come back: one archive of the logs, plus the result lines.
tar -C "$OUT" -czf "$OUT/logs.tar.gz" --remove-files $(cd "$OUT" && ls *.log gpus.txt 2>/dev/null)

#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool): every carried GPU test binary, then the requested benchmarks,
# then prints a short summary table last. All output goes to $OUT/device.log and bench JSON lines to $OUT/results/
# (the device tool returns at most 8 files, so everything shares one log).
# usage: tools/device-check.sh [bin dir] [bench args ...]     e.g. tools/device-check.sh .dev/bin "p2p" "gemm --reps 10"
# Set SYMMOE_TESTS="runtime gemm" to run only those gpu_test_* binaries. On several GPUs it also runs the runtime
# test under the multi-process backend (`symmoe launch`), and always the main job `symmoe run` (SYMMOE_RUN_ARGS).
# Every command is bounded by SYMMOE_CHECK_TIMEOUT seconds (default 300).
set -uo pipefail
bin=${1:-.dev/bin}
shift || true
out=${OUT:-./device-out}
mkdir -p "$out/results"
log="$out/device.log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
num_gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
export SYMMOE_GPU_KIND=${SYMMOE_GPU_KIND:-nvidia-h200$([ "$num_gpus" -gt 1 ] && echo "-x$num_gpus")}
# The commit recorded in result lines: tools/pack-device.sh writes it next to the binaries.
[ -z "${SYMMOE_COMMIT:-}" ] && [ -f "$bin/COMMIT" ] && SYMMOE_COMMIT=$(cat "$bin/COMMIT")
export SYMMOE_COMMIT=${SYMMOE_COMMIT:-unknown}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> "$log" 2>&1
summary=()
for t in "$bin"/gpu_test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  if [ -n "${SYMMOE_TESTS:-}" ] && ! echo " $SYMMOE_TESTS " | grep -q " ${name#gpu_test_} "; then continue; fi
  s=$(now)
  echo "===== $name" >> "$log"
  timeout "${SYMMOE_CHECK_TIMEOUT:-300}" "$t" --gtest_color=no > "$out/current.log" 2>&1
  rc=$?
  cat "$out/current.log" >> "$log"
  line=$(grep -E "^\[  (PASSED|FAILED)  \]" "$out/current.log" | tr '\n' ' ')
  summary+=("$(printf '%-26s rc=%-3s %6ss  %s' "$name" "$rc" "$(elapsed "$s")" "$line")")
  if [ $rc -ne 0 ]; then grep -E "Failure|error:|FAILED|Expected|Which is|actual" "$out/current.log" | head -25; fi
done
rm -f "$out/current.log"
if [ "$num_gpus" -gt 1 ] && [ -x "$bin/gpu_test_runtime" ] && \
   { [ -z "${SYMMOE_TESTS:-}" ] || echo " $SYMMOE_TESTS " | grep -q " runtime "; }; then
  s=$(now)
  echo "===== multi-process: symmoe launch -n $num_gpus -- gpu_test_runtime" >> "$log"
  timeout "${SYMMOE_CHECK_TIMEOUT:-300}" "$bin/symmoe" launch -n "$num_gpus" -- sh -c \
    "$bin/gpu_test_runtime --gtest_color=no > $out/mp_rank\$RANK.log 2>&1"
  rc=$?
  for f in "$out"/mp_rank*.log; do echo "--- $f" >> "$log"; cat "$f" >> "$log"; done
  line=$(cat "$out"/mp_rank*.log | grep -E "^\[  (PASSED|FAILED)  \]" | tr '\n' ' ')
  rm -f "$out"/mp_rank*.log
  summary+=("$(printf '%-26s rc=%-3s %6ss  %s' "gpu_test_runtime (launch)" "$rc" "$(elapsed "$s")" "$line")")
fi
s=$(now)
echo "===== symmoe run ${SYMMOE_RUN_ARGS:-}" >> "$log"
# shellcheck disable=SC2086
timeout "${SYMMOE_CHECK_TIMEOUT:-300}" "$bin/symmoe" run ${SYMMOE_RUN_ARGS:-} > "$out/run.log" 2>&1
rc=$?
cat "$out/run.log" >> "$log"
tail -25 "$out/run.log"
rm -f "$out/run.log"
summary+=("$(printf '%-26s rc=%-3s %6ss' "symmoe run ${SYMMOE_RUN_ARGS:-}" "$rc" "$(elapsed "$s")")")
for b in "$@"; do
  s=$(now)
  echo "===== bench $b" >> "$log"
  # shellcheck disable=SC2086
  timeout "${SYMMOE_CHECK_TIMEOUT:-300}" "$bin/symmoe" bench $b --out "$out/results" >> "$log" 2>&1
  rc=$?
  summary+=("$(printf '%-26s rc=%-3s %6ss' "bench $b" "$rc" "$(elapsed "$s")")")
done
echo
echo "== symmoe device check: $num_gpus GPU(s), $SYMMOE_GPU_KIND, $(date -u +%F' '%TZ) =="
for l in "${summary[@]}"; do echo "$l"; done

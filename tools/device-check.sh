#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool): every carried GPU test binary, then the requested benchmarks,
# then prints a short summary table last. All output goes to $OUT/device.log and bench JSON lines to $OUT/results/
# (the device tool returns at most 8 files, so everything shares one log).
# usage: tools/device-check.sh [bin dir] [bench args ...]     e.g. tools/device-check.sh .dev/bin "p2p" "gemm --quick"
# Set SYMMOE_TESTS="runtime gemm" to run only those gpu_test_* binaries.
set -uo pipefail
bin=${1:-.dev/bin}
shift || true
out=${OUT:-./device-out}
mkdir -p "$out/results"
log="$out/device.log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
num_gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
export SYMMOE_GPU_KIND=${SYMMOE_GPU_KIND:-nvidia-h200$([ "$num_gpus" -gt 1 ] && echo "-x$num_gpus")}
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
  "$t" --gtest_color=no > "$out/current.log" 2>&1
  rc=$?
  cat "$out/current.log" >> "$log"
  line=$(grep -E "^\[  (PASSED|FAILED)  \]" "$out/current.log" | tr '\n' ' ')
  summary+=("$(printf '%-26s rc=%-3s %6ss  %s' "$name" "$rc" "$(elapsed "$s")" "$line")")
  if [ $rc -ne 0 ]; then grep -E "Failure|error:|FAILED|Expected|Which is|actual" "$out/current.log" | head -25; fi
done
rm -f "$out/current.log"
for b in "$@"; do
  s=$(now)
  echo "===== bench $b" >> "$log"
  # shellcheck disable=SC2086
  "$bin/symmoe" bench $b --out "$out/results" >> "$log" 2>&1
  rc=$?
  summary+=("$(printf '%-26s rc=%-3s %6ss' "bench $b" "$rc" "$(elapsed "$s")")")
done
echo
echo "== symmoe device check: $num_gpus GPU(s), $SYMMOE_GPU_KIND, $(date -u +%F' '%TZ) =="
for l in "${summary[@]}"; do echo "$l"; done

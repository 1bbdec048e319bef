#!/usr/bin/env bash
# The libtorch extension symmoe._torch_ep in ONE device call (1 GPU is enough; repository root), each step bounded:
#   build     pip install --no-build-isolation . (run_device.sh's build step; SYMMOE_SKIP_BUILD=1 reuses an
#             installed symmoe)
#   ext       python/tests_gpu/build_torch_ext.sh: compile against the installed torch, install next to symmoe,
#             check that symmoe chooses it
#   pytest    test_ep_single_gpu.py (every test on both eager paths) and test_ep_torch_ext.py (the two paths
#             bitwise) and the CPU tests
#   timing    ep_host_breakdown.py (1 process, v3 FP8, 128 tokens/rank): python_pair, ext_pair (and its dispatch /
#             combine halves), native_out_pair, the extension's allocations alone (ext_alloc_raw / ext_alloc /
#             ext_alloc_py) and what is left (ext_rest), and the issue-14 check (eager pair within 10 us of the
#             C++ call)
# and prints one line per step, then the timing table.
# usage: bash python/tests_gpu/run_torch_ext.sh
# Logs: $OUT/torch_ext/<step>.log. Bounds (seconds): SYMMOE_STEP_TIMEOUT per step (default 300).
set -uo pipefail
out=${OUT:-./device-out}/torch_ext
mkdir -p "$out"
step_timeout=${SYMMOE_STEP_TIMEOUT:-300}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1
py=python3
summary=()
failed=0

step() {  # step NAME CMD...: CMD bounded by step_timeout, output to $out/NAME.log (its tail on failure)
  local name=$1 s rc
  shift
  s=$(date +%s)
  timeout "$step_timeout" "$@" > "$out/$name.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    failed=1
    echo "----- $name failed (rc=$rc), last lines of $out/$name.log:"
    tail -30 "$out/$name.log"
  fi
  summary+=("$(printf '%-7s rc=%-3s %4ss  %s' "$name" "$rc" "$(($(date +%s) - s))" \
    "$(grep -E '(passed|failed|error)s? in |built in|loaded and chosen|within 10 us' "$out/$name.log" | tail -2 |
      tr '\n' ' ' | cut -c1-170)")")
  return $rc
}

if [ "${SYMMOE_SKIP_BUILD:-0}" != 1 ]; then
  step build env SYMMOE_PY_STEPS=none bash python/tests_gpu/run_device.sh /nonexistent
fi
step ext bash python/tests_gpu/build_torch_ext.sh
step pytest "$py" -m pytest -q -p no:cacheprovider -rs python/tests python/tests_gpu/test_ep_single_gpu.py \
  python/tests_gpu/test_ep_torch_ext.py
step timing "$py" -m torch.distributed.run --standalone --nproc-per-node 1 python/tests_gpu/ep_host_breakdown.py \
  --shape v3 --tokens 128

echo
echo "== symmoe._torch_ep on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%F' '%TZ)"
for l in "${summary[@]}"; do echo "$l"; done
echo
grep -E "ElasticBuffer host time|_pair|ext_|torch_|symmoe_python|within" "$out/timing.log" 2>/dev/null || echo "(no timing output)"
exit $failed

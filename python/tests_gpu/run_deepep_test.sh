#!/usr/bin/env bash
# DeepEP's own V2 test, tests/elastic/test_ep.py (DeepEP main, commit dd758ca), run UNMODIFIED against symmoe on
# one GPU (one process: --num-processes 1), with `import deep_ep` resolving to a shim package whose __init__ is
# `from symmoe import *` and whose utils/ are DeepEP's own deep_ep/utils/*.py. Then symmoe's own Python EP tests.
# Prints a pass/fail table last (one line per configuration; a configuration passes when the test exits 0 after
# its 144 cases, FP8 and BF16 alike: the test loops over payload dtype, handle copy, alignment, biases and streams).
#
# usage (repository root, a GPU machine with torch and nvcc):
#   bash python/tests_gpu/run_deepep_test.sh [configuration names...]
# carry: .dev/deepep (DeepEP's test and utils, git-ignored: never committed). Prepare it on the build machine with
#   R=<DeepEP git dir>; mkdir -p .dev/deepep/src/tests/elastic .dev/deepep/src/deep_ep/utils
#   git -C $R show dd758ca:tests/elastic/test_ep.py > .dev/deepep/src/tests/elastic/test_ep.py
#   for f in $(git -C $R ls-tree --name-only dd758ca deep_ep/utils/); do git -C $R show dd758ca:$f > .dev/deepep/src/$f; done
# Configurations (default: all but perf, in the order default pytest masked cpusync0 det masked-cs0 det-cpusync0
# det-masked no-multi-red):
#   default      --do-cpu-sync 1 (DeepEP's default)        cpusync0     --do-cpu-sync 0
#   det          --deterministic                           det-cpusync0 --deterministic --do-cpu-sync 0
#   masked       --masked-ratio 0.5                        masked-cs0   --masked-ratio 0.5 --do-cpu-sync 0
#   det-masked   --deterministic --masked-ratio 0.5        no-multi-red --allow-multiple-reduction 0
#   perf         default with DeepEP's kineto timing on: not a pass/fail check (bench_kineto looks for DeepEP's two
#                kernels, dispatch_impl and dispatch_copy_epilogue_impl, and divides by their times; symmoe runs one
#                fused kernel of another name, so the test stops with ZeroDivisionError in its first timing print)
#   pytest       python/tests (CPU) and python/tests_gpu/test_ep_single_gpu.py
# Every configuration except perf sets EP_USE_NVIDIA_TOOLS=1, DeepEP's own switch that makes bench_kineto return
# without profiling: the performance section's code still runs (its extra dispatch/combine calls are skipped), the
# timing needs DeepEP's kernel names (dispatch_impl, combine_impl, ...), which symmoe's kernels do not have.
# Environment: SYMMOE_DEEPEP_ARGS extra arguments for every run (e.g. "--num-tokens 1024 --hidden 4096" for a
# quick pass; default: DeepEP's defaults, 4096 tokens, hidden 7168, top-6 of 256 experts); SYMMOE_SKIP_BUILD=1 to
# reuse an installed symmoe (a warm machine); SYMMOE_STEP_TIMEOUT seconds per configuration (default 420);
# SYMMOE_DEEPEP_PORT: the base of the MASTER_PORTs (default 29611; give parallel runs of this script their own);
# SYMMOE_DEADLINE: no configuration starts after that many seconds from the start (default none), so the table
# still prints inside the caller's limit. Logs: $OUT/deepep/<config>.log, $OUT/build.log; the table is also
# written line by line to $OUT/deepep/summary.txt.
set -uo pipefail
out=${OUT:-./device-out}
mkdir -p "$out/deepep"
py=python3
src=.dev/deepep/src
step_timeout=${SYMMOE_STEP_TIMEOUT:-420}
deadline=${SYMMOE_DEADLINE:-0}
extra_args=${SYMMOE_DEEPEP_ARGS:-}
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(default pytest masked cpusync0 det masked-cs0 det-cpusync0 det-masked no-multi-red)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1 EP_SUPPRESS_NCCL_CHECK=1
t0=$(date +%s)
summary=()

if [ ! -f "$src/tests/elastic/test_ep.py" ] || [ ! -f "$src/deep_ep/utils/refs.py" ]; then
  echo "no DeepEP test at $src (carry .dev/deepep; see the header of this script)"
  exit 2
fi

# ---- build and install symmoe exactly as run_device.sh does (its build step only) ----
if [ "${SYMMOE_SKIP_BUILD:-0}" != 1 ]; then
  SYMMOE_PY_STEPS=none bash python/tests_gpu/run_device.sh /nonexistent > "$out/deepep/build-step.log" 2>&1
fi
if ! (cd /tmp && "$py" -c "import symmoe, torch; print('symmoe', symmoe.__file__, 'torch', torch.__version__)") \
    > "$out/deepep/import.log" 2>&1; then
  echo "----- symmoe does not import after the build:"
  tail -30 "$out/deepep/import.log"
  tail -30 "$out/deepep/build-step.log" 2>/dev/null
  grep -E -i "error|fatal" "$out/build.log" 2>/dev/null | head -20
  exit 1
fi
cat "$out/deepep/import.log"

# ---- the shim package: deep_ep = symmoe + DeepEP's own utils ----
shim=$(mktemp -d /tmp/deepep-shim.XXXXXX)
mkdir -p "$shim/deep_ep/utils"
cp "$src"/deep_ep/utils/*.py "$shim/deep_ep/utils/"
cat > "$shim/deep_ep/__init__.py" <<'EOF'
"""`import deep_ep` for DeepEP's tests: symmoe under DeepEP's name (import symmoe as deep_ep), plus DeepEP's utils."""
import symmoe as _symmoe
from symmoe import *  # noqa: F401,F403
from symmoe import ElasticBuffer, EPHandle, EventOverlap, EventHandle, topk_idx_t  # noqa: F401


def __getattr__(name):
    return getattr(_symmoe, name)
EOF
cat > "$shim/deep_ep/_C.py" <<'EOF'
"""What DeepEP's utils import from deep_ep._C at import time (EventHandle); nothing else is provided."""
from symmoe import EventHandle  # noqa: F401


def __getattr__(name):
    raise AttributeError(f"deep_ep._C.{name}: DeepEP's C++ runtime is not part of the symmoe shim")
EOF
cp "$src/tests/elastic/test_ep.py" "$shim/test_ep.py"
if ! cmp -s "$src/tests/elastic/test_ep.py" "$shim/test_ep.py"; then echo "copy of test_ep.py differs"; exit 1; fi

# run_config NAME ARGS...: one test_ep.py run; passes when it exits 0 and ran all its cases.
port=${SYMMOE_DEEPEP_PORT:-29611}  # the test's MASTER_PORT is port + 1, + 2, ... (distinct per parallel script)
run_config() {
  local name=$1
  shift
  local log="$out/deepep/$name.log" s rc cases tools=1
  [ "$name" = perf ] && tools=0
  s=$(date +%s)
  port=$((port + 1))
  # shellcheck disable=SC2086
  (cd "$shim" && MASTER_PORT=$port EP_USE_NVIDIA_TOOLS=$tools PYTHONPATH="$shim" timeout "$step_timeout" \
    "$py" test_ep.py --num-processes 1 $extra_args "$@") > "$log" 2>&1
  rc=$?
  cases=$(grep -c "> Testing with" "$log")
  if [ $rc -ne 0 ]; then
    echo "----- $name failed (rc=$rc, $cases cases started), last lines:"
    grep -v "^\s*$" "$log" | tail -25
  fi
  summary+=("$(printf '%-13s %-4s rc=%-3s %3s cases %4ss  %s' "$name" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" \
    "$rc" "$cases" "$(($(date +%s) - s))" "$*")")
}

: > "$out/deepep/summary.txt"
for c in "${configs[@]}"; do
  if [ "$deadline" -gt 0 ] && [ $(($(date +%s) - t0)) -ge "$deadline" ]; then
    summary+=("$(printf '%-13s SKIP deadline of %ss reached' "$c" "$deadline")")
    continue
  fi
  case "$c" in
    default) run_config default --do-cpu-sync 1 ;;
    cpusync0) run_config cpusync0 --do-cpu-sync 0 ;;
    det) run_config det --deterministic ;;
    det-cpusync0) run_config det-cpusync0 --deterministic --do-cpu-sync 0 ;;
    masked) run_config masked --masked-ratio 0.5 ;;
    masked-cs0) run_config masked-cs0 --masked-ratio 0.5 --do-cpu-sync 0 ;;
    det-masked) run_config det-masked --deterministic --masked-ratio 0.5 ;;
    no-multi-red) run_config no-multi-red --allow-multiple-reduction 0 ;;
    perf) run_config perf --do-cpu-sync 1 ;;
    pytest)
      s=$(date +%s)
      timeout "$step_timeout" "$py" -m pytest -q -p no:cacheprovider python/tests \
        python/tests_gpu/test_ep_single_gpu.py > "$out/deepep/pytest.log" 2>&1
      rc=$?
      [ $rc -ne 0 ] && { echo "----- pytest failed (rc=$rc):"; tail -40 "$out/deepep/pytest.log"; }
      summary+=("$(printf '%-13s %-4s rc=%-3s %4ss  %s' pytest "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "$rc" \
        "$(($(date +%s) - s))" "$(grep -E '(passed|failed|error)' "$out/deepep/pytest.log" | tail -1)")")
      ;;
    *) summary+=("$(printf '%-13s ?    unknown configuration' "$c")") ;;
  esac
  echo "${summary[-1]}" >> "$out/deepep/summary.txt"
done
rm -rf "$shim"

echo
echo "== DeepEP tests/elastic/test_ep.py (dd758ca, unmodified) with import symmoe as deep_ep, 1 GPU," \
  "$(date -u +%F' '%TZ), $(($(date +%s) - t0)) s; extra args: '${extra_args}' =="
for l in "${summary[@]}"; do echo "$l"; done

#!/usr/bin/env bash
# The Python package's GPU half in ONE device call (1 or more GPUs; torchrun steps use min(2, GPUs) processes; run
# from the repository root), most important first:
#   build    pip install --no-build-isolation . (only the extension symmoe._C and its libraries; all cores)
#   pytest   python/tests (CPU) and python/tests_gpu (one GPU: EP bitwise vs the golden model; fused layer vs fp32
#            torch, bitwise vs composed, graph capture)
#   mega-mp  torchrun mega_torchrun_check.py: the fused layer over 2 processes (vs torch, vs composed, graph)
#   deep-ep  torchrun deep_ep_style.py: a DeepEP V2-style script with `import symmoe as deep_ep`
#   mp       torchrun ep_torchrun_check.py, BF16 and FP8 (two processes, bitwise vs the golden model)
#   graph    torchrun ep_graph_timing.py: CUDA-graph capture of dispatch+combine from Python (replay == eager),
#            then dispatch+combine times through Python and a cProfile of the eager loop
#   bench    the C++ `symmoe bench ep` at the same point (v3, FP8, 128 tokens/rank), same run
#   mega-ex  torchrun examples/mega_moe.py (fused layer vs torch, eager and graph times)
#   mega-e4  torchrun examples/mega_moe.py --weights fp4 (the same with FP4 weights: fp8_fp4_mega_moe)
#   mega-fl  torchrun mega_torchrun_check.py --shape flash (the Flash shape, 64 tokens/rank)
#   example  torchrun examples/ep_dispatch_combine.py (BF16; ex-fp8: --fp8)
# and prints last: Python vs C++ per SM count, then one line per step.
# usage: bash python/tests_gpu/run_device.sh [symmoe CLI] [dir holding nccl.h, used when the machine has none]
#   e.g. (carry .dev/py3)  bash python/tests_gpu/run_device.sh .dev/py3/symmoe .dev/py3/include
# Prepare .dev/py3 (git-ignored) on the build machine first:
#   cmake --build <build> --target symmoe && mkdir -p .dev/py3/include && cp <build>/symmoe .dev/py3/ &&
#   cp /usr/local/cuda/include/nccl.h .dev/py3/include/
# 2026-11-30, nvidia-h200-x2: 172 s in all (build 31 s), every step passed; the header came from torch's NCCL wheel.
# Logs: $OUT/device.log (every step), $OUT/build.log, $OUT/results/*.jsonl. Bounds (seconds): SYMMOE_BUILD_TIMEOUT
# (build, default 300), SYMMOE_STEP_TIMEOUT (each other step, 150), SYMMOE_DEADLINE (no step starts after that many
# seconds from the start, so the tables still print inside the caller's limit; default none). SYMMOE_PY_STEPS="example
# ex-fp8" runs only the named steps (after the build).
set -uo pipefail
cli=${1:-.dev/py3/symmoe}
carried_include=${2:-.dev/py3/include}
out=${OUT:-./device-out}
mkdir -p "$out/results"
log="$out/device.log"
step_timeout=${SYMMOE_STEP_TIMEOUT:-150}
deadline=${SYMMOE_DEADLINE:-0}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1
num_gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
export SYMMOE_GPU_KIND=${SYMMOE_GPU_KIND:-nvidia-h200$([ "$num_gpus" -gt 1 ] && echo "-x$num_gpus")}
py=python3
num_procs=$(( num_gpus < 2 ? num_gpus : 2 ))  # one process per GPU, two at most (one on a 1-GPU machine)
torchrun=("$py" -m torch.distributed.run --standalone --nproc-per-node "$num_procs")
summary=()
t0=$(date +%s)

# step NAME CMD...: runs CMD bounded by step_timeout, output to the log (and its tail to stdout on failure).
step() {
  local name=$1
  shift
  local s rc
  s=$(date +%s)
  if [ -n "${SYMMOE_PY_STEPS:-}" ] && ! echo " $SYMMOE_PY_STEPS " | grep -q " $name "; then
    summary+=("$(printf '%-9s skipped: not in SYMMOE_PY_STEPS' "$name")")
    return 0
  fi
  if [ "$deadline" -gt 0 ] && [ $((s - t0)) -ge "$deadline" ]; then
    summary+=("$(printf '%-9s skipped: deadline of %ss reached' "$name" "$deadline")")
    return 0
  fi
  echo "===== $name: $*" >> "$log"
  timeout "$step_timeout" "$@" > "$out/step.log" 2>&1
  rc=$?
  cat "$out/step.log" >> "$log"
  if [ $rc -ne 0 ]; then
    echo "----- $name failed (rc=$rc), last lines:"
    tail -25 "$out/step.log"
  fi
  summary+=("$(printf '%-9s rc=%-3s %4ss  %s' "$name" "$rc" "$(($(date +%s) - s))" \
    "$(grep -E '(passed|failed|error)s? in |bitwise OK|replays bitwise|rel\. error|checks passed|FAILED' \
    "$out/step.log" | tail -2 | tr '\n' ' ' | cut -c1-170)")")
  rm -f "$out/step.log"
  return $rc
}

{
  echo "== environment"
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader
  "$py" --version
  "$py" -m pip list 2>/dev/null | grep -i -E "^(torch|pybind|scikit|cmake|numpy|pytest|ninja|nvidia-nccl)"
  command -v nvcc && nvcc --version | tail -2
  gcc --version | head -1
} > "$out/env.log" 2>&1
cat "$out/env.log" | tee -a "$log"

# NCCL for the build: the headers and the library torch uses (pip wheel nvidia-nccl-*), else the system's, else
# the carried header; CMake's own search (next to the toolkit, /usr/include) is overridden only where needed.
export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
wheel_nccl=$("$py" -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); \
print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')" 2>/dev/null)
cuda_include=$(dirname "$CUDACXX")/../include
nccl_inc=""
for d in "$wheel_nccl/include" "$cuda_include" /usr/include /usr/local/cuda/include "$carried_include"; do
  if [ -f "$d/nccl.h" ]; then nccl_inc=$(cd "$d" && pwd); break; fi
done
nccl_lib=""
for f in "$wheel_nccl/lib/libnccl.so.2" $(ldconfig -p 2>/dev/null | awk '/libnccl\.so(\.2)? /{print $NF}'); do
  if [ -f "$f" ]; then nccl_lib=$f; break; fi
done
echo "NCCL: header dir '${nccl_inc}', library '${nccl_lib}' (wheel: '${wheel_nccl}')" | tee -a "$log"
cmake_args=""
[ -n "$nccl_inc" ] && cmake_args+=" -DNCCL_INCLUDE_DIR=$nccl_inc"
[ -n "$nccl_lib" ] && cmake_args+=" -DNCCL_LIBRARY=$nccl_lib"

s=$(date +%s)
CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) timeout "${SYMMOE_BUILD_TIMEOUT:-300}" \
  "$py" -m pip install --no-build-isolation --no-deps --no-cache-dir -v . > "$out/build.log" 2>&1
rc=$?
summary+=("$(printf '%-9s rc=%-3s %4ss  %s' build "$rc" "$(($(date +%s) - s))" "pip install --no-build-isolation .")")
if [ $rc -ne 0 ]; then
  echo "----- build failed (rc=$rc):"
  grep -E -i "error|fatal|CMake Error|not found" "$out/build.log" | head -30
  tail -30 "$out/build.log"
else
  cd /tmp && "$py" -c "import symmoe, sys; print('installed:', symmoe.__file__, symmoe._nccl_preload.wheel_nccl_path())" \
    | tee -a "$log"
  cd - > /dev/null || exit 1
  step pytest "$py" -m pytest -q -p no:cacheprovider -s python/tests python/tests_gpu
  step mega-mp "${torchrun[@]}" python/tests_gpu/mega_torchrun_check.py --shape small --tokens 64
  step deep-ep "${torchrun[@]}" python/tests_gpu/deep_ep_style.py
  step mp "${torchrun[@]}" python/tests_gpu/ep_torchrun_check.py --dtypes bf16,fp8
  step graph "${torchrun[@]}" python/tests_gpu/ep_graph_timing.py --shape v3 --tokens 128 --sms 8,16,24,32 \
    --out "$out/results" --profile
fi
if [ -x "$cli" ]; then  # right after the Python timing: same machine, same run
  step bench "$cli" bench ep --shapes v3 --tokens 128 --sms 8,16,24,32 --out "$out/results"
else
  summary+=("bench     skipped: no symmoe CLI at $cli")
fi
if [ $rc -eq 0 ]; then
  step mega-ex "${torchrun[@]}" python/examples/mega_moe.py
  step mega-e4 "${torchrun[@]}" python/examples/mega_moe.py --weights fp4
  step mega-fl "${torchrun[@]}" python/tests_gpu/mega_torchrun_check.py --shape flash --tokens 64
  step example "${torchrun[@]}" python/examples/ep_dispatch_combine.py
  step ex-fp8 "${torchrun[@]}" python/examples/ep_dispatch_combine.py --fp8
fi

echo
echo "== dispatch+combine, v3 FP8, 128 tokens/rank, $SYMMOE_GPU_KIND, $(date -u +%F' '%TZ): Python vs C++ (us) =="
"$py" - "$out/results" <<'EOF'
import glob, json, os, sys
d = sys.argv[1]
cpp, pyt = {}, {}
for f in glob.glob(os.path.join(d, "*-ep.jsonl")):
    if os.path.basename(f) == "python-ep.jsonl":
        continue
    for line in open(f):
        r = json.loads(line)
        if r.get("shape") == "v3" and r.get("tokens") == 128:
            cpp.setdefault(r["sms"], {})[r["op"]] = r["time_us"]
for f in glob.glob(os.path.join(d, "python-ep.jsonl")):
    for line in open(f):
        r = json.loads(line)
        pyt[r["sms"]] = r
print(f"{'sms':>4} {'cpp_d+c':>8} {'py_graph_d+c':>12} {'py_graph_pair':>13} {'py_eager':>9} {'py_host':>8} "
      f"{'_C_host':>8} {'graph-cpp':>9} {'eager-cpp':>9}  eager within 10us")
for sms in sorted(set(cpp) | set(pyt)):
    c, p = cpp.get(sms, {}), pyt.get(sms)
    c_sum = c["dispatch"] + c["combine"] if "dispatch" in c and "combine" in c else float("nan")
    if p is None:
        print(f"{sms:>4} {c_sum:>8.2f}   (no Python timing)")
        continue
    g = p["graph_dispatch_us"] + p["graph_combine_us"]
    diff = p["eager_pair_us"] - c_sum
    print(f"{sms:>4} {c_sum:>8.2f} {g:>12.2f} {p['graph_pair_us']:>13.2f} {p['eager_pair_us']:>9.2f} "
          f"{p['host_pair_us']:>8.2f} {p.get('host_native_pair_us', float('nan')):>8.2f} {g - c_sum:>9.2f} "
          f"{diff:>9.2f}  {'yes' if abs(diff) <= 10 else 'NO'}")
EOF
echo
echo "== symmoe Python GPU check: $num_gpus GPU(s), $SYMMOE_GPU_KIND, $(($(date +%s) - t0)) s =="
for l in "${summary[@]}"; do echo "$l"; done

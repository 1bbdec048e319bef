#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool): every carried GPU test binary, then the requested benchmarks,
# then prints a short summary table last. All output goes to $OUT/device.log and bench JSON lines to $OUT/results/
# (the device tool returns at most 8 files, so everything shares one log).
# usage: tools/device-check.sh [bin dir] [bench args ...]     e.g. tools/device-check.sh .dev/bin "p2p" "gemm --reps 10"
# Set SYMMOE_TESTS="runtime gemm" to run only those gpu_test_* binaries. On several GPUs it also runs the runtime
# test under the multi-process backend (`symmoe launch`), and always the main job `symmoe run` (SYMMOE_RUN_ARGS).
# Every command is bounded by SYMMOE_CHECK_TIMEOUT seconds (default 300).
#
# Sanitizer mode: tools/device-check.sh --sanitize [bin dir]   (instead of the tests and benchmarks above)
#   compute-sanitizer memcheck over every gpu_test_* binary, racecheck and synccheck over the fused, EP and GEMM
#   binaries, each run with a gtest filter that keeps it small (sanitize_filter below; the binaries stay whole) and
#   a time cap (sanitize_cap), each cap cut to what is left of SYMMOE_SANITIZE_BUDGET seconds (default 540), so the
#   whole mode stays under ~9 minutes on one H200 (a run with < 10 s left is skipped, rc "skip"). Prints a table
#   (binary, tool, errors, rc, seconds) last and writes it as markdown to $OUT/sanitizer.md (commit it under
#   bench/results/). errors: the sanitizer's own count (ERROR SUMMARY / RACECHECK SUMMARY errors); rc 124: the run
#   hit its cap.
#   Fused kernel under memcheck: memcheck runs the fused kernel about 16x slower (one traced 1-token call: 890 us
#   against 57 us), so MegaFewSms (8 cases x 3 fused calls + composed + golden) does not finish in minutes; memcheck
#   of gpu_test_mega runs MegaSanitize (ONE 1-token call on 4 CTAs, untraced then traced, with a polling wait that
#   prints the timeout records and exits with status 3 on a stall instead of hanging) and MegaErrors: ~5 s, 0 errors
#   (bench/results/2026-12-01-session7-device-checks.md). racecheck runs the one-call cases too (MegaSanitize,
#   MegaFp4Sanitize; sanitize_filter). Run this mode alone on the GPU: beside other work the caps are hit.
set -uo pipefail
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then sanitize=1; shift; fi
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

# ---- sanitizer mode ----
# The gtest arguments of one (binary, tool) run: small cases only. memcheck: every binary, its heavy tests left out
# (all-float casts, 100k barriers, model shapes, 1,000 graph replays); racecheck / synccheck: one small case of the
# fused (gpu_test_mega: MegaFewSms, the fused kernel on 4 CTAs, 1 and 8 tokens, fused + composed + golden; racecheck:
# one call on 4 CTAs: MegaSanitize.OneCallOneToken, .OneCallBlockM128 (512 tokens) and MegaFp4Sanitize (BLOCK_M 64),
# since racecheck of MegaFewSms took 90 s in session 6 and did not finish in 180 s alone in session 8, nor
# MegaFp4FewSms in 150 s), EP
# (bad-id dispatch and a good dispatch) and GEMM (one masked bf16 GEMM and one masked SwiGLU GEMM, each on every
# core; racecheck also contiguous GEMMs with few CTAs, so the one-batch kernels run many tiles per CTA and reuse their
# B-scale buffers, and with a three-m-block expert, so clusters of 2 pair its last m-block along N) suites. Empty:
# the whole binary. A run whose filter matches no test is reported with rc 98.
sanitize_filter() {  # binary tool
  case "$2:$1" in
    memcheck:gpu_test_formats) echo "--gtest_filter=-GpuFormats.CastsMatchHardwareCvtOnAllFloats" ;;
    memcheck:gpu_test_runtime) echo "--gtest_filter=-*Stress100k*" ;;
    memcheck:gpu_test_gemm) echo "--gtest_filter=GroupedGemm.MaskedOneTokenPerExpert:GroupedGemm.MaskedDecodeSizes:GroupedGemmL1.MaskedSwigluFp8" ;;
    memcheck:gpu_test_ep) echo "--gtest_filter=EpInputErrors.*:EpRepeat.*" ;;
    memcheck:gpu_test_gemm_fp4) echo "--gtest_filter=GroupedGemmFp4.MaskedDecodeSizes:GroupedGemmFp4L1.MaskedSwigluFp8:GroupedGemmFp4.BadArgumentsRaiseBeforeWriting" ;;
    memcheck:gpu_test_mega) echo "--gtest_filter=MegaSanitize.*:MegaErrors.*" ;;
    memcheck:gpu_test_moe) echo "--gtest_filter=Ranks/MoeComposed.*/ranks1_host_weights:MoeComposedErrors.*" ;;
    memcheck:gpu_test_soak) echo "--seconds=5" ;;
    memcheck:gpu_test_mega_fp4) echo "--gtest_filter=MegaFp4FewSms.*:MegaFp4Errors.*" ;;
    memcheck:gpu_test_moe_fp4) echo "--gtest_filter=Ranks/MoeComposedFp4.*/ranks1_host_fp4:MoeComposedFp4Errors.*" ;;
    racecheck:gpu_test_gemm) echo "--gtest_filter=GroupedGemm.MaskedOneTokenPerExpert:GroupedGemmL1.MaskedSwigluFp8:GroupedGemm.ContiguousSkewedUe8m0ScalesAlignment64:GroupedGemm.ContiguousOddAndEmptyExperts" ;;
    racecheck:gpu_test_mega) echo "--gtest_filter=MegaSanitize.OneCallOneToken:MegaSanitize.OneCallBlockM128" ;;
    *:gpu_test_mega) echo "--gtest_filter=MegaFewSms.*" ;;
    racecheck:gpu_test_mega_fp4) echo "--gtest_filter=*MegaFp4Sanitize.*" ;;
    *:gpu_test_mega_fp4) echo "--gtest_filter=MegaFp4FewSms.*" ;;
    *:gpu_test_ep) echo "--gtest_filter=EpInputErrors.*" ;;
    *:gpu_test_gemm) echo "--gtest_filter=GroupedGemm.MaskedOneTokenPerExpert:GroupedGemmL1.MaskedSwigluFp8" ;;
    *:gpu_test_gemm_fp4) echo "--gtest_filter=GroupedGemmFp4.MaskedDecodeSizes" ;;
    *) echo "" ;;
  esac
}
# compute-sanitizer's own arguments per (binary, tool) run. racecheck of the fused binaries checks the fused kernel
# only (kernel names containing mega_moe): the composed layer those tests compare against runs the EP and GEMM
# kernels, which the racecheck runs of gpu_test_ep and gpu_test_gemm cover.
sanitize_tool_args() {  # binary tool
  case "$2:$1" in
    racecheck:gpu_test_mega | racecheck:gpu_test_mega_fp4) echo "--kernel-name kns=mega_moe" ;;
    *) echo "" ;;
  esac
}
# Seconds per run (binary tool), each cut to what is left of the mode's budget. Measured (session 6): the memcheck
# runs outside the fused binaries 1-7 s each, racecheck of gpu_test_mega 90-120 s, the rest a few seconds; session 16:
# racecheck of MegaFp4Sanitize's 64-row case 44 s, its 16-row case over 60 s.
sanitize_cap() {
  case "$2:$1" in
    memcheck:gpu_test_formats | memcheck:gpu_test_runtime) echo 25 ;;
    memcheck:gpu_test_mega) echo 60 ;;
    memcheck:gpu_test_moe) echo 45 ;;
    memcheck:gpu_test_soak) echo 30 ;;
    racecheck:gpu_test_gemm) echo 90 ;;
    racecheck:gpu_test_mega) echo 120 ;;
    racecheck:gpu_test_mega_fp4) echo 240 ;;
    memcheck:*) echo 40 ;;
    *) echo 32 ;;
  esac
}
if [ $sanitize -eq 1 ]; then
  command -v compute-sanitizer > /dev/null || { echo "compute-sanitizer not found" | tee -a "$log"; exit 2; }
  # The fused binary first; the budget then cuts the runs at the end.
  runs=()
  [ -x "$bin/gpu_test_mega" ] && runs+=("gpu_test_mega memcheck")
  for t in "$bin"/gpu_test_*; do
    [ -x "$t" ] && [ "$(basename "$t")" != gpu_test_mega ] && runs+=("$(basename "$t") memcheck")
  done
  # (gpu_test_racecheck_slot is a reproducer of racecheck's own limits: memcheck only.)
  for name in gpu_test_mega gpu_test_mega_fp4 gpu_test_ep gpu_test_gemm gpu_test_gemm_fp4; do
    [ -x "$bin/$name" ] && runs+=("$name racecheck" "$name synccheck")
  done
  budget=${SYMMOE_SANITIZE_BUDGET:-540}
  mode_start=$(now)
  rows=()
  for r in "${runs[@]}"; do
    read -r name tool <<< "$r"
    if [ -n "${SYMMOE_TESTS:-}" ] && ! echo " $SYMMOE_TESTS " | grep -q " ${name#gpu_test_} "; then continue; fi
    args=$(sanitize_filter "$name" "$tool")
    tool_args=$(sanitize_tool_args "$name" "$tool")
    cap=$(sanitize_cap "$name" "$tool")
    left=$(awk -v a="$mode_start" -v b="$(now)" -v t="$budget" 'BEGIN { printf "%d", t - (b - a) }')
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 10 ]; then
      echo "===== skipped (budget of $budget s spent): compute-sanitizer --tool $tool $name $args" >> "$log"
      rows+=("$(printf '%s|%s|%s|%s|%s|%s|%s' "$name" "$tool" "-" "skip" "0.0" "" "$args")")
      continue
    fi
    s=$(now)
    echo "===== compute-sanitizer --tool $tool $tool_args $name $args (cap $cap s)" >> "$log"
    # The fused tests' wait bound (SYMMOE_TIMEOUT_MS) raised: under racecheck one fused FP4 call takes over 40 s.
    # shellcheck disable=SC2086
    SYMMOE_TIMEOUT_MS=200000 timeout -k 5 "$cap" \
      compute-sanitizer --tool "$tool" $tool_args --error-exitcode 99 --print-limit 20 \
      "$bin/$name" --gtest_color=no $args > "$out/current.log" 2>&1
    rc=$?
    cat "$out/current.log" >> "$log"
    errors=$(grep -oE "(ERROR SUMMARY: [0-9]+ error|\([0-9]+ errors)" "$out/current.log" | grep -oE "[0-9]+" | tail -1)
    tests=$(grep -E "^\[  (PASSED|FAILED)  \]" "$out/current.log" | head -1 | sed 's/^\[ *//; s/ *\] */ /')
    # A filter that matches no test checks nothing: report it as a failure (rc 98), not as 0 errors.
    if [ "$rc" -eq 0 ] && echo "$tests" | grep -qE "^PASSED 0 tests"; then rc=98; fi
    rows+=("$(printf '%s|%s|%s|%s|%s|%s|%s' "$name" "$tool" "${errors:-?}" "$rc" "$(elapsed "$s")" "${tests:-}" \
      "${tool_args:+$tool_args }$args")")
    if [ "$rc" -ne 0 ]; then grep -E "Invalid|Race|Barrier|ERROR|Failure|FAILED|Timeout|timed out|STALL|timeout record|\[\+ *[0-9.]+ s\]" "$out/current.log" | head -25; fi
  done
  rm -f "$out/current.log"
  md="$out/sanitizer.md"
  {
    echo "# compute-sanitizer, $SYMMOE_GPU_KIND, $(date -u +%F' '%TZ), commit $SYMMOE_COMMIT"
    echo
    echo "\`tools/device-check.sh --sanitize\`: memcheck over every GPU test binary, racecheck and synccheck over the"
    echo "fused, EP, GEMM and FP4 GEMM binaries, each with the gtest arguments shown (small cases) and a time cap (rc 124 = cap hit)."
    echo
    echo "| binary | tool | errors | rc | seconds | tests | arguments |"
    echo "|---|---|---|---|---|---|---|"
    for row in "${rows[@]}"; do
      IFS='|' read -r name tool errors rc secs tests args <<< "$row"
      echo "| $name | $tool | $errors | $rc | $secs | $tests | \`${args:-(whole binary)}\` |"
    done
  } > "$md"
  echo
  echo "== symmoe sanitizer check: $num_gpus GPU(s), $SYMMOE_GPU_KIND, $(date -u +%F' '%TZ) (table: $md) =="
  printf '%-18s %-10s %7s %4s %8s  %s\n' binary tool errors rc seconds tests
  for row in "${rows[@]}"; do
    IFS='|' read -r name tool errors rc secs tests _ <<< "$row"
    printf '%-18s %-10s %7s %4s %8s  %s\n' "$name" "$tool" "$errors" "$rc" "$secs" "$tests"
  done
  exit 0
fi

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

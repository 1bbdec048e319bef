// Grouped FP8 GEMM plan: tile shape, swap-A/B, cluster, registers, pipeline stages.
#include <cmath>
#include <sstream>

#include "plan/gemm_kernels.hpp"
#include "plan/model.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {
namespace {

// Per-tile fixed cost in "columns" for the BLOCK_N choice: a tile's prologue/epilogue and the token tile it reloads
// cost about as much as 32 extra weight rows (with it the model picks 128 x 256 over 128 x 128 on every grouped
// shape, as bench gemm measures; docs/notes/plan.md).
constexpr int kTileOverheadColumns = 32;

// NOTES: a tile_buffer kernel (plan.hpp) is the planner's choice where one matches, on a tie with the same tile:
// 128 x 256 bf16 with 3 stages + tile buffer is 1.02-1.07x faster than 4 stages + slab staging on the grouped and
// dense shapes; the stage it gives up costs nothing (docs/notes/plan.md has the measurement).
constexpr bool kPreferTileBuffer = true;

// The kernels of one (epilogue, weights) kind; the filters below apply within it.
struct KernelKind {
  GemmEpilogue epilogue;
  GemmWeights weights;
};
std::string kind_name(const KernelKind& kind) {
  return std::string(gemm_epilogue_name(kind.epilogue)) + "/" + gemm_weights_name(kind.weights);
}

// The kernels the planner runs only when their core is pinned: the swap-AB core's (but see planned_core below: FP4
// decode).
bool pinned_only(const GemmKernelShape& kernel) { return kernel.core == GemmCore::kSwapAB; }

// tile_buffer: 1 / -1 / 0 as GemmPins::tile_buffer; core: 1 / 2 / 3 / 0 as GemmPins::core. core 0 (the planner's
// choice) is the two-halves and one-batch cores without their pinned_only kernels.
constexpr int kSwapAbPin = static_cast<int>(GemmCore::kSwapAB) + 1;
bool kernel_matches(const GemmKernelShape& kernel, KernelKind kind, int block_m, int block_n, int cluster, int stages,
                    int tile_buffer = 0, int core = 0) {
  return kernel.epilogue == kind.epilogue && kernel.weights == kind.weights &&
         (!block_m || kernel.block_m == block_m) && (!block_n || kernel.block_n == block_n) &&
         (!cluster || kernel.cluster_size == cluster) && (!stages || kernel.num_stages == stages) &&
         (!tile_buffer || kernel.tile_buffer == (tile_buffer > 0)) &&
         (core ? static_cast<int>(kernel.core) + 1 == core : !pinned_only(kernel));
}

bool any_kernel(KernelKind kind, int block_m, int block_n, int cluster, int stages, int tile_buffer = 0, int core = 0) {
  for (const GemmKernelShape& kernel : kGemmKernels)
    if (kernel_matches(kernel, kind, block_m, block_n, cluster, stages, tile_buffer, core)) return true;
  return false;
}

std::string compiled_list(KernelKind kind) {
  std::ostringstream os;
  for (const GemmKernelShape& kernel : kGemmKernels)
    if (kernel.epilogue == kind.epilogue && kernel.weights == kind.weights)
      os << " " << kernel.block_m << "x" << kernel.block_n << "/s" << kernel.num_stages << "/c" << kernel.cluster_size
         << (kernel.tile_buffer ? "/tb" : "")
         << (kernel.core != GemmCore::kTwoHalves ? std::string("/") + gemm_core_name(kernel.core) : "");
  return os.str();
}

// Which cores a pin check looked among: " (core=swap-ab)", or for no core pin the planner's own two.
std::string core_scope(int core) {
  return core ? std::string(" (core=") + gemm_core_name(static_cast<GemmCore>(core - 1)) + ")"
              : " (two-halves and one-batch cores; swap-ab only with core=3)";
}

long long expected_m_blocks(double m_expected, int block_m) {
  return static_cast<long long>(std::ceil((m_expected > 1 ? m_expected : 1.0) / block_m));
}

GemmPlan make_plan(double m_expected, int n, int k, int num_experts, int num_sms, const GemmKernelShape& kernel) {
  GemmPlan p;
  p.m_per_expert_expected = m_expected;
  p.n = n, p.k = k, p.num_experts = num_experts, p.epilogue = kernel.epilogue, p.weights = kernel.weights;
  p.block_m = kernel.block_m, p.block_n = kernel.block_n;
  p.core = kernel.core;
  const bool swap_ab = kernel.core == GemmCore::kSwapAB;
  // Swap-AB: each warpgroup's WGMMA M is half the tile's weight rows (one or two 64-row WGMMA tiles), its N the
  // block_m tokens.
  p.wg_split_channels = swap_ab || kernel.block_m == hopper::kWgmmaM;
  p.wg_tile_m = swap_ab ? kernel.block_n / 2 : hopper::kWgmmaM;
  p.wg_tile_n = swap_ab ? kernel.block_m : p.wg_split_channels ? kernel.block_n / 2 : kernel.block_n;
  p.num_math_warpgroups = 2;
  p.producer_registers = 40;  // FP8 and FP4 alike (kernels/gemm/grouped_gemm_fp4_kernel.cuh)
  p.math_registers = detail::math_registers_for(p.num_math_warpgroups, 1, p.producer_registers);
  // One-batch core: a partial accumulator as wide as one WGMMA batch, the warpgroup tile or (256 columns) half of it
  // (kernels/gemm/core_math.cuh). Swap-AB: as wide as the warpgroup tile (kernels/gemm/swap_ab_math.cuh) + 32 for the
  // FP4 weights' A fragments converted in registers.
  const int final_acc = p.wg_tile_m * p.wg_tile_n / hopper::kThreadsPerWarpgroup;
  p.math_registers_needed = swap_ab ? 2 * final_acc + (kernel.weights == GemmWeights::kFp4 ? 32 : 0) + 40
                            : kernel.core == GemmCore::kOneBatch
                                ? final_acc + final_acc / gemm_core_num_halves(kernel.block_m, kernel.block_n) + 40
                                : math_registers_estimate(p.wg_tile_m, p.wg_tile_n);
  p.num_threads = (1 + p.num_math_warpgroups) * hopper::kThreadsPerWarpgroup;
  p.cluster_size = kernel.cluster_size;
  p.tile_buffer = kernel.tile_buffer;
  p.num_sms = num_sms / p.cluster_size * p.cluster_size;
  p.num_stages = kernel.num_stages;
  p.smem_per_stage = gemm_stage_smem_bytes(p.block_m, p.block_n, p.weights);
  p.b_scales_smem = gemm_b_scales_in_smem(p.weights, false);
  p.smem_fixed =
      gemm_fixed_smem_bytes(p.block_n, p.tile_buffer, p.weights, p.b_scales_smem, p.core, p.epilogue, p.block_m);
  p.smem_bytes = gemm_smem_bytes(p.block_m, p.block_n, p.num_stages, p.tile_buffer, p.weights, p.b_scales_smem, p.core,
                                 p.epilogue);
  p.num_tiles_expected =
      static_cast<long long>(num_experts) * expected_m_blocks(m_expected, p.block_m) * ceil_div(n, p.block_n);
  p.num_waves_expected = static_cast<int>(ceil_div<long long>(p.num_tiles_expected, p.num_sms > 0 ? p.num_sms : 1));
  return p;
}

}  // namespace

GemmPlan plan_grouped_gemm(double m_per_expert_expected, int n, int k, int num_experts, int num_sms,
                           GemmEpilogue epilogue, const PlanOverrides& overrides, const GemmPins& pins,
                           GemmWeights weights) {
  SYMMOE_CHECK(m_per_expert_expected >= 0, "plan", "grouped GEMM: m_per_expert_expected must be >= 0, got ",
               m_per_expert_expected);
  SYMMOE_CHECK(n > 0 && k > 0 && k % hopper::kBlockK == 0, "plan", "grouped GEMM: need n > 0 and k a positive ",
               "multiple of 128, got n=", n, " k=", k);
  SYMMOE_CHECK(num_experts >= 1, "plan", "grouped GEMM: num_experts must be >= 1, got ", num_experts);
  SYMMOE_CHECK(num_sms >= 1, "plan", "grouped GEMM: num_sms must be >= 1, got ", num_sms);
  const bool swiglu = epilogue == GemmEpilogue::kSwigluFp8;
  const KernelKind kind{epilogue, weights};
  SYMMOE_CHECK(!swiglu || n % 256 == 0, "plan",
               "grouped GEMM: the SwiGLU epilogue needs n = 2 * intermediate a multiple of 256, got n=", n);

  // Pins and overrides: each must name a compiled kernel of the pinned core, or of the planner's cores (the one place
  // they apply).
  SYMMOE_CHECK(pins.core >= 0 && pins.core <= kSwapAbPin, "plan",
               "core must be 1 (two-halves), 2 (one-batch), 3 (swap-ab) or 0 (planner's choice), got ", pins.core);
  SYMMOE_CHECK(!swiglu || pins.core != kSwapAbPin || any_kernel(kind, 0, 0, 0, 0, 0, kSwapAbPin), "plan",
               "core=3 (swap-ab): no swap-AB kernel with the SwiGLU epilogue is compiled (bf16 output only); pin core "
               "1, 2 or 0");
  const int stages = detail::forced_stages(overrides);
  const int forced_block_m = pins.block_m ? pins.block_m : overrides.block_m;
  // The swap-AB core is the planner's own choice for FP4 weights at decode sizes (kImbalanceFactor x the expected rows
  // per expert within kSwapAbFp4MaxTileRows) when every pin and override names one of its kernels: the weights are
  // converted in registers, two independent 64-row WGMMA chains per warpgroup (256-row tiles): 0.80-0.81x the
  // two-halves core's time at 1-16 rows per expert, 0.86-1.0x at 32; at 64 rows its 64-token tile measured 0.96x and
  // 1.07x in two runs, so the two-halves core keeps it (masked decode, H200, docs/notes/gemm.md). FP8 weights: no
  // gain measured (0.98-1.01x), so the other cores.
  // SYMMOE_BLOCK_M (overrides.block_m, which the fused layer's plan reads too) at a tile height only the swap-AB core
  // compiles (16 and 32 with FP8 weights) runs that core, so one setting gives the fused and the composed layer the
  // same tile height; a bench pin (pins.block_m) still needs core=3.
  const bool override_swap_ab_only = !pins.core && !pins.block_m && overrides.block_m &&
                                     !any_kernel(kind, overrides.block_m, 0, 0, 0, 0, 0) &&
                                     any_kernel(kind, overrides.block_m, 0, 0, 0, 0, kSwapAbPin);
  constexpr int kSwapAbFp4MaxTileRows = 32;
  const int planned_core =
      pins.core ? pins.core
      : override_swap_ab_only ||
              (weights == GemmWeights::kFp4 && m_per_expert_expected * kImbalanceFactor <= kSwapAbFp4MaxTileRows &&
               any_kernel(kind, forced_block_m, pins.block_n, pins.cluster_size, stages, pins.tile_buffer, kSwapAbPin))
          ? kSwapAbPin
          : 0;
  SYMMOE_CHECK(!stages || any_kernel(kind, 0, 0, 0, stages, 0, planned_core), "plan", "SYMMOE_NUM_STAGES=", stages,
               " matches no compiled grouped-GEMM kernel", core_scope(planned_core), " (", kind_name(kind), ":",
               compiled_list(kind), ")");
  SYMMOE_CHECK(!forced_block_m || any_kernel(kind, forced_block_m, 0, 0, 0, 0, planned_core), "plan",
               pins.block_m ? "block_m=" : "SYMMOE_BLOCK_M=", forced_block_m,
               " matches no compiled grouped-GEMM kernel", core_scope(planned_core), " (", kind_name(kind), ":",
               compiled_list(kind), ")");
  SYMMOE_CHECK(!pins.block_n || any_kernel(kind, forced_block_m, pins.block_n, 0, stages, 0, planned_core), "plan",
               "block_n=", pins.block_n, " matches no compiled grouped-GEMM kernel", core_scope(planned_core), " (",
               kind_name(kind), ":", compiled_list(kind), ")");
  SYMMOE_CHECK(pins.cluster_size == 0 || pins.cluster_size == 1 || pins.cluster_size == 2, "plan",
               "cluster_size must be 1 or 2 (0 = planner's choice), got ", pins.cluster_size);
  SYMMOE_CHECK(!pins.cluster_size || any_kernel(kind, 0, 0, pins.cluster_size, 0, 0, planned_core), "plan",
               "cluster_size=", pins.cluster_size, " matches no compiled grouped-GEMM kernel", core_scope(planned_core),
               " (", kind_name(kind), ":", compiled_list(kind), ")");
  SYMMOE_CHECK(pins.cluster_size <= num_sms, "plan", "cluster_size ", pins.cluster_size, " exceeds num_sms ", num_sms);
  SYMMOE_CHECK(pins.tile_buffer >= -1 && pins.tile_buffer <= 1, "plan",
               "tile_buffer must be 1 (on), -1 (off) or 0 (planner's choice), got ", pins.tile_buffer);
  // BLOCK_M: the ladder (model.hpp) over the block_m values compiled for the pinned core (swap-AB: 16, 32, 64), or
  // for the planner's cores (64, 128), smallest first.
  int block_m = forced_block_m;
  if (!block_m) {
    int ladder[kNumGemmKernels];
    int num_ladder = 0;
    for (const int candidate : {16, 32, 64, 128})
      if (any_kernel(kind, candidate, pins.block_n, pins.cluster_size, stages, pins.tile_buffer, planned_core))
        ladder[num_ladder++] = candidate;
    SYMMOE_CHECK(num_ladder > 0, "plan", "no compiled grouped-GEMM kernel for ", kind_name(kind),
                 " with block_n=", pins.block_n, " cluster_size=", pins.cluster_size, " stages=", stages,
                 " tile_buffer=", pins.tile_buffer, core_scope(planned_core), " (compiled:", compiled_list(kind), ")");
    block_m = detail::pick_block_m(kImbalanceFactor * m_per_expert_expected, ladder, num_ladder);
  }
  // Core: the one-batch core for FP8 weights, bf16 and SwiGLU output, where k fits its per-tile B-scale buffer: its
  // 128-row tiles (per-warpgroup TMA-store epilogue, unrolled K loop: 0.88-0.99x the two-halves core's time on every
  // full-tile bf16 bench case; its warpgroup without valid rows issues no WGMMA on partial ones) and its split-N
  // 64 x 256 tiles (0.89-1.00x the two-halves core's 64 x 256 time on every bench case pinned to 64 rows; H200,
  // docs/notes/gemm.md). Elsewhere (FP4 weights, larger k) the two-halves core; the swap-AB core as planned above;
  // pins override.
  const bool k_fits_one_batch = k <= kGemmCoreMaxKBlocks * hopper::kBlockK;  // its per-tile B-scale buffer
  const bool one_batch_fits =
      k_fits_one_batch && any_kernel(kind, block_m, pins.block_n, pins.cluster_size, stages, pins.tile_buffer, 2);
  const int core = planned_core ? planned_core : one_batch_fits ? 2 : 1;
  SYMMOE_CHECK(any_kernel(kind, 0, 0, 0, 0, 0, core), "plan", "core=", gemm_core_name(static_cast<GemmCore>(core - 1)),
               " matches no compiled grouped-GEMM kernel (", kind_name(kind), ":", compiled_list(kind), ")");
  SYMMOE_CHECK(core != 2 || k_fits_one_batch, "plan",
               "grouped GEMM: the one-batch core stages a tile's B scales for at most ", kGemmCoreMaxKBlocks,
               " K blocks (k <= ", kGemmCoreMaxKBlocks * hopper::kBlockK, "), got k=", k);
  // Cluster: the one-batch core runs clusters of 2 (B multicast to the neighbouring m-blocks of one expert; an odd
  // count's last m-block paired along N, scheduler.cuh) wherever an expert is expected to hold two or more m-blocks.
  // H200, steady state (3 s of back-to-back launches per case, docs/notes/gemm.md "Session 21"): cluster 2 takes
  // 0.71-0.77x cluster 1's time at 192 rows per expert, 0.90 at 386, 0.93-0.96 at 256, 0.98 at 384 and 0.99-1.02
  // at 1536-8192 (one expert or few: the weight traffic is small there). Single CTAs at one m-block per expert
  // (nothing to share). The two-halves core runs single CTAs (its cluster-2 kernels were 6-10% slower,
  // docs/notes/plan.md).
  const long long m_blocks = expected_m_blocks(m_per_expert_expected, block_m);
  const int cluster = pins.cluster_size ? pins.cluster_size
                      : core == 2 && m_blocks >= 2 && num_sms >= 2 &&
                              any_kernel(kind, block_m, pins.block_n, 2, stages, pins.tile_buffer, core)
                          ? 2
                          : 1;

  // BLOCK_N: fewest (waves x tile cost) among the compiled kernels left; a tile costs ~ block_n +
  // kTileOverheadColumns; ties go to the wider tile.
  GemmPlan best;
  bool have_best = false;
  long long best_cost = 0;
  std::ostringstream candidates;
  for (const GemmKernelShape& kernel : kGemmKernels) {
    if (!kernel_matches(kernel, kind, block_m, pins.block_n, cluster, stages, pins.tile_buffer, core)) continue;
    GemmPlan p = make_plan(m_per_expert_expected, n, k, num_experts, num_sms, kernel);
    const long long cost = static_cast<long long>(p.num_waves_expected) * (p.block_n + kTileOverheadColumns);
    const long long last_wave_tiles =
        p.num_tiles_expected - static_cast<long long>(p.num_waves_expected - 1) * p.num_sms;
    candidates << (candidates.tellp() > 0 ? "; " : "") << p.block_m << "x" << p.block_n << "/s" << p.num_stages
               << (p.tile_buffer ? "/tb" : "") << ": waves " << p.num_waves_expected << ", last wave "
               << (p.num_sms > 0 ? 100 * last_wave_tiles / p.num_sms : 0) << "%, cost " << cost;
    const bool same_tile_preferred = cost == best_cost && p.block_n == best.block_n &&
                                     p.tile_buffer == kPreferTileBuffer && best.tile_buffer != kPreferTileBuffer;
    if (!have_best || cost < best_cost || (cost == best_cost && p.block_n > best.block_n) || same_tile_preferred)
      best = p, have_best = true, best_cost = cost;
  }
  SYMMOE_CHECK(have_best, "plan", "no compiled grouped-GEMM kernel for ", kind_name(kind), " block_m=", block_m,
               " block_n=", pins.block_n, " cluster=", cluster, " stages=", stages, " tile_buffer=", pins.tile_buffer,
               " core=", gemm_core_name(static_cast<GemmCore>(core - 1)), " (compiled:", compiled_list(kind), ")");
  best.block_n_candidates = candidates.str();
  best.validate();
  return best;
}

void GemmPlan::validate() const {
  const auto where = [&] { return " in grouped GEMM plan [" + to_string() + "]"; };
  SYMMOE_CHECK(block_k == hopper::kBlockK, "plan", "block_k must be 128 (one FP8 scale block), got ", block_k, where());
  const KernelKind kind{epilogue, weights};
  bool compiled = false;
  for (const GemmKernelShape& kernel : kGemmKernels)
    compiled = compiled || kernel_matches(kernel, kind, block_m, block_n, cluster_size, num_stages,
                                          tile_buffer ? 1 : -1, static_cast<int>(core) + 1);
  SYMMOE_CHECK(compiled, "plan", "block ", block_m, "x", block_n, " stages ", num_stages, " cluster ", cluster_size,
               " is not a compiled grouped-GEMM kernel (", kind_name(kind), ":", compiled_list(kind), ")", where());
  // The two warpgroup tiles cover the block exactly, are WGMMA shapes, and hold at most one 64 x 256 fp32
  // accumulator (128 registers per thread) next to the 64-register partial accumulator. Swap-AB: WGMMA M is the
  // weight rows (channels; 64 or 2 x 64 per warpgroup), N the tokens.
  const bool swap_ab = core == GemmCore::kSwapAB;
  const bool cover = swap_ab             ? (wg_split_channels && 2 * wg_tile_m == block_n && wg_tile_n == block_m)
                     : wg_split_channels ? (wg_tile_m == block_m && 2 * wg_tile_n == block_n)
                                         : (2 * wg_tile_m == block_m && wg_tile_n == block_n);
  const bool wgmma_m =
      swap_ab ? wg_tile_m % hopper::kWgmmaM == 0 && wg_tile_m <= 2 * hopper::kWgmmaM : wg_tile_m == hopper::kWgmmaM;
  SYMMOE_CHECK(cover && wgmma_m && wg_tile_n % 8 == 0 && wg_tile_n >= 8 && wg_tile_n <= hopper::kMaxWgmmaN &&
                   num_math_warpgroups == 2,
               "plan", "the two math warpgroup tiles (", wg_tile_m, " x ", wg_tile_n,
               ") must be WGMMA shapes (M = 64, swap-AB 64 or 128; N a multiple of 8 in [8, 256]) covering the block",
               where());
  SYMMOE_CHECK(epilogue != GemmEpilogue::kSwigluFp8 || block_n == 256, "plan",
               "the SwiGLU epilogue needs block_n 256 (128 intermediate channels), got ", block_n, where());
  SYMMOE_CHECK(math_registers % 8 == 0 && producer_registers % 8 == 0 &&
                   producer_registers >= hopper::kMinRegistersPerThread &&
                   math_registers <= hopper::kMaxRegistersPerThread,
               "plan", "setmaxnreg counts must be multiples of 8 in [24, 256], got math ", math_registers, " producer ",
               producer_registers, where());
  const int regs = hopper::kThreadsPerWarpgroup * (producer_registers + num_math_warpgroups * math_registers);
  SYMMOE_CHECK(regs <= hopper::kRegisterBudget, "plan", "registers per SM ", regs, " exceed the budget ",
               hopper::kRegisterBudget, where());
  SYMMOE_CHECK(math_registers_needed <= math_registers, "plan", "math warpgroup tile needs ~", math_registers_needed,
               " registers per thread, only ", math_registers, " available", where());
  SYMMOE_CHECK(num_stages >= 2, "plan", "need >= 2 pipeline stages, got ", num_stages, where());
  SYMMOE_CHECK(b_scales_smem == gemm_b_scales_in_smem(weights, false), "plan", "b_scales_smem=", b_scales_smem,
               " but gemm_b_scales_in_smem says ", gemm_b_scales_in_smem(weights, false), " for ",
               gemm_weights_name(weights), " weights", where());
  SYMMOE_CHECK(
      smem_per_stage == gemm_stage_smem_bytes(block_m, block_n, weights) &&
          smem_fixed == gemm_fixed_smem_bytes(block_n, tile_buffer, weights, b_scales_smem, core, epilogue, block_m) &&
          smem_bytes == smem_fixed + num_stages * smem_per_stage && smem_bytes <= hopper::kMaxSmemPerBlock,
      "plan", "shared memory ", smem_bytes, " B exceeds ", hopper::kMaxSmemPerBlock,
      " or disagrees with gemm_smem_bytes", where());
  SYMMOE_CHECK(cluster_size == 1 || cluster_size == 2, "plan", "cluster size must be 1 or 2, got ", cluster_size,
               where());
  SYMMOE_CHECK(num_sms >= cluster_size && num_sms % cluster_size == 0, "plan", "grid of ", num_sms,
               " CTAs is not a positive multiple of the cluster size ", cluster_size, where());
  SYMMOE_CHECK(num_threads == hopper::kThreadsPerWarpgroup * (1 + num_math_warpgroups), "plan",
               "threads must be one producer warpgroup + the math warpgroups, got ", num_threads, where());
}

// Every compiled kernel fits shared memory (checked once here, at compile time).
static_assert(
    [] {
      for (const GemmKernelShape& kernel : kGemmKernels)
        if (gemm_smem_bytes(kernel.block_m, kernel.block_n, kernel.num_stages, kernel.tile_buffer, kernel.weights,
                            gemm_b_scales_in_smem(kernel.weights, false), kernel.core,
                            kernel.epilogue) > hopper::kMaxSmemPerBlock)
          return false;
      return true;
    }(),
    "a compiled grouped-GEMM kernel does not fit 227 KiB of shared memory");

std::string GemmPlan::to_string() const {
  std::ostringstream os;
  os << "gemm m_expected=" << m_per_expert_expected << " n=" << n << " k=" << k << " experts=" << num_experts
     << " epilogue=" << gemm_epilogue_name(epilogue) << " weights=" << gemm_weights_name(weights) << " | "
     << (core == GemmCore::kSwapAB ? "tokens on WGMMA N (weights on M)" : "tokens on WGMMA M") << " BLOCK_M=" << block_m
     << " BLOCK_N=" << block_n << " BLOCK_K=" << block_k << " wg_tile=" << wg_tile_m << "x" << wg_tile_n
     << (wg_split_channels ? " (warpgroups split channels)" : " (warpgroups split tokens)")
     << " core=" << gemm_core_name(core) << " cluster=" << cluster_size << (tile_buffer ? " tile_buffer" : "")
     << (b_scales_smem ? " b_scales_smem" : "") << " | regs math " << math_registers << " (need ~"
     << math_registers_needed << ") producer " << producer_registers << " threads=" << num_threads
     << " | stages=" << num_stages << " smem=" << smem_bytes << " B (" << smem_fixed << " fixed + " << smem_per_stage
     << "/stage) | grid=" << num_sms << " tiles~" << num_tiles_expected << " waves~" << num_waves_expected;
  if (!block_n_candidates.empty())
    os << " | block_n candidates (cost = waves x (block_n + " << kTileOverheadColumns << ")): " << block_n_candidates;
  return os.str();
}

}  // namespace symmoe::plan

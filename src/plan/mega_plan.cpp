// MegaMoE plan: BLOCK_M, tiles, experts per wave, warp roles and registers, pipeline stages, workspace size.
// The heuristics: docs/design.md §9 (BLOCK_M §9.2, tiles and stages §9.3, waves §9.4, register split §9.6).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "layout/mega_roles.hpp"
#include "plan/mega_kernels.hpp"
#include "plan/model.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {
namespace {

// docs/design.md §9.4: the smallest expert count per wave that keeps every SM busy at the EXPECTED load. Fewer
// experts per wave finish L1 sooner, so L2 starts sooner (shallower pipeline, lower latency); too few leave SMs idle.
// Lower bound: num_sms / (L1 blocks of one expert), scaled by kImbalanceFactor (cold experts have fewer blocks than
// expected), then rounded up to a divisor of El so that the printed wave count (num_waves) is whole.
// NOTES: the kernel does not group experts by this count. It receives only the tile budget wave_l1_tiles
// (= this count x the expected L1 blocks of one expert) and forms the waves on the device from the received counts:
// wave w holds the experts whose actual L1 tiles start in [w, w + 1) x wave_l1_tiles (kernels/mega/scheduler.cuh),
// so waves hold different numbers of experts and cold experts do not add waves.
int experts_per_wave(int num_local_experts, int l1_blocks_per_expert, int num_sms) {
  const long long needed =
      ceil_div<long long>(static_cast<long long>(kImbalanceFactor) * num_sms, l1_blocks_per_expert);
  for (int e = 1; e <= num_local_experts; ++e)
    if (e >= needed && num_local_experts % e == 0) return e;
  return num_local_experts;
}

// "64, 128": the candidates as the SYMMOE_BLOCK_M error names them.
std::string block_m_list(const MegaBlockMs& candidates) {
  std::string s;
  for (int i = 0; i < candidates.count; ++i) s += (i ? ", " : "") + std::to_string(candidates.values[i]);
  return s;
}

// The warpgroup tiles of p.block_m's core (mega_core): tokens on WGMMA M, rows x columns; swap-AB, weight rows x
// tokens.
void set_wg_tiles(MegaPlan& p) {
  if (mega_core(p.block_m, p.weights) == GemmCore::kSwapAB) {
    p.l1_wg_tile_m = p.l2_wg_tile_m = p.l1_block_n / 2;
    p.l1_wg_tile_n = p.l2_wg_tile_n = p.block_m;
  } else {
    p.l1_wg_tile_m = p.l2_wg_tile_m = hopper::kWgmmaM;
    p.l1_wg_tile_n = p.l2_wg_tile_n = p.block_m == hopper::kWgmmaM ? 128 : 256;
  }
}

}  // namespace

double mega_block_m_rows(double expected_tokens_per_expert) {
  return expected_tokens_per_expert + kMegaBlockMSigmas * std::sqrt(expected_tokens_per_expert);
}

layout::MegaDims MegaPlan::dims() const {
  layout::MegaDims d;
  d.num_ranks = shape.num_ranks, d.num_experts = shape.num_experts, d.num_topk = shape.num_topk;
  d.hidden = shape.hidden, d.intermediate = shape.intermediate;
  d.num_max_tokens_per_rank = shape.num_max_tokens_per_rank;
  return d;
}

MegaPlan plan_mega_moe(const MoeShape& shape, int num_sms, const PlanOverrides& overrides, GemmWeights weights) {
  return plan_mega_moe(shape, num_sms, shape.num_max_tokens_per_rank, overrides, weights);
}

MegaPlan plan_mega_moe(const MoeShape& shape, int num_sms, int num_tokens, const PlanOverrides& overrides,
                       GemmWeights weights) {
  shape.validate();
  detail::check_row_counts(shape, "MegaMoE");
  SYMMOE_CHECK(num_tokens >= 0 && num_tokens <= shape.num_max_tokens_per_rank, "plan", "MegaMoE: num_tokens ",
               num_tokens, " outside [0, T_max = ", shape.num_max_tokens_per_rank, "]");
  SYMMOE_CHECK(num_sms >= 1, "plan", "MegaMoE: num_sms must be >= 1, got ", num_sms);
  SYMMOE_CHECK(weights == GemmWeights::kFp8 || weights == GemmWeights::kFp4, "plan",
               "MegaMoE: weights must be fp8 or fp4, got ", int(weights));
  SYMMOE_CHECK(shape.intermediate <= layout::kMegaMaxIntermediate, "plan", "MegaMoE: intermediate ", shape.intermediate,
               " exceeds ", layout::kMegaMaxIntermediate,
               " (the L2 arrival mask has one bit per 128 channels in 64 bits)");
  MegaPlan p;
  p.shape = shape;
  p.num_sms = num_sms;
  p.weights = weights;
  // Plan for num_tokens on every rank (T_max: the largest batch the buffers admit). The workspace depends on T_max
  // only (the pool fits every BLOCK_M candidate), so plans of different calls share one workspace.
  p.num_tokens = num_tokens;
  p.expected_tokens_per_expert = expected_tokens_per_expert(shape, std::max(num_tokens, 1));

  // ---- BLOCK_M (the one place the overrides apply): one of the compiled fused kernels of these weights ----
  const MegaBlockMs candidates = mega_block_m_candidates(weights);
  p.block_m =
      detail::pick_block_m(mega_block_m_rows(p.expected_tokens_per_expert), candidates.values, candidates.count);
  if (overrides.block_m) {
    SYMMOE_CHECK(candidates.contains(overrides.block_m), "plan", "SYMMOE_BLOCK_M must be ",
                 candidates.count > 1 ? "one of " : "", block_m_list(candidates), " for MegaMoE with ",
                 gemm_weights_name(weights), " weights (the compiled fused kernels), got ", overrides.block_m);
    p.block_m = overrides.block_m;
  }

  // ---- tiles per math warpgroup (the GEMM core's: mega_core) ----
  // L2 BLOCK_N 256 like L1, so both phases share one tile shape and one stage ring. Tokens on WGMMA M: 64 x 256 (the
  // one-batch core, FP4 the two-halves core): the warpgroups split the 256 columns (64 x 128 each; the L1 amax over the
  // tile's 128 channels crosses them through shared memory); 128 x 256 (the one-batch core): they split the rows (64 x
  // 256 each, two 128-column batches per K block sharing one partial accumulator). Swap-AB (BLOCK_M 16, 32): each
  // warpgroup runs 128 of the 256 weight rows (two 64-row WGMMA chains) x the BLOCK_M tokens; the warpgroup tile is
  // printed as weight rows x tokens.
  p.core = mega_core(p.block_m, weights);
  p.l1_block_n = 256;
  p.l2_block_n = 256;
  set_wg_tiles(p);

  // ---- waves (at the expected load; the kernel reads only wave_l1_tiles) ----
  const int num_local_experts = shape.num_local_experts();
  const int m_blocks = static_cast<int>(std::ceil(std::max(p.expected_tokens_per_expert, 1.0) / p.block_m));
  p.l1_blocks_per_expert = m_blocks * (2 * shape.intermediate / p.l1_block_n);
  p.num_experts_per_wave = experts_per_wave(num_local_experts, p.l1_blocks_per_expert, num_sms);
  if (overrides.experts_per_wave) {
    SYMMOE_CHECK(overrides.experts_per_wave <= num_local_experts && num_local_experts % overrides.experts_per_wave == 0,
                 "plan", "SYMMOE_EXPERTS_PER_WAVE=", overrides.experts_per_wave, " must divide the ", num_local_experts,
                 " local experts");
    p.num_experts_per_wave = overrides.experts_per_wave;
  }
  p.num_waves = num_local_experts / p.num_experts_per_wave;
  p.wave_l1_tiles = p.num_experts_per_wave * p.l1_blocks_per_expert;

  // ---- warp roles and registers ----
  // setmaxnreg works per warpgroup, so roles come in warpgroups. Blackwell's MegaMoE runs dispatch (48 regs),
  // MMA issue (40) and epilogue (208) warps because the accumulators live in TMEM. On Hopper the accumulators live
  // in the math warps' registers, so the math warpgroups also run the epilogues; the producer warp and the
  // dispatch warps share one data warpgroup (layout::MegaRoles: warps, register split per BLOCK_M, barriers).
  using Roles = layout::MegaRoles;
  p.num_producer_warps = Roles::kNumProducerWarps, p.num_dispatch_warps = Roles::kNumDispatchWarps;
  p.num_math_warpgroups = Roles::kNumMathWarpgroups;
  p.num_threads = Roles::kNumThreads;
  p.data_registers = Roles::kDataRegisters;
  p.math_registers = Roles::kMathRegisters;
  p.named_barriers = Roles::num_named_barriers(weights == GemmWeights::kFp4, p.core);
  SYMMOE_CHECK(p.math_registers == detail::math_registers_for(p.num_math_warpgroups, 1, p.data_registers), "plan",
               "MegaMoE: register split ", p.data_registers, "/", p.math_registers, " does not fill the SM");
  p.math_registers_needed = std::max(math_registers_estimate(p.l1_wg_tile_m, p.l1_wg_tile_n),
                                     math_registers_estimate(p.l2_wg_tile_m, p.l2_wg_tile_n));

  // ---- shared memory: the compiled kernel's stage count ----
  // The fused kernel reuses the GEMM core's shared-memory layout (stage ring; two-halves: epilogue staging, amax
  // exchange; one-batch: staging rows as its output region, the staged B scales, at BLOCK_M 64 the amax exchange;
  // mega_core_fixed_smem_bytes) and adds the per-expert counts (layout::MegaSmemCounts); its stage count is fixed by
  // the instantiation. FP4: the stages hold packed FP4 weight tiles and their codes, the E4M3 ring and the tables are
  // fixed (plan::gemm_smem_bytes).
  const int index = mega_kernel_index(p.block_m, weights);
  SYMMOE_CHECK(index >= 0, "plan", "no compiled fused kernel with BLOCK_M ", p.block_m, " and ",
               gemm_weights_name(weights), " weights");
  const MegaKernelShape* kernel = &kMegaKernels[index];
  p.smem_per_stage = gemm_stage_smem_bytes(p.block_m, p.l1_block_n, weights);
  p.smem_fixed = mega_core_fixed_smem_bytes(p.block_m, p.l1_block_n, weights) +
                 layout::MegaSmemCounts::num_bytes(shape.num_experts, num_local_experts);
  const int forced = detail::forced_stages(overrides);
  if (forced) {
    const int smem = p.smem_fixed + forced * p.smem_per_stage;
    SYMMOE_CHECK(smem <= hopper::kMaxSmemPerBlock, "plan", "SYMMOE_NUM_STAGES=", forced, " needs shared memory ", smem,
                 " B > ", hopper::kMaxSmemPerBlock);
    SYMMOE_CHECK(forced == kernel->num_stages, "plan", "SYMMOE_NUM_STAGES=", forced,
                 " matches no compiled fused kernel (BLOCK_M ", p.block_m, " with ", gemm_weights_name(weights),
                 " weights has ", kernel->num_stages, " stages)");
  }
  p.num_stages = kernel->num_stages;
  p.smem_bytes = p.smem_fixed + p.num_stages * p.smem_per_stage;

  // ---- workspace ----
  const layout::MegaLayout sizing(p.dims());
  p.pool_rows = sizing.num_pool_rows();
  p.workspace_bytes = sizing.num_bytes();
  p.validate();
  return p;
}

void MegaPlan::validate() const {
  const auto where = [&] { return " in MegaMoE plan [" + to_string() + "]"; };
  shape.validate();
  SYMMOE_CHECK(l1_block_n == 256 && l2_block_n == 256 && block_k == hopper::kBlockK, "plan",
               "L1 and L2 BLOCK_N must be 256 and BLOCK_K 128", where());
  SYMMOE_CHECK((2 * shape.intermediate) % l1_block_n == 0 && shape.hidden % 128 == 0, "plan",
               "tiles must divide 2I, H must be a multiple of 128", where());
  SYMMOE_CHECK(shape.hidden <= kMegaMaxHidden, "plan", "hidden ", shape.hidden, " exceeds the fused kernel's ",
               kMegaMaxHidden, " (two per-128 scales per lane of a pulling warp)", where());
  SYMMOE_CHECK(shape.num_topk <= kMegaMaxTopk, "plan", "top-k ", shape.num_topk, " exceeds the fused kernel's ",
               kMegaMaxTopk, " (one register row piece per lane in the combine)", where());
  MegaPlan tiles = *this;
  set_wg_tiles(tiles);
  SYMMOE_CHECK(
      core == mega_core(block_m, weights) && l1_wg_tile_m == tiles.l1_wg_tile_m && l2_wg_tile_m == tiles.l2_wg_tile_m &&
          l1_wg_tile_n == tiles.l1_wg_tile_n && l2_wg_tile_n == tiles.l2_wg_tile_n,
      "plan",
      "core and warpgroup tiles must be the GEMM core's: swap-AB 128 weight rows x BLOCK_M tokens (BLOCK_M 16, "
      "32), 64 x 128 (BLOCK_M 64) or 64 x 256 (BLOCK_M 128)",
      where());
  const int num_local_experts = shape.num_local_experts();
  SYMMOE_CHECK(num_experts_per_wave >= 1 && num_local_experts % num_experts_per_wave == 0 &&
                   num_waves * num_experts_per_wave == num_local_experts,
               "plan", "experts per wave must divide the local experts", where());
  SYMMOE_CHECK(num_producer_warps + num_dispatch_warps == 4, "plan",
               "the producer and dispatch warps must fill exactly one warpgroup", where());
  SYMMOE_CHECK(named_barriers >= 1 && named_barriers <= 16, "plan", "named barriers ", named_barriers,
               " outside [1, 16]", where());
  SYMMOE_CHECK(num_threads == hopper::kThreadsPerWarpgroup * (1 + num_math_warpgroups), "plan",
               "threads must be one data warpgroup + the math warpgroups", where());
  SYMMOE_CHECK(math_registers % 8 == 0 && data_registers % 8 == 0 && data_registers >= hopper::kMinRegistersPerThread &&
                   math_registers <= hopper::kMaxRegistersPerThread,
               "plan", "setmaxnreg counts must be multiples of 8 in [24, 256]", where());
  const int regs = hopper::kThreadsPerWarpgroup * (data_registers + num_math_warpgroups * math_registers);
  SYMMOE_CHECK(regs <= hopper::kRegisterBudget, "plan", "registers per SM ", regs, " exceed ", hopper::kRegisterBudget,
               where());
  // math_registers_needed is printed, not checked: the split is MegaRoles' and the build's ptxas -v check
  // (tools/check-ptxas.sh, no spills) is its test; the estimate's 40 for addresses and temporaries is an upper
  // guess (BLOCK_M 128's 64 x 256 tile estimates 232 and compiles without spills in 224).
  SYMMOE_CHECK(num_stages >= 2, "plan", "need >= 2 pipeline stages, got ", num_stages, where());
  SYMMOE_CHECK(smem_bytes == smem_fixed + num_stages * smem_per_stage && smem_bytes <= hopper::kMaxSmemPerBlock &&
                   smem_bytes == mega_smem_bytes(block_m, l1_block_n, num_stages, shape.num_experts,
                                                 shape.num_local_experts(), weights),
               "plan", "shared memory ", smem_bytes, " B exceeds ", hopper::kMaxSmemPerBlock, where());
  bool compiled = false;
  for (const MegaKernelShape& k : kMegaKernels)
    compiled = compiled ||
               (k.block_m == block_m && k.block_n == l1_block_n && k.num_stages == num_stages && k.weights == weights);
  SYMMOE_CHECK(compiled, "plan", "BLOCK_M ", block_m, " x ", l1_block_n, " with ", num_stages, " stages and ",
               gemm_weights_name(weights), " weights is not a compiled fused kernel", where());
  SYMMOE_CHECK(pool_rows == layout::mega_pool_rows(dims()) && pool_rows % block_m == 0, "plan",
               "pool rows must follow the layout formula and hold whole blocks", where());
}

std::string MegaPlan::to_string() const {
  std::ostringstream os;
  os << "mega " << shape.to_string() << " sms=" << num_sms << " tokens=" << num_tokens
     << " expected_tokens_per_expert=" << expected_tokens_per_expert << " | "
     << (core == GemmCore::kSwapAB ? std::string("swap-ab: tokens on WGMMA N")
                                   : std::string(gemm_core_name(core)) + ": tokens on WGMMA M")
     << " BLOCK_M=" << block_m << " L1 BLOCK_N=" << l1_block_n << " L2 BLOCK_N=" << l2_block_n << " BLOCK_K=" << block_k
     << " weights=" << gemm_weights_name(weights) << " wg_tiles L1 " << l1_wg_tile_m << "x" << l1_wg_tile_n << " L2 "
     << l2_wg_tile_m << "x" << l2_wg_tile_n << " | L1 blocks/expert~" << l1_blocks_per_expert
     << " experts/wave=" << num_experts_per_wave << " waves=" << num_waves << " wave_l1_tiles=" << wave_l1_tiles
     << " | warps: producer " << num_producer_warps << " dispatch " << num_dispatch_warps;
  os << " math " << 4 * num_math_warpgroups;
  if (weights == GemmWeights::kFp4) os << " (+ FP4 conversion)";
  os << " (threads " << num_threads << ") regs data " << data_registers << " math " << math_registers << " (estimate ~"
     << math_registers_needed << ") named barriers " << named_barriers << " | stages=" << num_stages
     << " smem=" << smem_bytes << " B (" << smem_fixed << " fixed + " << smem_per_stage
     << "/stage) | pool_rows=" << pool_rows << " workspace=" << workspace_bytes << " B";
  return os.str();
}

}  // namespace symmoe::plan

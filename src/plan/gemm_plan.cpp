// Grouped FP8 GEMM plan: tile shape, swap-A/B, cluster, registers, pipeline stages.
#include <cmath>
#include <sstream>

#include "plan/model.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {
namespace {

// Per-tile fixed cost in "columns" for the swap-A/B block_n choice: a tile's prologue/epilogue and the token tile
// it reloads cost about as much as 32 extra weight rows (a guess until bench gemm measures it).
constexpr int kTileOverheadColumns = 32;

GemmPlan make_plan(double m_expected, int n, int k, int num_experts, int num_sms, GemmEpilogue epilogue, int block_m,
                   int block_n, int forced_stages) {
  GemmPlan p;
  p.m_per_expert_expected = m_expected;
  p.n = n, p.k = k, p.num_experts = num_experts, p.epilogue = epilogue;
  p.swap_ab = detail::block_m_is_swap_ab(block_m);
  p.block_m = block_m, p.block_n = block_n;
  const detail::WarpgroupTile tile = detail::warpgroup_tile(block_m, block_n);
  p.wg_tile_m = tile.m, p.wg_tile_n = tile.n, p.wg_split_channels = tile.split_channels;
  p.num_math_warpgroups = 2;
  p.producer_registers = 40;
  p.math_registers = detail::math_registers_for(p.num_math_warpgroups, 1, p.producer_registers);
  p.math_registers_needed = math_registers_estimate(p.wg_tile_m, p.wg_tile_n);
  p.num_threads = (1 + p.num_math_warpgroups) * hopper::kThreadsPerWarpgroup;

  // Clusters of 2 pair adjacent token blocks of one expert so the weight tile is loaded once and multicast; only
  // worth it when an expert usually has >= 2 token blocks (never in swap-A/B, where the weights are unique per CTA
  // and the token tile is a few KB).
  const long long m_blocks = static_cast<long long>(std::ceil((m_expected > 1 ? m_expected : 1.0) / block_m));
  p.cluster_size = (!p.swap_ab && m_blocks >= 2 && num_sms >= 2) ? 2 : 1;
  p.num_sms = num_sms / p.cluster_size * p.cluster_size;

  p.smem_per_stage = detail::stage_smem_bytes(p.block_m, p.block_n);
  p.smem_fixed = detail::kSmemAlignSlack + detail::kSmemFixedBarriers +
                 detail::epilogue_smem_bytes(epilogue, p.block_m, p.block_n);
  p.num_stages = forced_stages ? forced_stages : detail::stages_that_fit(p.smem_fixed, p.smem_per_stage);
  p.smem_bytes = p.smem_fixed + p.num_stages * p.smem_per_stage;

  p.num_tiles_expected = static_cast<long long>(num_experts) * m_blocks * ceil_div(n, p.block_n);
  p.num_waves_expected = static_cast<int>(ceil_div<long long>(p.num_tiles_expected, p.num_sms > 0 ? p.num_sms : 1));
  return p;
}

}  // namespace

GemmPlan plan_grouped_gemm(double m_per_expert_expected, int n, int k, int num_experts, int num_sms,
                           GemmEpilogue epilogue, const PlanOverrides& overrides) {
  SYMMOE_CHECK(m_per_expert_expected >= 0, "plan", "grouped GEMM: m_per_expert_expected must be >= 0, got ",
               m_per_expert_expected);
  SYMMOE_CHECK(n > 0 && k > 0 && k % hopper::kBlockK == 0, "plan", "grouped GEMM: need n > 0 and k a positive ",
               "multiple of 128, got n=", n, " k=", k);
  SYMMOE_CHECK(num_experts >= 1, "plan", "grouped GEMM: num_experts must be >= 1, got ", num_experts);
  SYMMOE_CHECK(num_sms >= 1, "plan", "grouped GEMM: num_sms must be >= 1, got ", num_sms);
  const bool swiglu = epilogue == GemmEpilogue::kSwigluFp8;
  SYMMOE_CHECK(!swiglu || n % 256 == 0, "plan",
               "grouped GEMM: the SwiGLU epilogue needs n = 2 * intermediate a multiple of 256, got n=", n);

  // BLOCK_M: the ladder (the SwiGLU tile has 256 columns, so at most 64 token rows), then the one place the
  // override applies.
  const int num_candidates = swiglu ? detail::kGemmNumBlockMCandidates - 1 : detail::kGemmNumBlockMCandidates;
  const int forced_stages = detail::forced_stages(overrides);
  int block_m = detail::pick_block_m(m_per_expert_expected, detail::kGemmBlockMCandidates, num_candidates);
  if (overrides.block_m) {
    SYMMOE_CHECK(detail::contains(detail::kGemmBlockMCandidates, num_candidates, overrides.block_m), "plan",
                 "SYMMOE_BLOCK_M must be one of 16, 32, 64", swiglu ? "" : ", 128", " for this GEMM, got ",
                 overrides.block_m);
    block_m = overrides.block_m;
  }

  // BLOCK_N. Tokens on M: fixed by BLOCK_M (128 x 128 split by token rows, 64 x 256 split by channels). SwiGLU:
  // 256 interleaved gate/up columns = 128 intermediate channels, so the FP8 output scale is per 128 (per-64 scales
  // lost accuracy in a public Hopper port). Swap-A/B with bf16 output: 128 or 256 weight rows, chosen below.
  int candidates[2] = {0, 0};
  int num_block_n = 0;
  if (!detail::block_m_is_swap_ab(block_m))
    candidates[num_block_n++] = block_m == 128 ? 128 : 256;
  else if (swiglu)
    candidates[num_block_n++] = 256;
  else
    candidates[num_block_n++] = 128, candidates[num_block_n++] = 256;

  // Fewest (waves x tile cost) among plans with >= kPreferredMinStages stages (any valid plan if none reaches
  // it); ties go to the wider tile. A wave is num_sms tiles; a tile costs ~ block_n + kTileOverheadColumns.
  GemmPlan best;
  bool have_best = false, best_deep = false;
  long long best_cost = 0;
  for (int i = 0; i < num_block_n; ++i) {
    GemmPlan p =
        make_plan(m_per_expert_expected, n, k, num_experts, num_sms, epilogue, block_m, candidates[i], forced_stages);
    if (p.num_stages < 2 || p.smem_bytes > hopper::kMaxSmemPerBlock) continue;
    const bool deep = p.num_stages >= detail::kPreferredMinStages;
    const long long cost = static_cast<long long>(p.num_waves_expected) * (p.block_n + kTileOverheadColumns);
    const bool better = !have_best || (deep && !best_deep) ||
                        (deep == best_deep && (cost < best_cost || (cost == best_cost && p.block_n > best.block_n)));
    if (better) best = p, have_best = true, best_deep = deep, best_cost = cost;
  }
  if (!have_best)  // validate() below reports why the first candidate does not fit
    best =
        make_plan(m_per_expert_expected, n, k, num_experts, num_sms, epilogue, block_m, candidates[0], forced_stages);
  best.validate();
  return best;
}

void GemmPlan::validate() const {
  const auto where = [&] { return " in grouped GEMM plan [" + to_string() + "]"; };
  SYMMOE_CHECK(block_k == hopper::kBlockK, "plan", "block_k must be 128 (one FP8 scale block), got ", block_k, where());
  SYMMOE_CHECK(detail::contains(detail::kGemmBlockMCandidates, detail::kGemmNumBlockMCandidates, block_m) &&
                   swap_ab == detail::block_m_is_swap_ab(block_m),
               "plan", "block_m must be 16/32 (swap-A/B) or 64/128, got ", block_m, " swap_ab=", swap_ab, where());
  const detail::WarpgroupTile tile{wg_tile_m, wg_tile_n, wg_split_channels};
  SYMMOE_CHECK(detail::warpgroup_tile_ok(tile, block_m, block_n) && num_math_warpgroups == 2, "plan",
               "the two math warpgroup tiles (", wg_tile_m, " x ", wg_tile_n, ") must be WGMMA shapes (M multiple of ",
               "64, N multiple of 8 in [8, 256]) that cover the block exactly with <= ",
               detail::kMaxWarpgroupAccumulators, " accumulators per thread", where());
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
  SYMMOE_CHECK(smem_bytes == smem_fixed + num_stages * smem_per_stage && smem_bytes <= hopper::kMaxSmemPerBlock, "plan",
               "shared memory ", smem_bytes, " B exceeds ", hopper::kMaxSmemPerBlock, where());
  SYMMOE_CHECK(cluster_size == 1 || cluster_size == 2, "plan", "cluster size must be 1 or 2, got ", cluster_size,
               where());
  SYMMOE_CHECK(num_sms >= cluster_size && num_sms % cluster_size == 0, "plan", "grid of ", num_sms,
               " CTAs is not a positive multiple of the cluster size ", cluster_size, where());
  SYMMOE_CHECK(num_threads == hopper::kThreadsPerWarpgroup * (1 + num_math_warpgroups), "plan",
               "threads must be one producer warpgroup + the math warpgroups, got ", num_threads, where());
}

std::string GemmPlan::to_string() const {
  std::ostringstream os;
  os << "gemm m_expected=" << m_per_expert_expected << " n=" << n << " k=" << k << " experts=" << num_experts
     << " epilogue=" << gemm_epilogue_name(epilogue) << " | "
     << (swap_ab ? "swap-A/B (tokens on WGMMA N)" : "tokens on WGMMA M") << " BLOCK_M=" << block_m
     << " BLOCK_N=" << block_n << " BLOCK_K=" << block_k << " wg_tile=" << wg_tile_m << "x" << wg_tile_n
     << (wg_split_channels ? " (warpgroups split channels)" : " (warpgroups split tokens)")
     << " cluster=" << cluster_size << " | regs math " << math_registers << " (need ~" << math_registers_needed
     << ") producer " << producer_registers << " threads=" << num_threads << " | stages=" << num_stages
     << " smem=" << smem_bytes << " B (" << smem_fixed << " fixed + " << smem_per_stage << "/stage) | grid=" << num_sms
     << " tiles~" << num_tiles_expected << " waves~" << num_waves_expected;
  return os.str();
}

}  // namespace symmoe::plan

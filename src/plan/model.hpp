// Private cost models shared by the GEMM and MegaMoE planners: shared memory per pipeline stage, epilogue staging,
// the BLOCK_M ladder. One formula each; the plans in gemm_plan.cpp / mega_plan.cpp only combine them.
#pragma once

#include "symmoe/plan.hpp"

namespace symmoe::plan::detail {

// Deeper pipelines than 8 stages buy nothing measurable on H100-class kernels (DeepGEMM caps similarly) and eat
// the shared memory the epilogue and dispatch need.
constexpr int kMaxStages = 8;
// A plan with fewer stages than this is only taken when no candidate reaches it (TMA latency ~1 us needs ~4
// k-blocks in flight at full WGMMA rate).
constexpr int kPreferredMinStages = 4;
// Dynamic shared memory is only guaranteed 16-byte aligned; 128B-swizzled TMA tiles need 1024.
constexpr int kSmemAlignSlack = 1024;
// mbarriers outside the stage ring (tile scheduler, epilogue hand-off, dispatch pulls): one 64-byte line.
constexpr int kSmemFixedBarriers = 64;

// One stage: token tile (block_m rows x 128 B of FP8 K) + weight tile (block_n rows x 128 B) + token scales
// (fp32 per row) + weight scales (one fp32 per 128x128 block, 16-byte aligned for bulk copies) + full and empty
// mbarriers. Tiles are 1024-byte multiples for multiples of 8 rows, so stage rings stay swizzle-aligned.
inline int stage_smem_bytes(int block_m, int block_n) {
  const int tokens = block_m * hopper::kBlockK;
  const int weights = block_n * hopper::kBlockK;
  const int token_scales = align_up(block_m * 4, 16);
  const int weight_scales = align_up(ceil_div(block_n, 128) * 4, 16);
  return tokens + weights + token_scales + weight_scales + 2 * 8;
}

// Epilogue staging for a TMA/bulk store of the output tile (+ the cross-warpgroup amax exchange for FP8 output).
inline int epilogue_smem_bytes(GemmEpilogue epilogue, int block_m, int block_n) {
  if (epilogue == GemmEpilogue::kBf16) return block_m * block_n * 2;
  const int channels = block_n / 2;  // SwiGLU halves gate/up
  const int fp8_tile = block_m * channels;
  const int scales = align_up(block_m * ceil_div(channels, 128) * 4, 16);
  const int amax_exchange = 2 * block_m * 4;  // one partial amax per math warpgroup per row
  return fp8_tile + scales + amax_exchange;
}

// Largest stage count (<= kMaxStages) that fits next to `fixed` bytes; 0 when not even one fits.
inline int stages_that_fit(int fixed, int per_stage) {
  const int room = hopper::kMaxSmemPerBlock - fixed;
  if (room < per_stage) return 0;
  const int stages = room / per_stage;
  return stages < kMaxStages ? stages : kMaxStages;
}

// SYMMOE_NUM_STAGES as given (0 = not set); bounded so the shared-memory arithmetic cannot overflow before the
// plan's validate() reports that it does not fit.
inline int forced_stages(const PlanOverrides& overrides) {
  SYMMOE_CHECK(overrides.num_stages >= 0 && overrides.num_stages <= 64, "plan",
               "SYMMOE_NUM_STAGES must be in [0, 64] (0 = planner's choice), got ", overrides.num_stages);
  return overrides.num_stages;
}

// BLOCK_M candidates of the grouped GEMM (tokens per tile). The fused kernel uses layout::kMegaBlockMCandidates
// (the same ladder without 128, see below).
constexpr int kGemmNumBlockMCandidates = 4;
constexpr int kGemmBlockMCandidates[kGemmNumBlockMCandidates] = {16, 32, 64, 128};
// Tiles of at most this many tokens put the tokens on WGMMA N (swap-A/B): a 64-row WGMMA M would be >= 50% padding.
constexpr int kMaxSwapBlockM = 32;
// A math warpgroup holds at most one m64n128 fp32 accumulator (64 registers per thread) plus the partial
// accumulator of the per-128-K promotion (another 64): the GEMM core's shape (src/kernels/gemm/math.cuh).
constexpr int kMaxWarpgroupAccumulators = 64;

// BLOCK_M ladder (seed 000 7.1, adapted): the smallest candidate that holds kImbalanceFactor x the expected tokens
// of an expert, else the largest. Small tiles avoid padding waste when tokens are few (decode); 16/32 put the tokens
// on WGMMA N (swap-A/B, N multiples of 8) so WGMMA's 64-row M is filled with weight rows instead of padding.
// Blackwell's ladder is {16, 32, 64, 96, 128, 192} (UMMA M up to 256 over a 2-CTA pair, accumulators in TMEM); on
// Hopper the accumulators live in registers, two math warpgroups hold 2 x 64 x 128 fp32, so a tile is at most
// 128 x 128 or 64 x 256 (and 96/192 would need a third math warpgroup the register file cannot hold).
inline int pick_block_m(double expected_tokens_per_expert, const int* candidates, int num_candidates) {
  const double target = kImbalanceFactor * expected_tokens_per_expert;
  for (int i = 0; i < num_candidates; ++i)
    if (candidates[i] >= target) return candidates[i];
  return candidates[num_candidates - 1];
}

inline bool contains(const int* candidates, int num_candidates, int value) {
  for (int i = 0; i < num_candidates; ++i)
    if (candidates[i] == value) return true;
  return false;
}

inline bool block_m_is_swap_ab(int block_m) { return block_m <= kMaxSwapBlockM; }

// How the two math warpgroups share a block_m x block_n tile, and the accumulator tile of each (WGMMA terms:
// M = rows of the A operand, N = columns).
//   tokens on M, block_m 128: split the token rows (64 each) -> 64 x block_n (block_n 128)
//   tokens on M, block_m  64: split the channels              -> 64 x block_n/2 (block_n 256)
//   swap-A/B (weights on M):  split the weight rows            -> block_n/2 x block_m
struct WarpgroupTile {
  int m = 0, n = 0;
  bool split_channels = false;
};
inline WarpgroupTile warpgroup_tile(int block_m, int block_n) {
  if (block_m_is_swap_ab(block_m)) return {block_n / 2, block_m, true};
  if (block_m == 2 * hopper::kWgmmaM) return {hopper::kWgmmaM, block_n, false};
  return {hopper::kWgmmaM, block_n / 2, true};
}
// The tile is legal: WGMMA shapes, exact cover of the block by the two warpgroups, accumulators that fit.
inline bool warpgroup_tile_ok(const WarpgroupTile& t, int block_m, int block_n) {
  const bool wgmma_ok = t.m > 0 && t.m % hopper::kWgmmaM == 0 && t.n >= 8 && t.n <= hopper::kMaxWgmmaN && t.n % 8 == 0;
  const bool swap = block_m_is_swap_ab(block_m);
  const bool cover =
      swap ? (2 * t.m == block_n && t.n == block_m)
           : (t.split_channels ? (t.m == block_m && 2 * t.n == block_n) : (2 * t.m == block_m && t.n == block_n));
  return wgmma_ok && cover && t.m * t.n / hopper::kThreadsPerWarpgroup <= kMaxWarpgroupAccumulators;
}

// Math registers per thread when `num_math_warpgroups` warpgroups share the budget with the other warpgroups at
// `other_registers` each: the largest multiple of 8 that fits, at most 240 (above that nvcc gains nothing and
// setmaxnreg's 256 leaves no margin).
inline int math_registers_for(int num_math_warpgroups, int num_other_warpgroups, int other_registers) {
  const int t = hopper::kThreadsPerWarpgroup;
  const int room = hopper::kRegisterBudget - num_other_warpgroups * t * other_registers;
  const int regs = room / (num_math_warpgroups * t) / 8 * 8;
  return regs < 240 ? regs : 240;
}

// The kernels index one rank's rows with 32-bit ints: received rows (R * T_max), expanded / pool rows
// (R * T_max * min(K, E/R) plus up to 128 rows of padding per local expert) and combine rows (T_max * K). Throws
// naming the shape and the count when one exceeds INT32_MAX, before any sizing arithmetic runs in int.
void check_row_counts(const MoeShape& shape, const char* plan_name);

}  // namespace symmoe::plan::detail

// Private helpers shared by the GEMM, MegaMoE and EP planners: the stage-count override, the BLOCK_M ladder, the
// math register split and the 32-bit row-count check. One formula each; the plans in
// gemm_plan.cpp / mega_plan.cpp / ep_plan.cpp only combine them. Shared memory is modelled in symmoe/plan.hpp.
#pragma once

#include "symmoe/plan.hpp"

namespace symmoe::plan::detail {

// SYMMOE_NUM_STAGES as given (0 = not set); bounded so the shared-memory arithmetic cannot overflow before the
// plan's validate() reports that it does not fit.
inline int forced_stages(const PlanOverrides& overrides) {
  SYMMOE_CHECK(overrides.num_stages >= 0 && overrides.num_stages <= 64, "plan",
               "SYMMOE_NUM_STAGES must be in [0, 64] (0 = planner's choice), got ", overrides.num_stages);
  return overrides.num_stages;
}

// BLOCK_M ladder (docs/design.md §9.2): the smallest candidate that holds `rows` tokens of an expert, else the
// largest (the grouped GEMM: kImbalanceFactor x the expected tokens; the fused layer: mega_block_m_rows). Small tiles
// avoid padding waste when tokens are few (decode); 16/32 put the tokens on WGMMA N (swap-A/B, N multiples of 8) so
// WGMMA's 64-row M is filled with weight rows instead of padding. Blackwell's ladder is {16, 32, 64, 96, 128, 192}
// (UMMA M up to 256 over a 2-CTA pair, accumulators in TMEM); on Hopper the accumulators live in registers, two math
// warpgroups hold 2 x 64 x 128 fp32, so a tile is at most 128 x 128 or 64 x 256 (and 96/192 would need a third math
// warpgroup the register file cannot hold).
inline int pick_block_m(double rows, const int* candidates, int num_candidates) {
  for (int i = 0; i < num_candidates; ++i)
    if (candidates[i] >= rows) return candidates[i];
  return candidates[num_candidates - 1];
}

inline bool contains(const int* candidates, int num_candidates, int value) {
  for (int i = 0; i < num_candidates; ++i)
    if (candidates[i] == value) return true;
  return false;
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

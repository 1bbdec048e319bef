// Warp roles of the EP kernels (src/kernels/ep/dispatch_kernel.cu, combine_kernel.cu): warps per CTA, which warp
// does what and the registers that leaves each. One description, read by the kernels and by the planner (EpPlan's
// warps per CTA come from here; `symmoe plan` prints them). Neither kernel uses setmaxnreg or named barriers beyond
// __syncthreads: every thread runs at the launch bound, 65536 / threads per CTA.
// Plain integer constants, no CUDA headers: g++ compiles this too.
#pragma once

#include "symmoe/common.hpp"

namespace symmoe::layout {

// Dispatch: every warp runs every stage on its own token range (count, slots, push through its bulk row pipe, then
// the copy epilogue). NOTES: the bulk row pipes need ~168 registers per thread: 12 warps (16 warps, capped at
// 128 registers, spilled).
struct EpDispatchRoles {
  static constexpr int kNumWarps = 12;
  static constexpr int kNumThreads = kNumWarps * 32;
  static constexpr int kRegisters = 65536 / kNumThreads / 8 * 8;  // the launch bound
};

// Combine: warps [0, kNumSendWarps) send received rows back to their sources, warps [kFirstReduceWarp, kNumWarps)
// reduce this rank's tokens as their rows arrive. NOTES: both halves are latency-bound chains per warp, so more
// warps per SM pay; 16 warps leave each thread 128 registers (reduce_epilogue.cuh's kReduceVecs is sized for it).
struct EpCombineRoles {
  static constexpr int kNumWarps = 16;
  static constexpr int kNumThreads = kNumWarps * 32;
  static constexpr int kRegisters = 65536 / kNumThreads / 8 * 8;  // the launch bound
  static constexpr int kNumSendWarps = kNumWarps / 2;
  static constexpr int kFirstReduceWarp = kNumSendWarps;
  static constexpr int kNumReduceWarps = kNumWarps - kNumSendWarps;
  SYMMOE_HD static constexpr bool is_send_warp(int warp) { return warp < kNumSendWarps; }
  SYMMOE_HD static constexpr int reduce_warp_index(int warp) { return warp - kFirstReduceWarp; }
};

static_assert(EpDispatchRoles::kRegisters == 168 && EpCombineRoles::kRegisters == 128,
              "EP roles: the register counts the kernels' NOTES are written for");
static_assert(EpCombineRoles::kNumSendWarps >= 1 && EpCombineRoles::kNumReduceWarps >= 1,
              "EpCombineRoles: combine needs sender and reducer warps");

}  // namespace symmoe::layout

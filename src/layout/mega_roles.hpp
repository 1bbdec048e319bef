// Warp roles of the fused MoE kernel (src/kernels/mega/mega_kernel.cuh): which warps do what, their register
// split (setmaxnreg) and the named barriers they use. One description, read by the kernel and by the planner
// (plan_mega_moe fills MegaPlan's warp and register fields from it; `symmoe plan` prints them).
//
//   warpgroups 0..1  math: the GEMM core's WGMMA mainloop (plan::mega_core: BLOCK_M 128 and FP8 64 the one-batch
//                    core, kernels/gemm/core_math.cuh, each warpgroup issuing on its own; FP4 64 the two-halves core,
//                    kernels/gemm/math_fp4.cuh, with issue turns; 16 and 32 the swap-AB core), the L1 SwiGLU/FP8
//                    epilogue, the L2 epilogue with its NVLink write-back
//   warpgroup 2      data: warp 8 = TMA producer (lane 0 issues), warps 9..11 = dispatch (pull rows)
// FP4 weights at BLOCK_M 64: the math warpgroups upconvert their own B rows (kernels/gemm/math_fp4.cuh: each split-N
// warpgroup's WGMMAs read only its own 128 B rows, so it converts those one K block ahead, named barrier
// kWarpgroupBarrier0 + warpgroup). At BLOCK_M 16 and 32 (the swap-AB core) each thread converts its own A fragments
// in registers (kernels/gemm/swap_ab_math.cuh): no conversion barrier, no issue turns.
// Every warp also joins the stages before the roles (count + publish) and after them (clear, combine); those run at
// kCommonRegisters, the launch bound.
// Plain integer constants, no CUDA headers: g++ compiles this too.
#pragma once

#include "symmoe/common.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::layout {

struct MegaRoles {
  static constexpr int kThreadsPerWarp = 32;
  static constexpr int kThreadsPerWarpgroup = 128;
  static constexpr int kWarpsPerWarpgroup = kThreadsPerWarpgroup / kThreadsPerWarp;

  // ---- warps ----
  static constexpr int kNumMathWarpgroups = 2;  // warpgroups 0 .. kNumMathWarpgroups - 1
  static constexpr int kNumMathWarps = kNumMathWarpgroups * kWarpsPerWarpgroup;
  static constexpr int kNumMathThreads = kNumMathWarpgroups * kThreadsPerWarpgroup;
  static constexpr int kDataWarpgroup = kNumMathWarpgroups;                  // the one after the math warpgroups
  static constexpr int kProducerWarp = kDataWarpgroup * kWarpsPerWarpgroup;  // lane 0 issues the TMA loads
  static constexpr int kNumProducerWarps = 1;
  static constexpr int kFirstDispatchWarp = kProducerWarp + kNumProducerWarps;
  static constexpr int kNumDispatchWarps = kWarpsPerWarpgroup - kNumProducerWarps;
  static constexpr int kNumWarpgroups = kNumMathWarpgroups + 1;
  static constexpr int kNumWarps = kNumWarpgroups * kWarpsPerWarpgroup;
  static constexpr int kNumThreads = kNumWarps * kThreadsPerWarp;

  // ---- registers (setmaxnreg works per warpgroup, in steps of 8 within [24, 256]) ----
  // 65536 per SM / kNumThreads rounded down to 8: the launch bound, held by every warp outside the roles.
  static constexpr int kCommonRegisters = 65536 / kNumThreads / 8 * 8;
  // Inside the roles: the data warpgroup decreases to kDataRegisters, the math warpgroups increase to
  // kMathRegisters; 128 x data + 256 x math = 64512 (plan::hopper::kRegisterBudget). One split for every BLOCK_M:
  // BLOCK_M 128's 64 x 256 warpgroup tile (128 promoted + 64 partial accumulators) fits 224 math registers, and at
  // 40 the producer and pull spilled. NOTES: ptxas -v (nvcc 13.0) reports no spills for any fused kernel, traced or
  // not (the build checks it).
  static constexpr int kDataRegisters = 56;
  static constexpr int kMathRegisters = 224;

  // ---- named barriers (hardware ids 0..15; each used with a fixed thread count) ----
  static constexpr int kCtaBarrier = 0;           // __syncthreads (all kNumThreads)
  static constexpr int kAmaxExchangeBarrier = 1;  // math threads: the split-N L1 amax exchange (epilogue_swiglu.cuh)
  static constexpr int kGemmIssueBarrier0 = 2;    // math threads: 2 and 3, the two-halves core's issue turns (math.cuh
                                                  // kIssueBarrier0; the kernel static_asserts they agree)
  static constexpr int kNumGemmIssueBarriers = 2;
  static constexpr int kL1DoneBarrier = kGemmIssueBarrier0 + kNumGemmIssueBarriers;  // math threads: L1 tile stored
  // 5 and 6: math warpgroup w's own barrier (its 128 threads): FP4 weights on the two-halves core, its weight
  // conversion (math_fp4.cuh); the one-batch core (BLOCK_M 128, FP8 64), its copy of the tile's B scales staged
  // (core_math.cuh stage_core_b_scales).
  static constexpr int kWarpgroupBarrier0 = kL1DoneBarrier + 1;
  static constexpr int kNumWarpgroupBarriers = kNumMathWarpgroups;
  static constexpr int kNumNamedBarriers = kWarpgroupBarrier0 + kNumWarpgroupBarriers;
  // One past the highest named-barrier id one kernel uses (ids below may be unused): the swap-AB core uses ids 0, 1
  // and kL1DoneBarrier (no issue turns, no warpgroup barrier); the two-halves core (FP4 weights) also the issue turns
  // and the warpgroup barriers; the one-batch core (FP8) ids 0, kL1DoneBarrier and the warpgroup barriers, at BLOCK_M
  // 64 (split N) also 1.
  SYMMOE_HD static constexpr int num_named_barriers(bool fp4, plan::GemmCore core) {
    return core == plan::GemmCore::kOneBatch || (fp4 && core == plan::GemmCore::kTwoHalves)
               ? kWarpgroupBarrier0 + kNumWarpgroupBarriers
               : kWarpgroupBarrier0;
  }

  // ---- when an L1 tile's arrival signal is sent (PendingL1Signal, src/kernels/mega/epilogue.cuh) ----
  // FP4 weights on the two-halves core: after the next tile's mainloop (so its bulk-store drain and fences overlap
  // that mainloop); FP8: at once. Measured on the H200 (docs/notes/mega.md, "Deferred L1 signal"): deferred, FP4 is
  // 1-5% faster at every batch size (Flash, V3), FP8 Flash 1-3% slower at 8-512 tokens. BLOCK_M 128 has no register
  // left for it. The swap-AB core (BLOCK_M 16, 32) stores from registers, with no bulk store to drain: at once.
  SYMMOE_HD static constexpr bool defers_l1_signal(bool fp4, bool swap_ab) { return fp4 && !swap_ab; }

  // Dispatch warp `warp` (kFirstDispatchWarp <= warp < kNumWarps) -> its index among the CTA's dispatch warps.
  SYMMOE_HD static constexpr int dispatch_warp_index(int warp) { return warp - kFirstDispatchWarp; }
  SYMMOE_HD static constexpr bool is_producer_warp(int warp) { return warp == kProducerWarp; }
};

static_assert(MegaRoles::kNumThreads == 384 && MegaRoles::kCommonRegisters == 168,
              "MegaRoles: three warpgroups at the 168-register launch bound");
static_assert(MegaRoles::kNumDispatchWarps >= 1, "MegaRoles: the data warpgroup needs at least one dispatch warp");
static_assert(MegaRoles::kNumNamedBarriers <= 16, "MegaRoles: Hopper has 16 named barriers per CTA");
static_assert(MegaRoles::kDataRegisters % 8 == 0 && MegaRoles::kMathRegisters % 8 == 0 &&
                  MegaRoles::kDataRegisters >= 24 && MegaRoles::kMathRegisters <= 256,
              "MegaRoles: setmaxnreg counts are multiples of 8 in [24, 256]");
static_assert(MegaRoles::kThreadsPerWarpgroup *
                      (MegaRoles::kDataRegisters + MegaRoles::kNumMathWarpgroups * MegaRoles::kMathRegisters) <=
                  MegaRoles::kNumThreads * MegaRoles::kCommonRegisters,
              "MegaRoles: the register split claims more than the launch bound frees");

}  // namespace symmoe::layout

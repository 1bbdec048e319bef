// The fused MoE kernel (MegaMoE, docs/design.md §8) on Hopper: one persistent launch per layer call wires the roles
//   dispatch.cuh   count + publish (all warps), pull rows into the L1 pool (3 dispatch warps per CTA)
//   producer.cuh   TMA producer (1 thread), the GEMM core's loads behind a wait on the arrival counter / mask
//   math.cuh       the GEMM core's WGMMA mainloop (2 math warpgroups, per-128-K promotion), L1 then L2
//   epilogue.cuh   L1 SwiGLU/FP8 into the L2 pool + mask bit; L2 bf16 rows into the source rank's combine rows
//   combine.cuh    fp32 sum of each token's rows in ascending lane order, one bf16 rounding (all warps)
//   scheduler.cuh  waves of experts; L1 then L2 tiles per wave; block counts from device-side counts
// Stages of one call (every CTA; R ranks; all CTAs co-resident, grid <= the rank's SM share):
//   count_and_publish (routing checked) -> rank_barrier #1 -> load_expert_counts -> roles (pull || TMA ||
//   math+epilogues)
//   -> grid_sync -> clear the call's counters (recv counts, arrival counters, masks) + rank barrier #2 (CTA 0's
//   cross-rank step, then a grid sync) -> combine
// NOTES: why the counters are safe to clear there: every CTA read the recv counts before its roles; peers write
// this rank's counters/lists again only in their next call's count stage, after rank_barrier #2 of this call,
// which this rank reaches only after clearing. Arrival counters and masks are local and every GEMM of the rank is
// done at the grid sync. The combine rows are written again only after the next call's rank_barrier #1, which this
// rank reaches only after its combine. So nothing needs a host-side reset between calls or graph replays.
// Warp roles, register split and named barriers: symmoe/layout/mega_roles.hpp (MegaRoles), shared with the planner.
// FP4 weights (mega_moe_fp4_kernel, kFp4; BLOCK_M 64 only, plan::mega_block_m_candidates): the FP4 grouped GEMM's
// math-warp conversion (kernels/gemm/math_fp4.cuh, kMixedPhases: the base codes from the B scales of the tile's
// phase). Per K block j of the CTA's tile sequence:
//   producer:   wait empty[j % R] -> arrive_expect_tx raw_full[j % R] -> TMA FP4 B + codes (+ A, A scales; early
//               stages: after the tile's row wait)
//   math:       math warpgroup w waits raw_full[j % R], converts its own 128 B rows into E4M3 tile j % 2 (during the
//               WGMMAs of block j - 1 when j is not the tile's first block), named barrier kFp4ConvertBarrier0 + w
//               -> WGMMA -> arrive empty[j % R] (one per math warp)
// empty completes on the 8 math arrives, raw_full on the producer's arrive + bytes. A warpgroup holds stage j while
// it waits for raw_full of block j + 1 of the same tile only (R >= 2), never across tiles, so the producer's row
// wait of the next tile waits on nothing the math warps hold. No converter warps, no slot, no stop mark.
#pragma once

#include "kernels/comm/barrier.cuh"
#include "kernels/comm/grid_sync.cuh"
#include "kernels/gemm/epilogue_swiglu.cuh"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/math_fp4.cuh"
#include "kernels/mega/combine.cuh"
#include "kernels/mega/dispatch.cuh"
#include "kernels/mega/epilogue.cuh"
#include "kernels/mega/producer.cuh"
#include "kernels/mega/producer_fp4.cuh"
#include "kernels/mega/scheduler.cuh"
#include "kernels/mega/smem_layout.hpp"
#include "kernels/mega/trace.cuh"
#include "symmoe/layout/mega_roles.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::mega::kernel {

using Roles = layout::MegaRoles;
constexpr int kNumThreads = Roles::kNumThreads;
// The GEMM core's mainloop is reused as it is: its issue-turn barriers must be the ids MegaRoles reserves for them,
// and the fused kernel's own barriers must not collide with them.
static_assert(gemm::kernel::kIssueBarrier0 == Roles::kGemmIssueBarrier0,
              "MegaRoles::kGemmIssueBarrier0 must be math.cuh's kIssueBarrier0");
static_assert(Roles::kAmaxExchangeBarrier != Roles::kCtaBarrier && Roles::kL1DoneBarrier != Roles::kCtaBarrier &&
                  Roles::kAmaxExchangeBarrier != Roles::kL1DoneBarrier,
              "MegaRoles: named barriers must be distinct");
static_assert((Roles::kAmaxExchangeBarrier < Roles::kGemmIssueBarrier0 ||
               Roles::kAmaxExchangeBarrier >= Roles::kGemmIssueBarrier0 + Roles::kNumGemmIssueBarriers) &&
                  (Roles::kL1DoneBarrier < Roles::kGemmIssueBarrier0 ||
                   Roles::kL1DoneBarrier >= Roles::kGemmIssueBarrier0 + Roles::kNumGemmIssueBarriers),
              "MegaRoles: a fused-kernel barrier collides with the GEMM core's issue-turn barriers");
static_assert(Roles::kFp4ConvertBarrier0 > Roles::kL1DoneBarrier &&
                  Roles::kFp4ConvertBarrier0 > Roles::kAmaxExchangeBarrier &&
                  Roles::kFp4ConvertBarrier0 >= Roles::kGemmIssueBarrier0 + Roles::kNumGemmIssueBarriers &&
                  Roles::kNumFp4ConvertBarriers == Roles::kNumMathWarpgroups,
              "MegaRoles: the FP4 conversion barriers (one per math warpgroup) collide with another named barrier");

// Stages 3-4 (every thread of every CTA, after the roles), recomputed from p and threadIdx.
// `combine` false: this rank's routing was bad (dispatch.cuh): its y is left untouched.
template <bool kTrace>
__device__ __forceinline__ void finish_call(const MegaParams& p, bool combine) {
  const layout::MegaDims& d = p.ws.dims();
  const int R = d.num_ranks, El = d.num_local_experts();
  const layout::SyncArea area = p.ws.get_sync_area();
  // ---- 3. clear this call's counters, then every rank's rows are in its combine buffer ----
  // comm::rank_barrier with the clears folded in (one grid sync fewer: ~1.5 us of a 1-token call): after the first
  // grid sync every role of the rank is done, CTA 0 clears the recv counts before its cross-rank release (peers
  // write them again only after it), every CTA clears its share of the local arrival counters (read again only in
  // the next call's roles, after that call's barrier).
  const bool synced = comm::grid_sync(area.grid_sync_counter(), p.ctx);
  if (threadIdx.x == 0) trace_stamp<kTrace>(p, kTraceGridSynced);
  if (blockIdx.x == 0) {
    for (int i = threadIdx.x; i < R * El; i += kNumThreads) *p.ws.get_expert_recv_count(i / El, i % El) = 0;
    for (int s = threadIdx.x; s < R; s += kNumThreads) *p.ws.get_src_input_error(s) = 0u;
    if (threadIdx.x == 0) *p.ws.get_input_error_key() = 0ull;
    __syncthreads();  // the clears before warp 0's system-scope release
    if (synced && R > 1) comm::cross_rank_barrier_block(p.sym, area, p.ctx);
  }
  for (uint64_t b = uint64_t(blockIdx.x) * kNumThreads + threadIdx.x; b < p.ws.num_pool_blocks();
       b += uint64_t(gridDim.x) * kNumThreads) {
    *p.ws.get_l1_arrival_count(b) = 0;
    *p.ws.get_l2_arrival_mask(b) = 0;
  }
  // One rank: the first grid sync already ordered every combine row (all written by this rank) before the combine,
  // and the clears are read again only by the next call.
  if (R > 1) comm::grid_sync(area.grid_sync_counter(), p.ctx);
  if (threadIdx.x == 0) trace_stamp<kTrace>(p, kTraceCombineStart);
  // ---- 4. combine ----
  if (combine)
    combine_tokens(p, blockIdx.x * Roles::kNumWarps + threadIdx.x / Roles::kThreadsPerWarp,
                   gridDim.x * Roles::kNumWarps, threadIdx.x % Roles::kThreadsPerWarp);
  if constexpr (kTrace) {
    __syncthreads();
    if (threadIdx.x == 0) trace_stamp<kTrace>(p, kTraceEnd);
  }
}

template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTrace>
__global__ void __launch_bounds__(kNumThreads, 1)
    mega_moe_kernel(const __grid_constant__ MegaParams p, const __grid_constant__ MegaTensorMaps maps) {
  constexpr bool kFp4 = false;
  [[maybe_unused]] const CUtensorMap* codes_maps = nullptr;
#include "kernels/mega/mega_kernel_body.inc"
}

// FP4 weights (the kernel of plan::kMegaKernels' kFp4 entries; mega_kernel_fp4.cu).
template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTrace>
__global__ void __launch_bounds__(kNumThreads, 1)
    mega_moe_fp4_kernel(const __grid_constant__ MegaParams p, const __grid_constant__ MegaTensorMapsFp4 fp4_maps) {
  constexpr bool kFp4 = true;
  const MegaTensorMaps& maps = fp4_maps.gemm;
  const CUtensorMap* codes_maps = &fp4_maps.l1_codes;
#include "kernels/mega/mega_kernel_body.inc"
}

}  // namespace symmoe::mega::kernel

// The fused MoE kernel (MegaMoE, docs/design.md §8) on Hopper: one persistent launch per layer call wires the roles
//   dispatch.cuh   count + publish (all warps), pull rows into the L1 pool (3 dispatch warps per CTA)
//   producer.cuh   TMA producer (1 thread), the GEMM core's loads behind a wait on the arrival counter / mask
//   GEMM core      the WGMMA mainloop of plan::mega_core(BLOCK_M, weights) (2 math warpgroups, per-128-K
//                  promotion), L1 then L2: at BLOCK_M 128 and (FP8) 64 the one-batch core's core_k_loop
//                  (core_math.cuh: each warpgroup 64 rows x 256 columns, or at 64 split N, 64 rows x its 128 columns;
//                  no issue turns, the tile's B scales staged in shared memory; run_mega_math_core below); FP4 at 64
//                  the two-halves core's math_mainloop_fp4 (math_fp4.cuh: split-N 64 x 256, issue turns); at 16 and
//                  32 the swap-AB core's (swap_ab_math.cuh: tokens on WGMMA N; run_mega_math_swap_ab below)
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
// Warp roles, register split and named barriers: layout/mega_roles.hpp (MegaRoles), shared with the planner.
// FP4 weights at BLOCK_M 64 (mega_moe_kernel<..., kFp4 true>; at 16 and 32 the swap-AB core converts in registers):
// the FP4 grouped GEMM's math-warp conversion (kernels/gemm/math_fp4.cuh, kMixedPhases: the base codes from the B
// scales of the tile's phase). Per K block j of the CTA's tile sequence:
//   producer:   wait empty[j % R] -> arrive_expect_tx raw_full[j % R] -> TMA FP4 B + codes (+ A, A scales; early
//               stages: after the tile's row wait)
//   math:       math warpgroup w waits raw_full[j % R], converts its own 128 B rows into E4M3 tile j % 2 (during the
//               WGMMAs of block j - 1 when j is not the tile's first block), named barrier kWarpgroupBarrier0 + w
//               -> WGMMA -> arrive empty[j % R] (one per math warp)
// empty completes on the 8 math arrives, raw_full on the producer's arrive + bytes. A warpgroup holds stage j while
// it waits for raw_full of block j + 1 of the same tile only (R >= 2), never across tiles, so the producer's row
// wait of the next tile waits on nothing the math warps hold. No converter warps, no slot, no stop mark.
#pragma once

#include "kernels/comm/barrier.cuh"
#include "kernels/comm/grid_sync.cuh"
#include "kernels/gemm/core_math.cuh"
#include "kernels/gemm/epilogue_swiglu.cuh"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/math_fp4.cuh"
#include "kernels/gemm/swap_ab_epilogue.cuh"
#include "kernels/gemm/swap_ab_math.cuh"
#include "kernels/mega/combine.cuh"
#include "kernels/mega/dispatch.cuh"
#include "kernels/mega/epilogue.cuh"
#include "kernels/mega/producer.cuh"
#include "kernels/mega/producer_fp4.cuh"
#include "kernels/mega/scheduler.cuh"
#include "kernels/mega/smem_layout.hpp"
#include "kernels/mega/trace.cuh"
#include "layout/mega_roles.hpp"
#include "plan/mega_kernels.hpp"

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
static_assert(Roles::kWarpgroupBarrier0 > Roles::kL1DoneBarrier &&
                  Roles::kWarpgroupBarrier0 > Roles::kAmaxExchangeBarrier &&
                  Roles::kWarpgroupBarrier0 >= Roles::kGemmIssueBarrier0 + Roles::kNumGemmIssueBarriers &&
                  Roles::kNumWarpgroupBarriers == Roles::kNumMathWarpgroups,
              "MegaRoles: the warpgroup barriers (one per math warpgroup) collide with another named barrier");
static_assert(gemm::kernel::kSwapAbAmaxBarrier == Roles::kAmaxExchangeBarrier,
              "the swap-AB SwiGLU epilogue's amax barrier must be MegaRoles::kAmaxExchangeBarrier");

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

// The math role on the swap-AB core (BLOCK_M 16, 32; both math warpgroups, wg warp-uniform): per tile of the
// scheduler's order swap_ab_k_loop (kernels/gemm/swap_ab_math.cuh: 256 weight rows x BLOCK_M tokens, the weights the
// WGMMA's M operand, FP4 converted in registers), then L1: the swap-AB SwiGLU + FP8 epilogue into the L2 pool and
// the tile's arrival signal at once (no bulk store to drain); L2: the bf16 write-back into the source ranks'
// combine rows (epilogue.cuh). No issue turns: each warpgroup waits for the stage and releases it on its own.
template <int BLOCK_M, int kNumStages, bool kTrace, bool kFp4, typename Layout>
__device__ __forceinline__ void run_mega_math_swap_ab(const MegaParams& p, const Layout& smem,
                                                      const ExpertCounts& counts, int wg) {
  using gemm::kernel::EpilogueKind;
  gemm::kernel::PipelineState<kNumStages> pipe;
  float acc[BLOCK_M];  // two 64-row sub-tiles x BLOCK_M / 2 (swap_ab_k_loop)
  MegaScheduler<BLOCK_M, 256> sched(p, counts, blockIdx.x);
  MegaTile t;
  PendingL1Signal<256, Roles::defers_l1_signal(kFp4, true)> pending;
  const DirectStores stores;
  for (int l1_count = 0, tile_count = 0; sched.next(t); ++tile_count) {
    if (t.l2) {
      pending.flush(p, stores);  // this tile's inputs may include the pending one
      gemm::kernel::swap_ab_k_loop<BLOCK_M, 256, kNumStages, kFp4, EpilogueKind::kBf16>(p.l2, smem, t.tile, wg, pipe,
                                                                                        acc);
    } else {
      gemm::kernel::swap_ab_k_loop<BLOCK_M, 256, kNumStages, kFp4, EpilogueKind::kSwigluFp8>(p.l1, smem, t.tile, wg,
                                                                                             pipe, acc);
    }
    if constexpr (kTrace)
      if (threadIdx.x == 0) trace_tile(p, tile_count, kTileMainloopDone, ptx::globaltimer_ns());
    if (t.l2) {
      swap_ab_epilogue_l2_writeback<BLOCK_M>(p, t.tile, wg, acc);
    } else {
      pending.flush(p, stores);
      gemm::kernel::swap_ab_epilogue_swiglu_fp8(p.l1, t.tile, wg, l1_count++ & 1, smem, acc);
      pending.stored(p, t, stores);
    }
    if constexpr (kTrace)
      if (threadIdx.x == 0) trace_tile(p, tile_count, kTileMathDone, ptx::globaltimer_ns());
  }
  pending.flush(p, stores);
}

// The end of a math role that stores through staging rows: the last pending L1 signal, the trace stamp, and every
// write-back to a peer complete and ordered before rank_barrier #2's release.
template <bool kTrace, typename Pending>
__device__ __forceinline__ void end_math_role(const MegaParams& p, Pending& pending,
                                              const gemm::kernel::WarpStaging& staging) {
  pending.flush(p, staging);
  if (threadIdx.x == 0) trace_stamp<kTrace>(p, kTraceMathDone);
  staging.drain();
  ptx::fence_proxy_async_global();
  ptx::fence_acq_rel_sys();
}

// The math role on the one-batch core (FP8 weights, BLOCK_M 128 or 64; both math warpgroups, wg warp-uniform): per
// tile of the scheduler's order each math warpgroup stages its copy of the tile's B scales (stage_core_b_scales,
// buffers alternating by tile, its barrier MegaRoles::kWarpgroupBarrier0 + wg), then core_k_loop
// (kernels/gemm/core_math.cuh, no issue turns: at 128 warpgroup wg's rows [64 wg, 64 wg + 64) x 256 columns as two n128
// batches per K block; at 64 split N, the 64 rows x columns [128 wg, 128 wg + 128) as one n128 batch), then L1: the
// SwiGLU + FP8 epilogue into the L2 pool (split N: the row amax exchanged through the layout's amax region over
// MegaRoles::kAmaxExchangeBarrier) and the tile's arrival signal; L2: the bf16 write-back into the source ranks'
// combine rows (epilogue.cuh). core_k_loop's accumulators are WarpgroupSlice<BLOCK_M, 256>'s (128: acc[0, 64) columns
// [0, 128), acc[64, 128) columns [128, 256); 64: acc[0, 64) the warpgroup's 128 columns), which the epilogues read.
// NOTES: wg is made warp-uniform here (a shuffle from lane 0, as in core_kernel.cuh), so core_k_loop's descriptors
// live in uniform registers; from threadIdx.x / 128 alone ptxas kept them in regular registers and the kernel needed
// ~248 (traced) math registers instead of fitting MegaRoles::kMathRegisters.
template <int BLOCK_M, int kNumStages, bool kTrace, typename Layout>
__device__ __forceinline__ void run_mega_math_core(const MegaParams& p, const Layout& smem, const ExpertCounts& counts,
                                                   int wg, int warp, int lane) {
  using namespace gemm::kernel;
  wg = __shfl_sync(0xffffffffu, wg, 0);
  using Slice = WarpgroupSlice<BLOCK_M, 256>;
  static_assert(Slice::kNumAcc == Layout::kNumAcc && Slice::kSplitN == Layout::kSplitN,
                "the one-batch core's accumulators are the epilogues' warpgroup slice");
  const Slice slice(wg);
  PipelineState<kNumStages> pipe;
  float acc[Slice::kNumAcc];
  const WarpStaging staging = warp_staging(smem, wg, warp % Roles::kWarpsPerWarpgroup, lane);
  MegaScheduler<BLOCK_M, 256> sched(p, counts, blockIdx.x);
  MegaTile t;
  PendingL1Signal<256, Roles::defers_l1_signal(false, false)> pending;
  const int wg_barrier = Roles::kWarpgroupBarrier0 + wg;
  for (int l1_count = 0, tile_count = 0; sched.next(t); ++tile_count) {
    const int parity = tile_count & 1;  // which of the warpgroup's two B-scale buffers this tile uses
    if (t.l2) {
      pending.flush(p, staging);  // this tile's inputs may include the pending one
      stage_core_b_scales<EpilogueKind::kBf16>(p.l2, t.tile, smem, wg, parity, wg_barrier);
      core_k_loop<1, EpilogueKind::kBf16>(p.l2, smem, t.tile, wg, parity, pipe, acc);
    } else {
      stage_core_b_scales<EpilogueKind::kSwigluFp8>(p.l1, t.tile, smem, wg, parity, wg_barrier);
      core_k_loop<1, EpilogueKind::kSwigluFp8>(p.l1, smem, t.tile, wg, parity, pipe, acc);
    }
    if constexpr (kTrace)
      if (threadIdx.x == 0) trace_tile(p, tile_count, kTileMainloopDone, ptx::globaltimer_ns());
    if (t.l2) {
      epilogue_l2_writeback(p, t.tile, slice, acc, staging);
    } else {
      pending.flush(p, staging);
      epilogue_swiglu_fp8<Roles::kAmaxExchangeBarrier>(p.l1, t.tile, wg, l1_count++ & 1, smem, slice, acc, staging);
      pending.stored(p, t, staging);
    }
    if constexpr (kTrace)
      if (threadIdx.x == 0) trace_tile(p, tile_count, kTileMathDone, ptx::globaltimer_ns());
  }
  end_math_role<kTrace>(p, pending, staging);
}

// The fused kernel, both weight formats: stages 1-4 above. kernel_maps: MegaTensorMaps (FP8 weights) or
// MegaRankMaps (FP4: with the code maps); `maps` are its six phase maps, `codes_maps` (kFp4 only) the W1 codes map,
// W2's right after it.
// NOTES: one __global__ template with the body in it, not a __device__ function called by two kernels: inlined
// that way (nvcc 13.0) the shared-memory address arithmetic of the FP8 kernel came out rearranged and its
// <128, 256, 4> instantiation spilled (44 B); this form compiles the FP8 kernel to the same PTX as before.
template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTrace, bool kFp4>
__global__ void __launch_bounds__(kNumThreads, 1)
    mega_moe_kernel(const __grid_constant__ MegaParams p, const __grid_constant__ MegaKernelMaps<kFp4> kernel_maps) {
  const MegaTensorMaps& maps = gemm_maps(kernel_maps);
  [[maybe_unused]] const CUtensorMap* codes_maps = code_maps(kernel_maps);
  using namespace gemm::kernel;
  constexpr plan::GemmCore kCore = plan::mega_core(BLOCK_M, kFp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8);
  constexpr bool kSwapAB = kCore == plan::GemmCore::kSwapAB;
  constexpr bool kOneBatch = kCore == plan::GemmCore::kOneBatch;
  static_assert(!kSwapAB || BLOCK_N == 256, "swap-AB fused tiles: 256 weight rows (the SwiGLU tile)");
  extern __shared__ uint8_t smem_raw[];
  const layout::MegaDims& d = p.ws.dims();
  const int El = d.num_local_experts();
  const MegaSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kFp4> shared(smem_raw, d.num_ranks, El);
  const auto& smem = shared.core;  // the GEMM core's regions
  const ExpertCounts counts = ExpertCounts::from(shared.counts);
  const int wg = threadIdx.x / Roles::kThreadsPerWarpgroup, warp = threadIdx.x / Roles::kThreadsPerWarp;
  const int lane = threadIdx.x % Roles::kThreadsPerWarp;
  const layout::SyncArea area = p.ws.get_sync_area();

  if (threadIdx.x == 0) {
    trace_stamp<kTrace>(p, kTraceStart);
    ptx::prefetch_tensormap(&maps.l1_a), ptx::prefetch_tensormap(&maps.l1_sfa), ptx::prefetch_tensormap(&maps.l1_b);
    ptx::prefetch_tensormap(&maps.l2_a), ptx::prefetch_tensormap(&maps.l2_sfa), ptx::prefetch_tensormap(&maps.l2_b);
    if constexpr (kFp4) ptx::prefetch_tensormap(codes_maps), ptx::prefetch_tensormap(codes_maps + 1);
    if constexpr (kFp4 && !kSwapAB) {
      smem.init_stage_barriers(Roles::kNumMathWarps, 0);  // one arrive per math warp, no converter warps
    } else {
      smem.init_stage_barriers(Roles::kNumMathWarps);  // one arrive per math warp
    }
  }
  if constexpr (kFp4) {  // the upconversion tables (fp4_upconvert.hpp), one per thread of warp 1
    if (threadIdx.x >= 32 && threadIdx.x < 32 + kFp4NumShifts) {
      const int i = threadIdx.x - 32;
      smem.fp4_tables()[i] = fp4_shift_table(i + fmt::kFoldExactMinShift);
    }
  }
  __syncthreads();

  // ---- 1. count + publish, then every rank's lists are complete ----
  count_and_publish(p, blockIdx.x * kNumThreads + threadIdx.x, gridDim.x * kNumThreads);
  if (threadIdx.x == 0) trace_stamp<kTrace>(p, kTracePublished);
  // One rank: no peer reads this rank's lists, so the grid sync alone (gpu scope) orders them. The barrier epoch and
  // slots stay untouched, as in every 1-rank call, so the next cross-rank barrier on them finds them consistent.
  const bool counted = p.sym.num_ranks == 1 ? comm::grid_sync(area.grid_sync_counter(), p.ctx) && !comm::aborted(p.ctx)
                                            : comm::rank_barrier(p.sym, area, p.ctx);
  load_expert_counts<BLOCK_M, BLOCK_N>(p, counts, counted);
  // Read before finish_call's clear (CTA 0 clears after a grid sync that every CTA reaches after this read).
  const bool routing_ok = *reinterpret_cast<volatile const uint32_t*>(p.ws.get_src_input_error(int(p.sym.rank))) == 0;
  if (!routing_ok && blockIdx.x == 0 && threadIdx.x == 0) publish_input_error(p);
  if (threadIdx.x == 0) trace_stamp<kTrace>(p, kTraceCounted);
  if (blockIdx.x == 0 && p.recv_counts != nullptr)
    for (int e = threadIdx.x; e < El; e += kNumThreads) p.recv_counts[e] = counts.num_rows[e];

  // ---- 2. roles ----
  using Scheduler = MegaScheduler<BLOCK_M, BLOCK_N>;
  if (wg == Roles::kDataWarpgroup) {
    ptx::setmaxnreg_dec<Roles::kDataRegisters>();
    if (Roles::is_producer_warp(warp)) {
      if (lane == 0) {
        Scheduler sched(p, counts, blockIdx.x);
        if constexpr (kFp4)
          run_mega_producer_fp4<BLOCK_M, BLOCK_N, kNumStages, kTrace>(p, smem, maps, codes_maps, sched);
        else
          run_mega_producer<BLOCK_M, BLOCK_N, kNumStages, kTrace>(p, smem, maps, sched);
        trace_stamp<kTrace>(p, kTraceProducerDone);
      }
    } else {
      pull_rows<BLOCK_M>(p, counts, blockIdx.x * Roles::kNumDispatchWarps + Roles::dispatch_warp_index(warp),
                         gridDim.x * Roles::kNumDispatchWarps, lane);
      if (lane == 0) trace_max_stamp<kTrace>(p, kTracePullDone);
    }
    __syncwarp();
    ptx::setmaxnreg_inc<Roles::kCommonRegisters>();
  } else if constexpr (kOneBatch) {
    static_assert(!kFp4 && (BLOCK_M == 64 || BLOCK_M == 128) && BLOCK_N == 256,
                  "the fused one-batch core: FP8 weights, 64 x 256 or 128 x 256");
    ptx::setmaxnreg_inc<Roles::kMathRegisters>();
    run_mega_math_core<BLOCK_M, kNumStages, kTrace>(p, smem, counts, wg, warp, lane);
    ptx::setmaxnreg_dec<Roles::kCommonRegisters>();
  } else if constexpr (kSwapAB) {
    ptx::setmaxnreg_inc<Roles::kMathRegisters>();
    run_mega_math_swap_ab<BLOCK_M, kNumStages, kTrace, kFp4>(p, smem, counts, wg);
    if (threadIdx.x == 0) trace_stamp<kTrace>(p, kTraceMathDone);
    // Every write-back to a peer complete and ordered before rank_barrier #2's release.
    ptx::fence_acq_rel_sys();
    ptx::setmaxnreg_dec<Roles::kCommonRegisters>();
  } else {  // the two-halves core (FP4 weights, BLOCK_M 64)
    using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
    static_assert(kFp4 && Slice::kSplitN,
                  "the two-halves core in the fused kernel: FP4 weights, the split-N 64 x 256 tile (each math "
                  "warpgroup converts only its own B rows)");
    ptx::setmaxnreg_inc<Roles::kMathRegisters>();
    const Slice slice(wg);
    const GemmParams& l1 = p.l1;
    const GemmParams& l2 = p.l2;
    PipelineState<kNumStages> pipe;
    Fp4ConvState conv;  // the E4M3 ring position
    float acc[Slice::kNumAcc];
    if (wg == 1) pass_issue_turn(1);  // warpgroup 0 issues first (issue turns, math.cuh)
    const WarpStaging staging = warp_staging(smem, wg, warp % Roles::kWarpsPerWarpgroup, lane);
    Scheduler sched(p, counts, blockIdx.x);
    MegaTile t;
    PendingL1Signal<BLOCK_N, Roles::defers_l1_signal(kFp4, false)> pending;
    for (int l1_count = 0, tile_count = 0; sched.next(t); ++tile_count) {
      if (t.l2) pending.flush(p, staging);  // this tile's inputs may include the pending one
      // One mainloop for both phases (kMixedPhases: the tile's kind picks the B-scale layout at run time).
      math_mainloop_fp4<BLOCK_M, BLOCK_N, kNumStages, EpilogueKind::kSwigluFp8, Roles::kWarpgroupBarrier0, true>(
          t.l2 ? l2 : l1, smem, t.tile, slice, wg, pipe, conv, acc, t.l2);
      if constexpr (kTrace)
        if (threadIdx.x == 0) trace_tile(p, tile_count, kTileMainloopDone, ptx::globaltimer_ns());
      if (!t.l2) {
        pending.flush(p, staging);
        epilogue_swiglu_fp8<Roles::kAmaxExchangeBarrier>(l1, t.tile, wg, l1_count++ & 1, smem, slice, acc, staging);
        pending.stored(p, t, staging);
      } else {
        epilogue_l2_writeback(p, t.tile, slice, acc, staging);
      }
      if constexpr (kTrace)
        if (threadIdx.x == 0) trace_tile(p, tile_count, kTileMathDone, ptx::globaltimer_ns());
    }
    end_math_role<kTrace>(p, pending, staging);
    if (wg == 0) wait_issue_turn(0);  // consume warpgroup 1's last hand-over
    ptx::setmaxnreg_dec<Roles::kCommonRegisters>();
  }

  finish_call<kTrace>(p, routing_ok);
}

}  // namespace symmoe::mega::kernel

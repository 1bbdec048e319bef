// TMA producer of the fused kernel with FP4 weights: producer.cuh's per-tile protocol (the first
// kEarlyWeightStages stages get their weights before the wait for the tile's rows, their rows after it) on the GEMM
// core's FP4 stages (kernels/gemm/producer_fp4.cuh). Per stage: wait empty, one arrive_expect_tx on raw_full for
// all of the stage's bytes, TMA of the packed FP4 weight tile [256, 64 B] and its code words [256] int32, and of A
// and A's scales (now, or after the row wait for the early stages).
// That is all: the math warpgroups convert (math_fp4.cuh) and take the base codes from the B scales they load anyway.
// Every raw_full the math warps wait on gets this thread's arrive and its bytes: after a timed-out row wait it loads
// anyway, as producer.cuh does.
// NOTES: registers (MegaRoles::kDataRegisters, 56). The early loop + main loop of producer.cuh is kept: one loop
// with the row wait at kb == num_early spilled more. The trace lines are producer.cuh's.
#pragma once

#include "kernels/mega/producer.cuh"

namespace symmoe::mega::kernel {

// Waits for stage `pipe` to be free, announces all of the stage's bytes on its raw_full and loads the packed FP4
// weight tile and its code words; A and A's scales follow on the returned raw_full.
template <int BLOCK_N, int BLOCK_M, int kNumStages>
__device__ __forceinline__ uint64_t* announce_fp4_weights(
    const MegaTile& t, const gemm::kernel::GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, true>& smem,
    const gemm::kernel::PipelineState<kNumStages>& pipe, const CUtensorMap* b_map, const CUtensorMap* codes_maps,
    int kb, int b_row, int num_k_blocks) {
  using Layout = gemm::kernel::GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, true>;
  ptx::mbarrier_wait_parity(smem.empty(pipe.stage), pipe.phase ^ 1);
  uint64_t* raw_full = smem.raw_full(pipe.stage);
  ptx::mbarrier_arrive_expect_tx(raw_full, Layout::kStageTxBytes);  // A, its scales, FP4 B and codes
  ptx::tma_load_2d(smem.b_fp4(pipe.stage), b_map, raw_full, kb * 64, b_row);
  ptx::tma_load_2d(smem.codes(pipe.stage), codes_maps + (t.l2 ? 1 : 0), raw_full, t.tile.n_begin,
                   t.tile.expert_idx * num_k_blocks + kb);
  return raw_full;
}

// codes_maps: the W1 codes map, the W2 codes map right after it (MegaTensorMapsFp4).
template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTrace>
__device__ __forceinline__ void run_mega_producer_fp4(
    const MegaParams& p, const gemm::kernel::GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, true>& smem,
    const MegaTensorMaps& maps, const CUtensorMap* codes_maps, MegaScheduler<BLOCK_M, BLOCK_N>& sched) {
  const layout::MegaDims& d = p.ws.dims();
  gemm::kernel::PipelineState<kNumStages> pipe;
  MegaTile t;
  while (sched.next(t)) {
    const CUtensorMap* phase_maps = t.l2 ? &maps.l2_a : &maps.l1_a;  // A, A scales, B (packed FP4)
    const int n = t.l2 ? d.hidden : 2 * d.intermediate;
    const int num_k_blocks = (t.l2 ? d.intermediate : d.hidden) / 128;
    const int b_row = t.tile.expert_idx * n + t.tile.n_begin;
    const int num_early = min(kEarlyWeightStages < kNumStages ? kEarlyWeightStages : kNumStages, num_k_blocks);
    const int sfa_row = t.tile.row_begin & ~(gemm::kernel::kSfaBoxPad - 1);
    gemm::kernel::PipelineState<kNumStages> early = pipe;  // the stages that get their weights before the wait
    for (int kb = 0; kb < num_early; ++kb) {
      announce_fp4_weights<BLOCK_N>(t, smem, pipe, phase_maps + 2, codes_maps, kb, b_row, num_k_blocks);
      pipe.advance();
    }
    wait_tile_inputs_traced<BLOCK_N, kTrace>(p, t);
    for (int kb = 0; kb < num_k_blocks; ++kb) {
      uint64_t* raw_full;
      if (kb < num_early) {
        raw_full = smem.raw_full(early.stage);
        ptx::tma_load_2d(smem.a(early.stage), phase_maps, raw_full, kb * 128, t.tile.row_begin);
        ptx::tma_load_2d(smem.sfa(early.stage), phase_maps + 1, raw_full, sfa_row, kb);
        early.advance();
      } else {
        raw_full = announce_fp4_weights<BLOCK_N>(t, smem, pipe, phase_maps + 2, codes_maps, kb, b_row, num_k_blocks);
        ptx::tma_load_2d(smem.a(pipe.stage), phase_maps, raw_full, kb * 128, t.tile.row_begin);
        ptx::tma_load_2d(smem.sfa(pipe.stage), phase_maps + 1, raw_full, sfa_row, kb);
        pipe.advance();
      }
    }
    if constexpr (kTrace) trace_tile(p, trace_read(p, kTraceNumTiles) - 1, kTileLoadsIssued, ptx::globaltimer_ns());
  }
}

}  // namespace symmoe::mega::kernel

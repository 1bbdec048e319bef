// TMA producer of the fused kernel: the GEMM core's producer (src/kernels/gemm/producer.cuh: per 128-wide K block
// wait for a free stage, announce the bytes, load A, A's scales and B) with the fused kernel's hook in front of
// every tile: wait until its A rows exist. The tile's first kEarlyWeightStages stages get their weights (B) before
// that wait and their rows (A, A's scales) after it; the stage's full barrier expects all three either way.
//   L1 tile: l1_arrival_count[pool block] >= the block's valid rows (the dispatch warps' pulls), site
//            mega_l1_arrival;
//   L2 tile: l2_arrival_mask[pool block] has every L1 n-block's bit (the L1 epilogues), site mega_l2_mask.
// Both are local (gpu-scope acquire) and bounded: a bug shows as a named PeerTimeout with peer -1. After a timed-out
// wait the producer loads anyway (garbage rows), so the math warps never wait on a stage that is never filled and
// the kernel ends; the host raises the recorded error.
// One thread (lane 0 of the producer warp). No clusters (kClusterM 1): the pool blocks of one expert arrive at
// different times, so a multicast partner would wait on the slower block.
#pragma once

#include "kernels/comm/timeout.cuh"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/mega/params.hpp"
#include "kernels/mega/epilogue.cuh"
#include "kernels/mega/scheduler.cuh"
#include "kernels/mega/trace.cuh"
#include "kernels/ptx/sync.cuh"
#include "kernels/ptx/tma.cuh"

namespace symmoe::mega::kernel {

// One wait_until for both phases (one inlined copy of the timeout path: the producer runs at the data warpgroup's
// few registers, MegaRoles::kDataRegisters).
template <int BLOCK_N>
__device__ __forceinline__ void wait_tile_inputs(const MegaParams& p, const MegaTile& t) {
  const bool l2 = t.l2;
  const void* counter = l2 ? static_cast<const void*>(p.ws.get_l2_arrival_mask(uint64_t(t.pool_block)))
                           : static_cast<const void*>(p.ws.get_l1_arrival_count(uint64_t(t.pool_block)));
  const uint64_t need = l2 ? l2_full_mask<BLOCK_N>(p.ws.dims().intermediate) : uint64_t(t.tile.num_rows);
  comm::wait_until(
      p.ctx, l2 ? layout::WaitSite::kMegaL2Mask : layout::WaitSite::kMegaL1Arrival, -1, counter, need,
      [&] {
        return l2 ? ptx::ld_acquire_gpu(static_cast<const uint64_t*>(counter))
                  : uint64_t(ptx::ld_acquire_gpu(static_cast<const uint32_t*>(counter)));
      },
      [&](uint64_t v) { return l2 ? (v & need) == need : v >= need; });
  ptx::fence_proxy_async_global();  // the rows were written by the generic proxy; TMA reads through the async one
}

// wait_tile_inputs, stamped into the trace when traced. NOTES: no trace value stays live across the wait (each costs
// the data-role thread registers and spilled): the tile's slot is this CTA's tile count (only this thread adds to
// it), and the wait time is added as -start before and +ready after (the same sum modulo 2^64; the host reads it
// after the kernel).
template <int BLOCK_N, bool kTrace>
__device__ __forceinline__ void wait_tile_inputs_traced(const MegaParams& p, const MegaTile& t) {
  if constexpr (kTrace) {
    const uint64_t wait_start = ptx::globaltimer_ns();
    trace_add(p, kTraceProducerWaitNs, 0ull - wait_start);
    const unsigned long long slot = trace_add(p, kTraceNumTiles, 1);
    trace_tile(p, slot, kTileWaitStart, wait_start);
    trace_tile(p, slot, kTileId, trace_tile_id(t.l2, t.tile.expert_idx, t.tile.n_begin / BLOCK_N, t.pool_block));
  }
  wait_tile_inputs<BLOCK_N>(p, t);
  if constexpr (kTrace) {
    const uint64_t ready = ptx::globaltimer_ns();
    trace_add(p, kTraceProducerWaitNs, ready);
    trace_tile(p, trace_read(p, kTraceNumTiles) - 1, kTileInputsReady, ready);
  }
}

// Stages whose weights are loaded before the wait for the tile's rows. NOTES: 3, not all: with every stage early,
// the burst of weight loads at the start queues the peers' row reads of the pull behind it in HBM, and 1-token
// calls are slower (the measured counts: docs/notes/mega.md).
constexpr int kEarlyWeightStages = 3;

// The producer loop of both weight formats. `stages` gives a stage's protocol:
//   uint64_t* begin(const PipelineState&)  waits for the stage to be free, announces all of its bytes on its full
//                                          barrier and returns that barrier;
//   uint64_t* full(int stage)              the stage's full barrier;
//   void weights(const PipelineState&, uint64_t* full, const MegaTile&, const CUtensorMap* b_map, int kb, int b_row,
//                int num_k_blocks)         loads the stage's weights (B, and what else the format needs);
//   kWeightsFirst                          a stage loaded after the row wait issues its weights before A (else
//                                          after A's scales).
// Every stage the math warps wait on gets its arrive and all of its bytes: after a timed-out row wait the loads
// happen anyway (garbage rows), so the kernel ends and the host raises the recorded error.
template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTrace, typename Smem, typename Stages>
__device__ __forceinline__ void run_mega_producer_loop(const MegaParams& p, const Smem& smem,
                                                       const MegaTensorMaps& maps,
                                                       MegaScheduler<BLOCK_M, BLOCK_N>& sched, const Stages& stages) {
  const layout::MegaDims& d = p.ws.dims();
  gemm::kernel::PipelineState<kNumStages> pipe;
  MegaTile t;
  while (sched.next(t)) {
    // NOTES: the weights of the tile's first stages go straight into shared memory before the wait (they do not
    // depend on the rows), so the pull / the L1 epilogues overlap the first weight loads. No L2 prefetch
    // (cp.async.bulk.prefetch) of the tile's weights while the rows are not there: it was slower
    // (docs/notes/mega.md).
    const CUtensorMap* phase_maps = t.l2 ? &maps.l2_a : &maps.l1_a;  // A, A scales, B
    const int n = t.l2 ? d.hidden : 2 * d.intermediate;
    const int num_k_blocks = (t.l2 ? d.intermediate : d.hidden) / 128;
    const int b_row = t.tile.expert_idx * n + t.tile.n_begin;
    const int num_early = min(kEarlyWeightStages < kNumStages ? kEarlyWeightStages : kNumStages, num_k_blocks);
    gemm::kernel::PipelineState<kNumStages> early = pipe;  // the stages that get their weights before the wait
    for (int kb = 0; kb < num_early; ++kb) {
      stages.weights(pipe, stages.begin(pipe), t, phase_maps + 2, kb, b_row, num_k_blocks);
      pipe.advance();
    }
    wait_tile_inputs_traced<BLOCK_N, kTrace>(p, t);
    const int sfa_row = t.tile.row_begin & ~(gemm::kernel::kSfaBoxPad - 1);
    for (int kb = 0; kb < num_k_blocks; ++kb) {
      if (kb < num_early) {
        uint64_t* full = stages.full(early.stage);
        ptx::tma_load_2d(smem.a(early.stage), phase_maps, full, kb * 128, t.tile.row_begin);
        ptx::tma_load_2d(smem.sfa(early.stage), phase_maps + 1, full, sfa_row, kb);
        early.advance();
      } else {
        uint64_t* full = stages.begin(pipe);
        if constexpr (Stages::kWeightsFirst) stages.weights(pipe, full, t, phase_maps + 2, kb, b_row, num_k_blocks);
        ptx::tma_load_2d(smem.a(pipe.stage), phase_maps, full, kb * 128, t.tile.row_begin);
        ptx::tma_load_2d(smem.sfa(pipe.stage), phase_maps + 1, full, sfa_row, kb);
        if constexpr (!Stages::kWeightsFirst) stages.weights(pipe, full, t, phase_maps + 2, kb, b_row, num_k_blocks);
        pipe.advance();
      }
    }
    if constexpr (kTrace) trace_tile(p, trace_read(p, kTraceNumTiles) - 1, kTileLoadsIssued, ptx::globaltimer_ns());
  }
}

// FP8 weights: per stage one full barrier for A, its scales and the B tile. Layout: the GEMM core's shared memory
// (MegaSmemLayout::Core, any of the cores).
template <typename Layout, int kNumStages>
struct Fp8ProducerStages {
  using Pipe = gemm::kernel::PipelineState<kNumStages>;
  static constexpr bool kWeightsFirst = false;
  const Layout& smem;

  __device__ __forceinline__ uint64_t* begin(const Pipe& pipe) const {
    ptx::mbarrier_wait_parity(smem.empty(pipe.stage), pipe.phase ^ 1);
    uint64_t* full = smem.full(pipe.stage);
    ptx::mbarrier_arrive_expect_tx(full, Layout::kStageTxBytes);  // A, its scales and B
    return full;
  }
  __device__ __forceinline__ uint64_t* full(int stage) const { return smem.full(stage); }
  __device__ __forceinline__ void weights(const Pipe& pipe, uint64_t* full, const MegaTile&, const CUtensorMap* b_map,
                                          int kb, int b_row, int) const {
    ptx::tma_load_2d(smem.b(pipe.stage), b_map, full, kb * 128, b_row);
  }
};

template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTrace, typename Layout>
__device__ __forceinline__ void run_mega_producer(const MegaParams& p, const Layout& smem, const MegaTensorMaps& maps,
                                                  MegaScheduler<BLOCK_M, BLOCK_N>& sched) {
  run_mega_producer_loop<BLOCK_M, BLOCK_N, kNumStages, kTrace>(p, smem, maps, sched,
                                                               Fp8ProducerStages<Layout, kNumStages>{smem});
}

}  // namespace symmoe::mega::kernel

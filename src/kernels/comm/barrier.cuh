// Cross-rank barrier over symmetric memory, self-resetting (alternating phase and sign), bounded by timeouts.
//
// Each rank owns slots[2 parities][R sources] in its SyncArea. Barrier number e (the rank's epoch) uses parity
// p = e & 1 and sign s = (e >> 1) & 1: every rank adds +1 (s = 0) or -1 (s = 1) to slot[p][self] on every rank,
// then waits until all its own slot[p][*] read 1 (s = 0) or 0 (s = 1). A slot of parity p is touched again only
// at epoch e + 2, which no rank reaches before every rank has left epoch e + 1, hence left e: no reset, no drift.
// Per-source slots let a timed-out wait name the peer that did not arrive.
// NOTES: one-CTA round trip ~ one NVLink flag latency (~0.7 us one way); rank_barrier adds two grid syncs.
#pragma once

#include <cstdint>

#include "kernels/comm/grid_sync.cuh"
#include "kernels/comm/sym_buffer.cuh"

namespace symmoe::comm {

// Called by all threads of ONE CTA (the first warp does the work). Orders every write this CTA (and, through a
// preceding grid_sync, the whole rank) made before the barrier before every peer's reads after it.
__device__ __forceinline__ bool cross_rank_barrier_block(const SymBuffer& sym, const layout::SyncArea& area,
                                                         const layout::WaitContext& ctx) {
  int ok = 1;
  if (threadIdx.x < 32) {
    const uint32_t lane = threadIdx.x;
    const uint32_t epoch = *area.barrier_epoch();
    const uint32_t parity = epoch & 1u, sign = (epoch >> 1) & 1u;
    const uint32_t delta = sign ? 0xffffffffu : 1u;  // -1 / +1
    const uint32_t target = sign ? 0u : 1u;
    __syncwarp();
    // Release pattern: one sys-scope fence (cumulative: covers the writes this rank's CTAs ordered before us
    // through the grid sync), then relaxed reductions. red.release would fence a second time (~0.4 us more).
    ptx::fence_acq_rel_sys();
    for (uint32_t peer = lane; peer < sym.num_ranks; peer += 32)
      ptx::red_add_relaxed_sys(sym.map(area.barrier_slot(parity, sym.rank), peer), delta);
    for (uint32_t peer = lane; peer < sym.num_ranks && ok; peer += 32)
      ok = wait_eq_sys(ctx, layout::WaitSite::kBarrier, int(peer), area.barrier_slot(parity, peer), target);
    ok = __all_sync(0xffffffffu, ok);
    if (lane == 0 && ok) *area.barrier_epoch() = epoch + 1;
  }
  return __syncthreads_and(ok) != 0;
}

// Whole-rank barrier for a persistent kernel: every CTA calls it. Returns false if any wait of this rank failed.
__device__ __forceinline__ bool rank_barrier(const SymBuffer& sym, const layout::SyncArea& area,
                                             const layout::WaitContext& ctx) {
  if (!grid_sync(area.grid_sync_counter(), ctx)) return false;
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) cross_rank_barrier_block(sym, area, ctx);
  // CTA 0 joins the second grid sync even after a failed wait, so the others learn of it without timing out.
  return grid_sync(area.grid_sync_counter(), ctx) && !aborted(ctx);
}

}  // namespace symmoe::comm

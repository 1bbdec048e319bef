// The one cross-rank barrier of an EP kernel (dispatch and combine each have exactly one), without grid syncs:
// CTA 0 arrives (its sys-scope fence publishes what this rank wrote before: the counts), and EVERY CTA polls this
// rank's own barrier slots, so no grid-wide release follows (comm::rank_barrier costs two grid syncs more).
// Slot protocol as kernels/comm/barrier.cuh: epoch e uses parity e & 1 and sign (e >> 1) & 1.
// The epoch is read by every CTA when the kernel starts and advanced by the LAST CTA to depart (a counter in the
// EP layout), so no CTA can see an advanced epoch inside the kernel. Why one barrier per kernel is enough for the
// slot reuse argument: a peer touches parity p again at epoch e + 2 only after passing e + 1, i.e. after this
// rank's CTA 0 entered its next EP kernel, when every CTA of kernel e (and its polls) has finished (stream order).
// It also keeps the guarantee the EP protocols need: a rank writes into a peer only after that peer entered the
// same call, i.e. finished reading its outputs of the previous call.
// NOTES: cost = one fence + one NVLink flag latency (~1.5 us) instead of grid sync + barrier + grid sync.
#pragma once

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/comm/timeout.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

// Every thread of every CTA. `epoch` = *area.barrier_epoch() read at kernel start. Returns false on a timeout (or
// when the rank aborted); the caller must still call depart().
__device__ __forceinline__ bool entry_barrier(const comm::SymBuffer& sym, const layout::SyncArea& area,
                                              const layout::WaitContext& ctx, uint32_t epoch) {
  int ok = 1;
  if (threadIdx.x < 32) {
    const uint32_t lane = threadIdx.x;
    const uint32_t parity = epoch & 1u, sign = (epoch >> 1) & 1u;
    const uint32_t target = sign ? 0u : 1u;
    if (blockIdx.x == 0) {
      // Release: one cumulative sys-scope fence over the CTA's writes (ordered before by the caller's
      // __syncthreads), then relaxed reductions (as cross_rank_barrier_block).
      ptx::fence_acq_rel_sys();
      for (uint32_t peer = lane; peer < sym.num_ranks; peer += 32)
        ptx::red_add_relaxed_sys(sym.map(area.barrier_slot(parity, sym.rank), peer), sign ? 0xffffffffu : 1u);
    }
    for (uint32_t peer = lane; peer < sym.num_ranks && ok; peer += 32)
      ok = comm::wait_eq_sys(ctx, layout::WaitSite::kBarrier, int(peer), area.barrier_slot(parity, peer), target);
  }
  return __syncthreads_and(ok) != 0;
}

// Every CTA, once, after its entry barrier (whether it succeeded or not) and after its last read of anything
// `last_cta` resets. The last CTA advances the epoch and runs `last_cta()` (one thread): per-call state whose
// readers are all past this point.
template <typename LastCta>
__device__ __forceinline__ void depart(uint32_t* departures, const layout::SyncArea& area, uint32_t epoch,
                                       LastCta last_cta) {
  __syncthreads();  // every thread of this CTA is past its reads
  if (threadIdx.x == 0) {
    ptx::fence_acq_rel_gpu();
    if (ptx::atom_add_acq_rel_gpu(departures, 1u) == gridDim.x - 1) {
      *departures = 0u;
      *area.barrier_epoch() = epoch + 1;
      last_cta();
    }
  }
}

}  // namespace symmoe::ep

// Grid-wide barrier of one rank's persistent kernel (all CTAs must be co-resident: the plan limits the grid to the
// rank's SM share). Self-resetting: CTA 0 adds 0x80000000 - (n - 1), the others add 1, so one complete round adds
// exactly 2^31 and flips bit 31; each CTA waits for the flip relative to the value it saw when arriving.
// NOTES: the counter's low 31 bits are 0 between rounds, so rounds never need clearing (CUDA graphs replay
// freely). Cost ~1-2 us per sync (one gpu-scope atomic round trip per CTA).
#pragma once

#include <cstdint>

#include "kernels/comm/timeout.cuh"

namespace symmoe::comm {

// Called by every thread of every CTA. Returns false when the wait timed out (or the rank aborted).
__device__ __forceinline__ bool grid_sync(uint32_t* counter, const layout::WaitContext& ctx) {
  __syncthreads();
  int ok = 1;
  if (threadIdx.x == 0) {
    const uint32_t num_ctas = gridDim.x * gridDim.y * gridDim.z;
    const bool is_first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const uint32_t add = is_first ? 0x80000000u - (num_ctas - 1) : 1u;
    ptx::fence_acq_rel_gpu();  // publish this CTA's writes (ordered before by __syncthreads)
    const uint32_t old = ptx::atom_add_acq_rel_gpu(counter, add);
    const uint32_t target_bit = ~old & 0x80000000u;
    // NOTES: a grid sync may wait for a CTA that itself waits on a peer (e.g. CTA 0 in rank_barrier); twice the
    // timeout lets that cross-rank wait expire first and record the stalled peer, then this one aborts quietly.
    layout::WaitContext local_ctx = ctx;
    local_ctx.timeout_ns = 2 * ctx.timeout_ns;
    ok = wait_until(
        local_ctx, layout::WaitSite::kGridSync, -1, counter, target_bit,
        [&] { return uint64_t(ptx::ld_acquire_gpu(counter)); },
        [&](uint64_t v) { return (uint32_t(v) & 0x80000000u) == target_bit; });
  }
  return __syncthreads_and(ok) != 0;
}

}  // namespace symmoe::comm

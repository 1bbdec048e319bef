// Per-warp staging of rows in shared memory for 1-D bulk copies (global -> shared -> global, local or peer).
// A warp owns num_buffers (1 or 2) buffers of `stride` bytes and one mbarrier per buffer. acquire() waits until
// the buffer's previous bulk stores have READ it (wait_group.read: every lane commits exactly one bulk group per
// acquire, possibly empty, so the per-thread group counts stay in step), wait_loaded() waits for the bulk loads
// of the current use. The caller drains (drain_bulk_stores) before a barrier that publishes the stores.
// NOTES: buffer b is at buf0 + b * stride and its barrier at bar0 + b (no dynamically indexed arrays: they would
// live in local memory). With 2 buffers a warp overlaps the load of row i+1 with the stores of row i.
#pragma once

#include <cstdint>

#include "kernels/ep/common.cuh"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

struct Stager {
  uint8_t* buf0;
  uint64_t* bar0;
  uint32_t stride;
  int num_buffers;
  int next;
  uint32_t phase_bits;

  // Lane 0 initialises the warp's barriers; the caller fences (fence_mbarrier_init) and syncs the CTA.
  __device__ __forceinline__ void init(uint8_t* buffers, uint64_t* barriers, uint32_t stride_, int num_buffers_) {
    buf0 = buffers, bar0 = barriers, stride = stride_, num_buffers = num_buffers_, next = 0, phase_bits = 0;
    if (lane_id() == 0)
      for (int b = 0; b < num_buffers; ++b) ptx::mbarrier_init(bar0 + b, 1);
  }
  __device__ __forceinline__ int acquire() {
    const int b = next;
    next = b + 1 == num_buffers ? 0 : b + 1;
    if (num_buffers == 2)
      ptx::bulk_wait_group_read<1>();
    else
      ptx::bulk_wait_group_read<0>();
    __syncwarp();
    return b;
  }
  __device__ __forceinline__ uint8_t* buffer(int b) const { return buf0 + size_t(b) * stride; }
  __device__ __forceinline__ uint64_t* barrier(int b) const { return bar0 + b; }
  // Lane 0: arm buffer b's barrier for `bytes` and bulk-load them from `src` (global, 16-byte multiple).
  __device__ __forceinline__ void load(int b, const void* src, uint32_t bytes, uint32_t dst_offset = 0,
                                       uint32_t expect_bytes = 0) {
    if (expect_bytes) ptx::mbarrier_arrive_expect_tx(barrier(b), expect_bytes);
    ptx::bulk_load_global_to_shared(buffer(b) + dst_offset, src, bytes, barrier(b));
  }
  // All lanes: the loads of this use of buffer b have landed (local copies only: cannot stall on a peer).
  __device__ __forceinline__ void wait_loaded(int b) {
    ptx::mbarrier_wait_parity(barrier(b), (phase_bits >> b) & 1u);
    phase_bits ^= 1u << b;
  }
  __device__ __forceinline__ void commit() { ptx::bulk_commit_group(); }
};

// Completes this thread's bulk stores and orders them (async proxy) before the releasing barrier that follows.
__device__ __forceinline__ void drain_bulk_stores() {
  ptx::bulk_wait_group<0>();
  ptx::fence_proxy_async_global();
}

// One warp: bulk-copies `bytes` from global `src` to `dst` (global, local or peer; null on lanes that do not
// store) through a staging buffer; every lane with a non-null dst issues its own store (fan-out).
__device__ __forceinline__ void relay_row(Stager& st, const void* src, uint32_t bytes, void* dst) {
  const int b = st.acquire();
  if (lane_id() == 0) st.load(b, src, bytes, 0, bytes);
  st.wait_loaded(b);
  if (dst) ptx::bulk_store_shared_to_global(dst, st.buffer(b), bytes);
  st.commit();
}

}  // namespace symmoe::ep

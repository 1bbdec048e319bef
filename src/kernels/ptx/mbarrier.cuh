// mbarrier wrappers (shared-memory transaction barriers, sm_90). One function per instruction.
// NOTES: parity waits: a barrier's phase flips each time its pending count reaches zero; waiters pass the
// parity of the phase they wait to complete (0 for the first completion).
#pragma once

#include <cstdint>

namespace symmoe::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrive_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrive_count) : "memory");
}

// Makes mbarrier.init visible to the async proxy (TMA) and to the other CTAs of the cluster.
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}" ::"r"(smem_addr(bar))
               : "memory");
}

// Arrive on the barrier at this address in CTA `cta_id` of the cluster (the address is this CTA's), release at
// CTA scope only: enough to release a stage whose shared-memory reads have completed (CUTLASS's cluster arrive),
// and cheaper than a cluster-scope release.
__device__ __forceinline__ void mbarrier_arrive_remote_release_cta(uint64_t* bar, uint32_t cta_id) {
  asm volatile(
      "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(smem_addr(bar)),
      "r"(cta_id)
      : "memory");
}

// The shared::cluster address of the object at shared::cta address `smem_byte_addr` in CTA `cta_id` of the cluster.
__device__ __forceinline__ uint32_t mapa_shared_cluster(uint32_t smem_byte_addr, uint32_t cta_id) {
  uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_byte_addr), "r"(cta_id));
  return remote;
}

// Arrive on the barrier at shared::cluster address `cluster_addr` (mapa_shared_cluster), release at CTA scope (as
// mbarrier_arrive_remote_release_cta).
__device__ __forceinline__ void mbarrier_arrive_cluster_addr(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(cluster_addr) : "memory");
}

// Arrive and announce `tx_bytes` bytes that async copies will complete on this barrier.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(tx_bytes)
               : "memory");
}

// One bounded probe: true once the phase with `parity` has completed.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(done)
               : "r"(smem_addr(bar)), "r"(parity)
               : "memory");
  return done != 0;
}

// Local (intra-CTA) wait: only for barriers whose producers are in this CTA or its cluster and cannot stall
// on another rank. Cross-rank waits go through kernels/comm/timeout.cuh instead.
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

}  // namespace symmoe::ptx

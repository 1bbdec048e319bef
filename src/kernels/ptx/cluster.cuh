// Thread-block cluster primitives (sm_90). One function per instruction.
#pragma once

#include <cstdint>

namespace symmoe::ptx {

__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// Every thread of every CTA in the cluster arrives, then waits: release/acquire at cluster scope.
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The kernel's start: every thread of every CTA of the cluster meets (barrier and mbarrier inits visible cluster-wide);
// without a cluster, the CTA's threads.
template <int kClusterSize>
__device__ __forceinline__ void cluster_or_cta_sync() {
  if constexpr (kClusterSize > 1) {
    cluster_arrive_release();
    cluster_wait_acquire();
  } else {
    __syncthreads();
  }
}

}  // namespace symmoe::ptx

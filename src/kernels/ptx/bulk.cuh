// 1-D bulk copies (cp.async.bulk, the TMA engine without a tensor map) between global memory (local or a peer's,
// through SymBuffer::map) and shared memory. One function per instruction.
// NOTES: sizes are multiples of 16 bytes, addresses 16-byte aligned. Loads complete on an mbarrier (arm it with
// mbarrier_arrive_expect_tx(bar, bytes) first); stores complete in bulk groups (commit, then wait). A bulk store's
// source written by generic stores needs fence_proxy_async_shared_cta() first; readers of a bulk store's
// destination on other ranks need wait_group + fence_proxy_async_global() + a release before the flag.
#pragma once

#include <cstdint>

#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::ptx {

// global (local or peer) -> shared; completes `bytes` transactions on `bar`.
__device__ __forceinline__ void bulk_load_global_to_shared(void* smem_dst, const void* gmem_src, uint32_t bytes,
                                                           uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(smem_dst)),
               "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

// shared -> global (local or peer); tracked by the current bulk group.
__device__ __forceinline__ void bulk_store_shared_to_global(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst), "r"(smem_addr(smem_src)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Wait until at most kPending groups are outstanding, writes complete.
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}

// Wait until at most kPending groups still read their shared-memory source (the source may be reused).
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

}  // namespace symmoe::ptx

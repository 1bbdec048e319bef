// TMA (cp.async.bulk.tensor) and async-proxy fences (sm_90). One function per instruction.
// NOTES: a TMA load completes `box bytes` on the mbarrier even where the box leaves the tensor (zero fill), so
// expect_tx always counts whole boxes.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ptx {

__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// 2-D tile load global -> this CTA's shared memory; completes on `bar` (this CTA).
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int32_t c_inner,
                                            int32_t c_outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c_inner), "r"(c_outer)
      : "memory");
}

// Same tile written to the same smem offset of every CTA in `cta_mask` (cluster); each completes on its own
// barrier at the same offset as `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                                      int32_t c_inner, int32_t c_outer, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c_inner), "r"(c_outer), "h"(cta_mask)
      : "memory");
}

// 2-D tile store this CTA's shared memory -> global, tracked by the current bulk group (bulk_commit_group,
// bulk_wait_group[_read] in bulk.cuh). Elements of the box outside the tensor are not written.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem_src, int32_t c_inner,
                                             int32_t c_outer) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(smem_src)), "r"(c_inner), "r"(c_outer)
               : "memory");
}

// fence_proxy_async_shared_cta (generic shared-memory writes before async-proxy reads) lives in ptx/sync.cuh with
// the other fences: one definition, so kernels can include both headers.

}  // namespace symmoe::ptx

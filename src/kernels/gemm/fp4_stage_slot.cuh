// The per-stage slot of the FP4 raw stages (smem_layout.hpp): 8 bytes the converters read after raw_full, next to
// the stage's FP4 tile and code words (fp4_converter.cuh): the tile's two base codes (grouped GEMM), the stage
// descriptor (fused kernel, Fp4StageDesc), or the stop mark. The producer thread does not store into the slot: it
// stores the value into the stage's source slot and the TMA engine copies the source into the slot (cp.async.bulk
// shared -> shared, 16 bytes), completing on raw_full with the stage's other bytes (kStageTxBytes counts it). So
// every byte the converters read from a raw stage arrives by the async proxy and is counted on raw_full, and no
// shared word passes between threads through generic stores ordered only by a transaction-count phase.
// The source of stage s is free when the producer has waited empty of s: the previous copy out of it completed
// before that stage's raw_full phase, which every arrive on empty follows.
// NOTES: the value is computed (and its global loads issued) before the empty wait; after it, one
// st.shared, fence.proxy.async and one bulk copy per K block, issued after the stage's tile loads.
#pragma once

#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::gemm::kernel {

constexpr int kFp4StopMark = -1;  // base code of the stage after the last one (real codes are >= 0)

// After the empty wait of `stage` and the arrive on its raw_full that counts kFp4SlotBytes.
template <class Layout>
__device__ __forceinline__ void copy_fp4_stage_slot(const Layout& smem, int stage, int2 value) {
  *smem.fp4_slot_source(stage) = make_int4(value.x, value.y, 0, 0);
  ptx::fence_proxy_async_shared_cta();  // the generic store -> visible to the bulk copy (async proxy)
  ptx::bulk_copy_shared_to_shared(smem.fp4_base_codes(stage), smem.fp4_slot_source(stage), Layout::kFp4SlotBytes,
                                  smem.raw_full(stage));
}

// The stop mark on `stage` (the stage after the producer's last one): no other bytes.
template <class Layout>
__device__ __forceinline__ void publish_fp4_stop_mark(const Layout& smem, int stage, uint32_t empty_parity) {
  ptx::mbarrier_wait_parity(smem.empty(stage), empty_parity);
  ptx::mbarrier_arrive_expect_tx(smem.raw_full(stage), Layout::kFp4SlotBytes);
  copy_fp4_stage_slot(smem, stage, make_int2(kFp4StopMark, kFp4StopMark));
}

}  // namespace symmoe::gemm::kernel

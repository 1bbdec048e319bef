// Dispatch role: each warp walks its token range in order, assigns slots (fresh) or reads them from the handle
// (cached), builds each token record in shared memory and PUSHES it whole to every destination rank's receive
// region recv_tokens[src][slot] with 1-D bulk copies (cp.async.bulk shared -> peer global).
//
// Why push with bulk copies: the sender knows the slot right after its scan, one bulk store per (token, rank)
// moves the whole record (x, scales, routing, expert positions, src idx) with no per-element SM work, and DESIGN.md
// 2 measured push saturating NVLink with ~16 SMs against ~32 for pull.
// Pipeline per warp: kBuffers staged records (2 when they fit). For token i: wait until buffer i % kBuffers has
// been read by its previous stores (bulk wait_group.read), bulk-load x (and scales) into it on an mbarrier while
// the lanes write the metadata, fence the generic writes to the async proxy, then every master lane issues one
// bulk store to its destination; every lane commits one (possibly empty) bulk group per token so the per-thread
// group counts stay in step. The caller drains (wait_group 0 + proxy fence) before the releasing barrier.
#pragma once

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/ep/common.cuh"
#include "kernels/ep/stager.cuh"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

// Pushes token t (whole warp). lane < K carries its lane's routing; master lanes carry their destination slot.
__device__ __forceinline__ void push_token(const DispatchParams& p, Stager& st, int t, const LaneRoute& r, int slot,
                                           int expert_pos, float weight) {
  const layout::TokenRecord& rec = p.layout.token_record();
  const int K = p.layout.dims().num_topk, lane = lane_id();
  const int b = st.acquire();
  uint8_t* buf = st.buffer(b);
  const bool sf_bulk = p.sf_row_bytes % 16 == 0;
  if (lane == 0) {
    st.load(b, p.x + int64_t(t) * p.x_row_bytes, rec.x_bytes, rec.x_offset,
            rec.x_bytes + (sf_bulk ? uint32_t(p.sf_row_bytes) : 0u));
    if (sf_bulk && p.sf_row_bytes > 0)
      st.load(b, p.x_sf + int64_t(t) * p.sf_row_bytes, uint32_t(p.sf_row_bytes), rec.scales_offset);
    *reinterpret_cast<int32_t*>(buf + rec.src_idx_offset) = p.rank * p.layout.dims().num_max_tokens_per_rank + t;
  }
  if (!sf_bulk) {  // packed UE8M0 rows that are not 16-byte multiples: 4-byte generic copies
    const auto* src = reinterpret_cast<const uint32_t*>(p.x_sf + int64_t(t) * p.sf_row_bytes);
    auto* dst = reinterpret_cast<uint32_t*>(buf + rec.scales_offset);
    for (int i = lane; i < p.sf_row_bytes / 4; i += 32) dst[i] = src[i];
  }
  if (lane < K) {
    reinterpret_cast<int32_t*>(buf + rec.topk_idx_offset)[lane] = int32_t(r.expert);
    reinterpret_cast<float*>(buf + rec.topk_weights_offset)[lane] = weight;
    reinterpret_cast<int32_t*>(buf + rec.expert_pos_offset)[lane] = expert_pos;
  }
  ptx::fence_proxy_async_shared_cta();  // generic smem writes -> the bulk stores' reads
  __syncwarp();
  st.wait_loaded(b);
  if (r.master) {
    uint8_t* dst = p.layout.get_recv_token(p.rank, slot).record();
    ptx::bulk_store_shared_to_global(p.sym.map(dst, uint32_t(r.dst_rank)), buf, rec.stride);
  }
  st.commit();
}

// Fresh dispatch, one warp over [begin, end): slots and expert positions from the warp's bases (notify.cuh),
// handle's dst_buffer_slot_idx and topk_idx copy, then the push. bases: this warp's [R + E] row (shared).
__device__ __forceinline__ void dispatch_fresh_range(const DispatchParams& p, Stager& st, int* bases, int begin,
                                                     int end) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, E = dims.num_experts, K = dims.num_topk, El = dims.num_local_experts();
  const int T_max = dims.num_max_tokens_per_rank, lane = lane_id();
  for (int t = begin; t < end; ++t) {
    const int64_t e = load_expert(p.topk_idx, t, K);
    const LaneRoute r = route_lane(e, K, E, El);
    int slot = -1, expert_pos = -1;
    if (r.master) slot = bases[r.dst_rank]++;
    if (r.valid) expert_pos = bases[R + int(e)]++;
    __syncwarp();
    const float weight = lane < K ? p.topk_weights[int64_t(t) * K + lane] : 0.f;
    if (lane < K) {
      p.handle.dst_buffer_slot_idx[int64_t(t) * K + lane] = r.master ? p.rank * T_max + slot : -1;
      p.handle.topk_idx[int64_t(t) * K + lane] = e;
    }
    if (__any_sync(0xffffffffu, r.master)) push_token(p, st, t, r, slot, expert_pos, weight);
  }
}

// Cached dispatch, one warp over [begin, end): routing and slots from the handle.
__device__ __forceinline__ void dispatch_cached_range(const DispatchParams& p, Stager& st, int begin, int end) {
  const auto& dims = p.layout.dims();
  const int E = dims.num_experts, K = dims.num_topk, El = dims.num_local_experts();
  const int T_max = dims.num_max_tokens_per_rank, lane = lane_id();
  for (int t = begin; t < end; ++t) {
    const int64_t e = load_expert(p.handle.topk_idx, t, K);
    LaneRoute r = route_lane(e, K, E, El);
    const int slot_idx = lane < K ? p.handle.dst_buffer_slot_idx[int64_t(t) * K + lane] : -1;
    r.master = slot_idx >= 0;
    const float weight = lane < K ? p.topk_weights[int64_t(t) * K + lane] : 0.f;
    if (__any_sync(0xffffffffu, r.master)) push_token(p, st, t, r, slot_idx - p.rank * T_max, -1, weight);
  }
}

}  // namespace symmoe::ep

// Dispatch role: each warp walks its token range in order, assigns slots (fresh) or reads them from the handle
// (cached) and PUSHES the token to every destination rank: x and the scale row straight into the destination's
// output row (recv_x / recv_scales regions, row = row_base[d] + slot, row_base from notify.cuh's dest_row_bases),
// the routing into its metadata record recv_meta[src][slot].
//
// Why push straight into the output rows: the receiver then copies nothing in non-expand mode (pushing whole
// records and copying them out after a second barrier costs ~240 MB of extra HBM traffic at V3/8192 and a serial
// epilogue, half of the time). The x rows (and 16-byte multiple scale rows) move through the warp's bulk
// pipe (bulk_rows.cuh): loaded once, stored to every destination by the TMA engine, loads started at kernel entry;
// other scale rows and the records go with lane stores. Each CTA counts the tokens it pushed per destination
// (`pushed`, shared) and, after its last push, adds them to the destination's recv_arrivals[src] behind one
// sys-scope fence (signal_arrivals): the receiver places a source's rows as soon as all of them have landed, with
// no second barrier.
#pragma once

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/ep/bulk_rows.cuh"
#include "kernels/ep/common.cuh"
#include "kernels/ep/notify.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

// Pushes token t (whole warp). lane < K carries its lane's routing; master lanes carry their destination slot.
// The x row (and the scale row when pipe.sf) goes through `pipe`, whose next row is t's.
__device__ __forceinline__ void push_token(const DispatchParams& p, const int* row_base, int* pushed, int t,
                                           const LaneRoute& r, int slot, int expert_pos, float weight,
                                           BulkRowPipe& pipe) {
  const int K = p.layout.dims().num_topk, lane = lane_id();
  const uint32_t masters = __ballot_sync(0xffffffffu, r.master);
  uint8_t *x_dst = nullptr, *sf_dst = nullptr, *meta_dst = nullptr;
  if (r.master) {
    const uint32_t d = uint32_t(r.dst_rank);
    const int row = row_base[d] + slot;
    x_dst = p.sym.map(p.layout.get_recv_x_row(row), d);
    sf_dst = p.sym.map(p.layout.get_recv_scales_row(row), d);
    meta_dst = p.sym.map(p.layout.get_recv_meta(p.rank, slot).record(), d);
    atomicAdd(pushed + d, 1);
  }
  // Metadata record: lane k < K writes its fields to every destination, lane 0 the source index.
  const layout::TokenMetaView mv{0, p.layout.token_record()};
  const int32_t src_idx = p.rank * p.layout.dims().num_max_tokens_per_rank + t;
  for (uint32_t rest = masters; rest; rest &= rest - 1) {
    const uint64_t base = __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(meta_dst), __ffs(rest) - 1);
    const layout::TokenMetaView v{base, mv.rec};
    if (lane < K) {
      v.topk_idx()[lane] = int32_t(r.expert);
      v.topk_weights()[lane] = weight;
      v.expert_pos()[lane] = expert_pos;
    }
    if (lane == 0) *v.src_token_global_idx() = src_idx;
  }
  pipe.push_row(x_dst, sf_dst, masters);
  if (p.sf_row_bytes > 0 && !pipe.sf)
    warp_copy4_fanout<false>(p.x_sf + int64_t(t) * p.sf_row_bytes, uint32_t(p.sf_row_bytes), sf_dst, masters);
}

// Fresh dispatch, one warp over [begin, end): slots and expert positions from the warp's bases (notify.cuh),
// handle's dst_buffer_slot_idx and topk_idx copy, then the push. bases: this warp's [R + E] row (shared).
__device__ __forceinline__ void dispatch_fresh_range(const DispatchParams& p, RouteChunk& chunk, const int* row_base,
                                                     int* pushed, int* bases, int begin, int end, BulkRowPipe& pipe) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, E = dims.num_experts, K = dims.num_topk, El = dims.num_local_experts();
  const int T_max = dims.num_max_tokens_per_rank, lane = lane_id(), per_chunk = route_chunk_tokens(K);
  for (int t0 = begin; t0 < end; t0 += per_chunk) {
    const int t1 = min(end, t0 + per_chunk);
    // A range of one chunk kept its routing and weights from count_tokens (one load round trip less).
    if (!range_in_one_chunk(begin, end, K)) load_route_chunk(chunk, p.topk_idx, p.topk_weights, nullptr, t0, t1);
    for (int t = t0; t < t1; ++t) {
      const int64_t e = lane < K ? chunk.expert(t, lane) : int64_t(-1);
      const LaneRoute r = route_lane(e, K, E, El);
      int slot = -1, expert_pos = -1;
      if (r.master) slot = bases[r.dst_rank]++;
      if (r.valid) expert_pos = bases[R + int(e)]++;
      __syncwarp();
      const float weight = lane < K ? chunk.weight(t, lane) : 0.f;
      if (lane < K) {
        p.handle.dst_buffer_slot_idx[int64_t(t) * K + lane] = r.master ? p.rank * T_max + slot : -1;
        p.handle.topk_idx[int64_t(t) * K + lane] = e;
      }
      if (__any_sync(0xffffffffu, r.master))
        push_token(p, row_base, pushed, t, r, slot, expert_pos, weight, pipe);
      else
        pipe.push_row(nullptr, nullptr, 0u);
    }
  }
}

// Cached dispatch, one warp over [begin, end): routing and slots from the handle.
__device__ __forceinline__ void dispatch_cached_range(const DispatchParams& p, RouteChunk& chunk, const int* row_base,
                                                      int* pushed, int begin, int end, BulkRowPipe& pipe) {
  const auto& dims = p.layout.dims();
  const int E = dims.num_experts, K = dims.num_topk, El = dims.num_local_experts();
  const int T_max = dims.num_max_tokens_per_rank, lane = lane_id(), per_chunk = route_chunk_tokens(K);
  for (int t0 = begin; t0 < end; t0 += per_chunk) {
    const int t1 = min(end, t0 + per_chunk);
    load_route_chunk(chunk, p.handle.topk_idx, p.topk_weights, p.handle.dst_buffer_slot_idx, t0, t1);
    for (int t = t0; t < t1; ++t) {
      const int64_t e = lane < K ? chunk.expert(t, lane) : int64_t(-1);
      LaneRoute r = route_lane(e, K, E, El);
      const int slot_idx = lane < K ? chunk.slot(t, lane) : -1;
      r.master = slot_idx >= 0;
      const float weight = lane < K ? chunk.weight(t, lane) : 0.f;
      if (__any_sync(0xffffffffu, r.master))
        push_token(p, row_base, pushed, t, r, slot_idx - p.rank * T_max, -1, weight, pipe);
      else
        pipe.push_row(nullptr, nullptr, 0u);
    }
  }
}

// Whole CTA after its pushes: pushed[d] tokens -> d's recv_arrivals[rank]. Release pattern: the CTA barrier orders
// every warp's stores before warp 0's sys-scope fence (cumulative), then relaxed reductions.
__device__ __forceinline__ void signal_arrivals(const DispatchParams& p, const int* pushed) {
  __syncthreads();
  if (warp_id() != 0) return;
  ptx::fence_acq_rel_sys();
  for (int d = lane_id(); d < p.layout.dims().num_ranks; d += 32)
    if (pushed[d] > 0)
      ptx::red_add_relaxed_sys(p.sym.map(p.layout.get_recv_arrivals(p.rank), uint32_t(d)), uint32_t(pushed[d]));
}

}  // namespace symmoe::ep

// Combine role, send side (on each rank d that received tokens): every received row goes back to its source's
// combine_recv[token][lane] with warp-wide 16-byte stores into the peer's memory, plus the top-k weights, then
// the row's arrival flag (publish_rows): the source reduces each token as soon as its rows are there, while
// other warps still send (no second barrier; reduce_epilogue.cuh).
//   non-expand: the row of (s, t) -> lane = d's master lane of the token (recv_src_metadata col 1); rows whose
//               source is d itself are NOT copied: the reduce epilogue reads them from x (local_row_of_lane)
//   expand:     the expanded row of lane k -> lane k (one row per routed lane)
//   expand + reduce_local_experts: d sums its lanes in ascending k in fp32 (from 0.f), rounds ONCE to bf16 and
//               sends the partial to its master lane (halves NVLink bytes at K/R = 4).
// Weights: non-expand rows carry all K weights -> combine_weights[t][master][0..K); expand lane k's weight ->
// combine_weights[t][k][k]. The reduce epilogue picks the column of the rank that owns each lane.
// Rows that are copied unchanged move with 16-byte register copies (kCopyVecs vectors per lane in flight, 8 sender
// warps per SM). The reduce_local partial is computed in registers and stored with 16-byte stores.
// NOTES: rows are H*2 bytes, 16-byte aligned.
#pragma once

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/common/combine_sum.cuh"
#include "kernels/ep/common.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

using symmoe::kernel::combine_add8;  // the combine arithmetic (kernels/common/combine_sum.cuh)
using symmoe::kernel::combine_pack8;
using symmoe::kernel::combine_zero8;

// Arrival flags one sent token still has to raise: `lanes` of token t on source s (none when lanes == 0).
struct PendingFlags {
  int s = 0, t = 0;
  uint32_t lanes = 0;
};

// One warp, after writing the rows (and weights) of one token: raises its flags. Release pattern: the warp's
// stores, __syncwarp, then lane 0 fences (sys scope, cumulative over the warp's stores ordered before it by the
// warp barrier) and stores the flags. NOTES: one fence per row, not per several rows: the reducers would wait
// longer for each flag (docs/notes/ep.md).
__device__ __forceinline__ void publish_rows(const CombineParams& p, const PendingFlags& f) {
  if (!f.lanes) return;  // warp-uniform
  __syncwarp();
  if (lane_id() == 0) {
    ptx::fence_acq_rel_sys();
    for (uint32_t rest = f.lanes; rest; rest &= rest - 1)
      ptx::st_relaxed_sys(p.sym.map(p.layout.get_combine_flag(f.t, __ffs(rest) - 1), uint32_t(f.s)), 1u);
  }
  __syncwarp();
}

// One warp: received token i of this rank back to its source; returns the flags to raise (publish_rows).
// list: this warp's 32 ints of shared scratch.
__device__ __forceinline__ PendingFlags combine_send_token(const CombineParams& p, int i, int* list) {
  const auto& dims = p.layout.dims();
  const int K = dims.num_topk, H = dims.hidden, T_max = dims.num_max_tokens_per_rank, lane = lane_id();
  const int32_t* meta = p.handle.recv_src_metadata + int64_t(i) * (2 + K);
  const int src = meta[0];
  const int s = src / T_max, t = src % T_max, master = meta[1] - s * K;
  const uint32_t row_bytes = uint32_t(H) * 2;
  if (!p.expand) {
    if (s == p.rank) return {};  // the reduce reads this row and its weights from x / topk_weights directly
    uint16_t* dst = p.sym.map(p.layout.get_combine_recv_row(t, master), uint32_t(s));
    warp_copy16_fanout<false>(reinterpret_cast<const uint8_t*>(p.x + int64_t(i) * H), row_bytes,
                              reinterpret_cast<uint8_t*>(dst), 1u);
    if (p.topk_weights && lane < K)
      p.sym.map(p.layout.get_combine_weights(t, master), uint32_t(s))[lane] = p.topk_weights[int64_t(i) * K + lane];
    return {s, t, 1u << master};
  }
  const int row = lane < K ? meta[2 + lane] : -1;
  const uint32_t lanes_here = __ballot_sync(0xffffffffu, row >= 0);
  if (p.topk_weights && row >= 0)
    p.sym.map(p.layout.get_combine_weights(t, lane), uint32_t(s))[lane] = p.topk_weights[row];
  if (!p.reduce_local_experts) {
    for (uint32_t rest = lanes_here; rest; rest &= rest - 1) {
      const int k = __ffs(rest) - 1;
      const int r = __shfl_sync(0xffffffffu, row, k);
      uint16_t* dst = p.sym.map(p.layout.get_combine_recv_row(t, k), uint32_t(s));
      warp_copy16_fanout<false>(reinterpret_cast<const uint8_t*>(p.x + int64_t(r) * H), row_bytes,
                                reinterpret_cast<uint8_t*>(dst), 1u);
    }
    return {s, t, lanes_here};
  }
  // Row list in shared memory: broadcast reads, no dynamically indexed registers. The warp barrier first: lanes
  // may still read the previous row's list.
  __syncwarp();
  for (uint32_t rest = lanes_here, n = 0; rest; rest &= rest - 1, ++n) {
    const int r = __shfl_sync(0xffffffffu, row, __ffs(rest) - 1);
    if (lane == 0) list[n] = r;
  }
  __syncwarp();
  const int n = __popc(lanes_here);
  auto* dst = reinterpret_cast<uint4*>(p.sym.map(p.layout.get_combine_recv_row(t, master), uint32_t(s)));
  for (int c = lane; c < H / 8; c += 32) {
    float acc[8];
    combine_zero8(acc);
    for (int j = 0; j < n; ++j) combine_add8(acc, __ldg(reinterpret_cast<const int4*>(p.x + int64_t(list[j]) * H) + c));
    dst[c] = combine_pack8(acc);
  }
  return {s, t, 1u << master};
}

// One sender warp (g of num_warps): received rows g, g + num_warps, ...
__device__ __forceinline__ void combine_send_rows(const CombineParams& p, int g, int num_warps, int num_recv,
                                                  int* list) {
  for (int i = g; i < num_recv; i += num_warps) publish_rows(p, combine_send_token(p, i, list));
}

}  // namespace symmoe::ep

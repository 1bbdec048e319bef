// Reduce epilogue of combine (on each source rank, overlapped with the sends: each token waits for the arrival
// flags of its rows, combine.cuh's publish_rows):
// combined_x[t] = bf16_rne( ((0.f + bias_0) + bias_1) + rows in ascending lane order ), all adds in fp32 (DeepEP
// V2's order: the sum starts from the biases; kernels/common/combine_sum.cuh, shared with the fused layer), the
// rows being: non-expand and expand+reduce_local: the row at each destination's master lane; expand: every routed
// lane's row. combined_topk_weights[t][j] = weight returned by the rank owning lane j (0 for -1 lanes).
// Non-expand: the row (and weights) of this rank's own master lane are never copied (combine.cuh); they are read
// from combine's x / topk_weights at the local received row psum_recv[rank - 1] + slot, without a flag.
// The flags a token waited on are reset to 0 here: no sender writes them again before this rank has entered the
// next combine (its first barrier), so no epochs are needed.
// NOTES: one warp per token, 8 hidden elements (16 bytes) per lane per step, kReduceVecs chunks x 2 rows = 10
// independent 16-byte loads in flight per lane (5: H = 7168 in 6 steps; the most without spills at the
// 128-register cap of kCombineWarps = 16; 7 fit the 168 registers of 12 warps).
#pragma once

#include "kernels/comm/timeout.cuh"
#include "kernels/ep/combine.cuh"

namespace symmoe::ep {

constexpr int kReduceVecs = 5;

// One lane's routing of token t (handle): loaded one token ahead by the caller, so the load latency hides behind
// the previous token's reduce.
struct ReduceRoute {
  int64_t expert;
  int slot;
};
__device__ __forceinline__ ReduceRoute load_reduce_route(const CombineParams& p, int t) {
  const int K = p.layout.dims().num_topk, lane = lane_id();
  ReduceRoute r{-1, -1};
  if (t < p.num_tokens && lane < K) {
    r.expert = p.handle.topk_idx[int64_t(t) * K + lane];
    r.slot = p.handle.dst_buffer_slot_idx[int64_t(t) * K + lane];
  }
  return r;
}

// Non-expand: the first row of combine's x that this rank received from itself (one load per call).
__device__ __forceinline__ int local_first_row(const CombineParams& p) {
  return !p.expand && p.rank > 0 ? p.handle.psum_num_recv_tokens_per_rank[p.rank - 1] : 0;
}

// rows: this warp's 32 row pointers of shared scratch; route: load_reduce_route(p, t); first_row:
// local_first_row(p). Returns false when a flag wait timed out (or the rank aborted): the caller stops.
__device__ __forceinline__ bool reduce_token(const CombineParams& p, int t, const int4** rows, ReduceRoute route,
                                             int first_row) {
  const auto& dims = p.layout.dims();
  const int K = dims.num_topk, H = dims.hidden, El = dims.num_local_experts(), lane = lane_id();
  const int T_max = dims.num_max_tokens_per_rank;
  const int64_t e = route.expert;
  const int slot = route.slot;
  const bool valid = e >= 0;
  const bool include = (p.expand && !p.reduce_local_experts) ? valid : slot >= 0;
  const uint32_t lanes = __ballot_sync(0xffffffffu, include);
  const int dst_rank = valid ? int(e / El) : -1;
  const uint32_t same = __match_any_sync(0xffffffffu, valid ? dst_rank : -1 - lane);
  const int owner_lane = 31 - __clz(same);  // master lane of this lane's destination
  const int owner_slot = __shfl_sync(0xffffffffu, slot, owner_lane);
  // Non-expand rows this rank received from itself: row first_row + slot of combine's x (no copy, no flag).
  const bool local = !p.expand && valid && dst_rank == p.rank;
  const int64_t local_row = first_row + owner_slot - int64_t(p.rank) * T_max;  // valid on `local` lanes

  bool ok = true;
  if (include && !local) {
    uint32_t* flag = p.layout.get_combine_flag(t, lane);
    ok = comm::wait_eq_sys(p.wait, layout::WaitSite::kFlag, dst_rank, flag, 1u);
    if (ok) *flag = 0u;  // consumed (see the header)
  }
  if (!__all_sync(0xffffffffu, ok)) return false;  // acquire by the waiting lanes + warp barrier: rows visible

  if (p.combined_topk_weights && lane < K) {
    float w = 0.f;
    if (local)
      w = __ldg(p.topk_weights + local_row * K + lane);
    else if (valid)
      w = __ldcg(p.expand ? p.layout.get_combine_weights(t, lane) + lane
                          : p.layout.get_combine_weights(t, owner_lane) + lane);
    p.combined_topk_weights[int64_t(t) * K + lane] = w;
  }
  const int4* my_row = reinterpret_cast<const int4*>(p.layout.get_combine_recv_row(t, lane < K ? lane : 0));
  if (local) my_row = reinterpret_cast<const int4*>(p.x + local_row * H);
  for (uint32_t rest = lanes, n = 0; rest; rest &= rest - 1, ++n) {
    const auto r = reinterpret_cast<const int4*>(
        __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(my_row), __ffs(rest) - 1));
    if (lane == 0) rows[n] = r;
  }
  __syncwarp();
  const int n = __popc(lanes);
  auto* out = reinterpret_cast<uint4*>(p.combined_x + int64_t(t) * H);
  const int num_chunks = H / 8;  // 16-byte chunks of 8 bf16
  // Each lane owns chunks c + 32u (u < kReduceVecs): kReduceVecs chunks x 2 rows of loads in flight.
  for (int c = lane; c < num_chunks; c += 32 * kReduceVecs) {
    float acc[kReduceVecs][8];
#pragma unroll
    for (int u = 0; u < kReduceVecs; ++u) {
      combine_zero8(acc[u]);
      const int cu = c + 32 * u;
      if (cu >= num_chunks) continue;
      if (p.bias_0) combine_add8(acc[u], __ldg(reinterpret_cast<const int4*>(p.bias_0 + int64_t(t) * H) + cu));
      if (p.bias_1) combine_add8(acc[u], __ldg(reinterpret_cast<const int4*>(p.bias_1 + int64_t(t) * H) + cu));
    }
    int j = 0;
    for (; j + 2 <= n; j += 2) {
      const int4 *r0 = rows[j], *r1 = rows[j + 1];
      int4 v0[kReduceVecs], v1[kReduceVecs];
#pragma unroll
      for (int u = 0; u < kReduceVecs; ++u)
        if (c + 32 * u < num_chunks) v0[u] = __ldcg(r0 + c + 32 * u), v1[u] = __ldcg(r1 + c + 32 * u);
#pragma unroll
      for (int u = 0; u < kReduceVecs; ++u)
        if (c + 32 * u < num_chunks) combine_add8(acc[u], v0[u]), combine_add8(acc[u], v1[u]);  // ascending lanes
    }
    if (j < n) {
      const int4* r0 = rows[j];
#pragma unroll
      for (int u = 0; u < kReduceVecs; ++u)
        if (c + 32 * u < num_chunks) combine_add8(acc[u], __ldcg(r0 + c + 32 * u));
    }
#pragma unroll
    for (int u = 0; u < kReduceVecs; ++u) {
      const int cu = c + 32 * u;
      if (cu < num_chunks) out[cu] = combine_pack8(acc[u]);
    }
  }
  __syncwarp();
  return true;
}

}  // namespace symmoe::ep

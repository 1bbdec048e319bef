// Reduce epilogue of combine (on each source rank, after the barrier that publishes the returned rows):
// combined_x[t] = bf16_rne( ((0.f + rows in ascending lane order) + bias_0) + bias_1 ), all adds in fp32, the rows
// being: non-expand and expand+reduce_local: the row at each destination's master lane; expand: every routed
// lane's row. combined_topk_weights[t][j] = weight returned by the rank owning lane j (0 for -1 lanes).
// NOTES: one warp per token, 8 hidden elements (16 bytes) per lane per step, K independent loads in flight.
#pragma once

#include "kernels/ep/combine.cuh"

namespace symmoe::ep {

// list: this warp's 32 ints of shared scratch.
__device__ __forceinline__ void reduce_token(const CombineParams& p, int t, int* list) {
  const auto& dims = p.layout.dims();
  const int K = dims.num_topk, H = dims.hidden, El = dims.num_local_experts(), lane = lane_id();
  const int64_t e = lane < K ? p.handle.topk_idx[int64_t(t) * K + lane] : -1;
  const int slot = lane < K ? p.handle.dst_buffer_slot_idx[int64_t(t) * K + lane] : -1;
  const bool valid = e >= 0;
  const bool include = (p.expand && !p.reduce_local_experts) ? valid : slot >= 0;
  const uint32_t lanes = __ballot_sync(0xffffffffu, include);
  const int dst_rank = valid ? int(e / El) : -1;
  const uint32_t same = __match_any_sync(0xffffffffu, valid ? dst_rank : -1 - lane);
  const int owner_lane = 31 - __clz(same);  // master lane of this lane's destination
  if (p.combined_topk_weights && lane < K) {
    float w = 0.f;
    if (valid) w = __ldcg(p.expand ? p.layout.get_combine_weights(t, lane) + lane
                                   : p.layout.get_combine_weights(t, owner_lane) + lane);
    p.combined_topk_weights[int64_t(t) * K + lane] = w;
  }
  for (uint32_t rest = lanes, n = 0; rest; rest &= rest - 1, ++n)
    if (lane == 0) list[n] = __ffs(rest) - 1;
  __syncwarp();
  const int n = __popc(lanes);
  auto* out = reinterpret_cast<int4*>(p.combined_x + int64_t(t) * H);
  const int num_chunks = H / 8;  // 16-byte chunks of 8 bf16
  const auto row = [&](int j) { return reinterpret_cast<const int4*>(p.layout.get_combine_recv_row(t, list[j])); };
  // Each lane owns chunks c + 32u (u < 4): up to 4 chunks x 2 rows = 8 independent 16-byte loads in flight.
  for (int c = lane; c < num_chunks; c += 128) {
    float acc[4][8];
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[u][q] = 0.f;
    int j = 0;
    for (; j + 2 <= n; j += 2) {
      const int4 *r0 = row(j), *r1 = row(j + 1);
      int4 v0[4], v1[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (c + 32 * u < num_chunks) v0[u] = __ldcg(r0 + c + 32 * u), v1[u] = __ldcg(r1 + c + 32 * u);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (c + 32 * u < num_chunks) add_bf16x8(acc[u], v0[u]), add_bf16x8(acc[u], v1[u]);  // ascending lanes
    }
    if (j < n) {
      const int4* r0 = row(j);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (c + 32 * u < num_chunks) add_bf16x8(acc[u], __ldcg(r0 + c + 32 * u));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int cu = c + 32 * u;
      if (cu >= num_chunks) continue;
      if (p.bias_0) add_bf16x8(acc[u], __ldg(reinterpret_cast<const int4*>(p.bias_0 + int64_t(t) * H) + cu));
      if (p.bias_1) add_bf16x8(acc[u], __ldg(reinterpret_cast<const int4*>(p.bias_1 + int64_t(t) * H) + cu));
      out[cu] = pack_bf16x8(acc[u]);
    }
  }
  __syncwarp();
}

}  // namespace symmoe::ep

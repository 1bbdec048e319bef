// Combine role of the fused kernel: after the second rank barrier every L2 row of this rank's tokens sits in
// combine[token][lane] (written by the owning ranks' L2 epilogues). y[t] = bf16_rne(0.f + rows of the routed
// lanes in ascending lane order), all adds in fp32 — exactly the composed path's combine
// (src/kernels/ep/reduce_epilogue.cuh without biases), so both paths round the same sums. A token whose lanes
// are all masked (or invalid ids, as in dispatch.cuh) gets zeros.
// Every warp of every CTA: one (token, 256-channel chunk) per warp and step, 8 channels (16 B) per lane.
#pragma once

#include <cuda_bf16.h>

#include "kernels/mega/params.hpp"

namespace symmoe::mega::kernel {

__device__ __forceinline__ void combine_tokens(const MegaParams& p, int warp_idx, int num_warps, int lane) {
  const layout::MegaDims& d = p.ws.dims();
  const int H = d.hidden, K = d.num_topk;
  // Work item = (token, 256-channel chunk): a lone token spreads over H / 256 warps instead of one warp walking its
  // row serially (a load round trip per chunk: ~37 us for one Flash token, measured with the trace).
  const int chunks_per_token = (H + 255) / 256;  // H % 256 == 128: the last chunk's upper half-warp idles
  for (int item = warp_idx; item < p.num_tokens * chunks_per_token; item += num_warps) {
    const int t = item / chunks_per_token, c = (item % chunks_per_token) * 256 + lane * 8;
    if (c >= H) continue;
    const int64_t* idx = p.ws.get_topk_idx(t);
    float acc[8];
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[q] = 0.f;
    // Lanes in groups of kLoadGroup: every load of a group is issued before the first add (one memory round trip
    // per group, not per lane); the adds stay in ascending lane order.
    constexpr int kLoadGroup = 8;
    for (int k0 = 0; k0 < K; k0 += kLoadGroup) {
      uint4 v[kLoadGroup];
      bool routed[kLoadGroup];
#pragma unroll
      for (int j = 0; j < kLoadGroup; ++j) {
        const int k = k0 + j;
        const int64_t e = k < K ? idx[k] : -1;
        routed[j] = e >= 0 && e < d.num_experts;
        if (routed[j]) v[j] = __ldcg(reinterpret_cast<const uint4*>(p.ws.get_combine_row(t, k) + c));
      }
#pragma unroll
      for (int j = 0; j < kLoadGroup; ++j) {
        if (!routed[j]) continue;
        const uint32_t w[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // bf16 -> fp32 is exact: the bits shifted into the high half
          acc[2 * q] = acc[2 * q] + __uint_as_float(w[q] << 16);
          acc[2 * q + 1] = acc[2 * q + 1] + __uint_as_float(w[q] & 0xffff0000u);
        }
      }
    }
    uint32_t o[4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      o[q] = uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(acc[2 * q]))) |
             (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(acc[2 * q + 1]))) << 16);
    *reinterpret_cast<uint4*>(p.y + size_t(t) * H + c) = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

}  // namespace symmoe::mega::kernel

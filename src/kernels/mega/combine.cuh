// Combine role of the fused kernel: after the second rank barrier every L2 row of this rank's tokens sits in
// combine[token][lane] (written by the owning ranks' L2 epilogues). y[t] = bf16_rne(0.f + rows of the routed
// lanes in ascending lane order), all adds in fp32 — exactly the composed path's combine
// (src/kernels/ep/reduce_epilogue.cuh without biases), so both paths round the same sums. A token whose lanes
// are all masked (or invalid ids, as in dispatch.cuh) gets zeros.
// Every warp of every CTA: one token per warp, 8 channels (16 B) per lane per step.
// Written 2026-11-29, not yet run on a GPU.
#pragma once

#include <cuda_bf16.h>

#include "kernels/mega/params.hpp"

namespace symmoe::mega::kernel {

__device__ __forceinline__ void combine_tokens(const MegaParams& p, int warp_idx, int num_warps, int lane) {
  const layout::MegaDims& d = p.ws.dims();
  const int H = d.hidden, K = d.num_topk;
  for (int t = warp_idx; t < p.num_tokens; t += num_warps) {
    const int64_t* idx = p.ws.get_topk_idx(t);
    for (int c = lane * 8; c < H; c += 32 * 8) {
      float acc[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[q] = 0.f;
      for (int k = 0; k < K; ++k) {
        const int64_t e = idx[k];
        if (e < 0 || e >= d.num_experts) continue;
        const uint4 v = __ldcg(reinterpret_cast<const uint4*>(p.ws.get_combine_row(t, k) + c));
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // bf16 -> fp32 is exact: the bits shifted into the high half
          acc[2 * q] = acc[2 * q] + __uint_as_float(w[q] << 16);
          acc[2 * q + 1] = acc[2 * q + 1] + __uint_as_float(w[q] & 0xffff0000u);
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
}

}  // namespace symmoe::mega::kernel

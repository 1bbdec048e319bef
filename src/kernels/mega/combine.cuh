// Combine role of the fused kernel: after the second rank barrier every L2 row of this rank's tokens sits in
// combine[token][lane] (written by the owning ranks' L2 epilogues). y[t] = bf16_rne(0.f + rows of the routed
// lanes in ascending lane order), all adds in fp32, with the composed path's routines
// (kernels/common/combine_sum.cuh, as src/kernels/ep/reduce_epilogue.cuh without biases), so both paths round the
// same sums. A token whose lanes are all masked (or invalid ids, as in dispatch.cuh) gets zeros.
// Every warp of every CTA: two (token, 256-channel chunk) items per warp and step, 8 channels (16 B) per lane.
#pragma once

#include "kernels/common/combine_sum.cuh"
#include "kernels/mega/params.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::mega::kernel {

constexpr int kMaxTopkPerItem = plan::kMegaMaxTopk;  // checked by MegaPlan::validate

// The fp32 sum of one (token, 8-channel) piece over its routed lanes, ascending, every row load issued first.
struct CombineItem {
  uint4 rows[kMaxTopkPerItem];
  uint32_t routed = 0;  // bit j: lane j is routed (its row was loaded)
};

__device__ __forceinline__ void combine_load(const MegaParams& p, int t, int c, CombineItem& it) {
  const layout::MegaDims& d = p.ws.dims();
  const int64_t* idx = p.ws.get_topk_idx(t);
  it.routed = 0;
#pragma unroll
  for (int k = 0; k < kMaxTopkPerItem; ++k) {
    const int64_t e = k < d.num_topk ? idx[k] : -1;
    if (e >= 0 && e < d.num_experts) {
      it.rows[k] = __ldcg(reinterpret_cast<const uint4*>(p.ws.get_combine_row(t, k) + c));
      it.routed |= 1u << k;
    }
  }
}

__device__ __forceinline__ void combine_store(const MegaParams& p, int t, int c, const CombineItem& it) {
  float acc[8];
  symmoe::kernel::combine_zero8(acc);
#pragma unroll
  for (int k = 0; k < kMaxTopkPerItem; ++k)
    if (it.routed >> k & 1) symmoe::kernel::combine_add8(acc, it.rows[k]);
  *reinterpret_cast<uint4*>(p.y + size_t(t) * p.ws.dims().hidden + c) = symmoe::kernel::combine_pack8(acc);
}

__device__ __forceinline__ void combine_tokens(const MegaParams& p, int warp_idx, int num_warps, int lane) {
  const int H = p.ws.dims().hidden;
  // Work item = (token, 256-channel chunk): a lone token spreads over H / 256 warps instead of one warp walking its
  // row serially (one dependent load round trip per chunk).
  const int chunks_per_token = (H + 255) / 256;  // H % 256 == 128: the last chunk's upper half-warp idles
  const int num_items = p.num_tokens * chunks_per_token;
  // Two items per step, all their row loads issued before the first add: one memory round trip per two items.
  for (int item = warp_idx; item < num_items; item += 2 * num_warps) {
    const int item2 = item + num_warps;
    const int t = item / chunks_per_token, c = (item % chunks_per_token) * 256 + lane * 8;
    const int t2 = item2 / chunks_per_token, c2 = (item2 % chunks_per_token) * 256 + lane * 8;
    const bool has2 = item2 < num_items && c2 < H;
    CombineItem a, b;
    if (c < H) combine_load(p, t, c, a);
    if (has2) combine_load(p, t2, c2, b);
    if (c < H) combine_store(p, t, c, a);
    if (has2) combine_store(p, t2, c2, b);
  }
}

}  // namespace symmoe::mega::kernel

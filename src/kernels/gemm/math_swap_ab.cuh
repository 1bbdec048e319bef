// Swap-A/B math role (small M, decode): the tokens go on WGMMA N. Math warpgroup wg computes weight rows
// [64 wg, 64 wg + 64) of the BLOCK_N = 128 weight rows of the tile x all BLOCK_M tokens with m64n32k32 (A operand =
// the stage's weight tile, B operand = its token tile; both K-major 128B-swizzled as TMA writes them), and promotes
// per 128-wide K block: acc = fmaf(sa[token] * sb, partial, acc), the product and order of math.cuh's promotion.
// Fragment: acc[4 c + 2 r + b] is weight row 16 warp + lane / 4 + 8 r, token 8 c + 2 (lane % 4) + b.
#pragma once

#include "kernels/gemm/math.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M>
struct SwapAbSlice {
  static_assert(BLOCK_M == 32, "swap-A/B: WGMMA N = BLOCK_M = 32 tokens (ptx::wgmma_m64n32k32_e4m3)");
  static constexpr int kNumAcc = 64 * BLOCK_M / 128;  // 64 x BLOCK_M fp32 over the warpgroup's 128 threads
};

template <int BLOCK_M, int BLOCK_N, int kNumStages>
__device__ __forceinline__ void swap_ab_mainloop(const GemmParams& p,
                                                 const GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages>& smem,
                                                 const Tile& tile, int wg, PipelineState<kNumStages>& pipe,
                                                 float (&acc)[SwapAbSlice<BLOCK_M>::kNumAcc]) {
  static_assert(BLOCK_N == 128, "swap-A/B: two warpgroups x 64 weight rows, one 128-row B scale block");
  constexpr int kNumAcc = SwapAbSlice<BLOCK_M>::kNumAcc;
  const int lane = threadIdx.x % 32;
  const int weight_row0 = 64 * wg;
  const int sfa_token0 = 2 * (lane % 4) + (tile.row_begin & (kSfaBoxPad - 1));
  const int num_k_blocks = p.k / 128;
#pragma unroll
  for (int i = 0; i < kNumAcc; ++i) acc[i] = 0.f;
  float partial[kNumAcc];
#pragma unroll
  for (int i = 0; i < kNumAcc; ++i) partial[i] = 0.f;
  for (int kb = 0; kb < num_k_blocks; ++kb) {
    const float sb = load_b_scales<EpilogueKind::kBf16>(p, tile, weight_row0, kb).x;
    ptx::mbarrier_wait_parity(smem.full(pipe.stage), pipe.phase);
    float sa[kNumAcc / 4][2];
#pragma unroll
    for (int c = 0; c < kNumAcc / 4; ++c)
#pragma unroll
      for (int b = 0; b < 2; ++b) sa[c][b] = smem.sfa(pipe.stage)[sfa_token0 + 8 * c + b];
    const uint64_t desc_w = ptx::wgmma_desc_k128b(ptx::smem_addr(smem.b(pipe.stage) + weight_row0 * 128));
    const uint64_t desc_t = ptx::wgmma_desc_k128b(ptx::smem_addr(smem.a(pipe.stage)));
#pragma unroll
    for (int i = 0; i < kNumAcc; ++i) ptx::fence_operand(partial[i]);
    ptx::wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) ptx::wgmma_m64n32k32_e4m3(partial, desc_w + 2 * k, desc_t + 2 * k, k > 0);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
#pragma unroll
    for (int i = 0; i < kNumAcc; ++i) ptx::fence_operand(partial[i]);
    release_stage<1>(smem.empty(pipe.stage), lane);
    if (!p.skip_promotion) {
#pragma unroll
      for (int c = 0; c < kNumAcc / 4; ++c)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const int i = 4 * c + 2 * r + b;
            acc[i] = fmaf(sa[c][b] * sb, partial[i], acc[i]);
          }
    }
    pipe.advance();
  }
}

}  // namespace symmoe::gemm::kernel

// Epilogues of the swap-AB core: the warpgroup's transposed fp32 accumulators (weight rows = output columns x
// BLOCK_M tokens, swap_ab_math.cuh) -> D rows, straight from the registers to global memory. Tokens past the tile's
// valid rows are neither computed on nor stored.
//   bf16:   lanes g and g ^ 1 of a quad column (lane ^ 4) hold neighbouring output columns of the same two tokens:
//           one shuffle gives each a bf16 pair, so every store is 4 bytes (the even lane stores token 2t, the odd
//           lane token 2t + 1). A warpgroup's columns lie all inside n or all past it (swap_ab_active).
//   SwiGLU: a thread's rows g and g + 8 of a sub-tile are the gate and up rows of one channel (the interleave by 8,
//           weight_transform.hpp), so h = swiglu_weighted(g, u, w, clamp) needs no exchange. The token's amax over
//           the tile's 128 channels: a shuffle over the 8 lanes of a quad column, then the 8 math warps through
//           shared memory (double-buffered by tile parity, as epilogue_swiglu.cuh), then e4m3 bytes and one UE8M0
//           scale per token (ref::l1_epilogue's math, element by element).
#pragma once

#include <cuda_bf16.h>

#include "kernels/gemm/epilogue_swiglu.cuh"
#include "kernels/gemm/params.hpp"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/gemm/swap_ab_math.cuh"
#include "kernels/gemm/swap_ab_smem_layout.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/swiglu.hpp"

namespace symmoe::gemm::kernel {

constexpr int kSwapAbAmaxBarrier = 1;  // named barrier of the 256 math threads (0 is __syncthreads)

// The bf16 pairs of the warpgroup's kSubTiles sub-tiles of 64 weight rows (acc: swap_ab_k_loop's order), for every
// sub-tile j, 8-token group c and row half h after one shuffle: store(c, 64 j + 8 h, pair) stores the lane's token
// 8c + 2 (lane % 4) + odd, if valid, at that column offset from the pair's first column; pair() converts the two
// values to the 4-byte bf16 pair (called only by a storing lane, so the conversion stays inside the store's branch).
template <int BLOCK_M, int kSubTiles, typename Store>
__device__ __forceinline__ void swap_ab_store_bf16_pairs(const float (&acc)[kSubTiles * BLOCK_M / 2], Store&& store) {
  constexpr int kNumAcc = BLOCK_M / 2;
  const int lane = threadIdx.x % 32;
  const bool odd = (lane / 4) % 2;
#pragma unroll
  for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
    for (int c = 0; c < BLOCK_M / 8; ++c)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float v0 = acc[kNumAcc * j + 4 * c + 2 * h], v1 = acc[kNumAcc * j + 4 * c + 2 * h + 1];  // 2t, 2t + 1
        const float other = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
        store(c, 64 * j + 8 * h,
              [&] { return odd ? __floats2bfloat162_rn(other, v1) : __floats2bfloat162_rn(v0, other); });
      }
}

// acc: the warpgroup's BLOCK_N / 128 sub-tiles of 64 weight rows (swap_ab_k_loop).
template <int BLOCK_M, int BLOCK_N>
__device__ __forceinline__ void swap_ab_epilogue_bf16(const GemmParams& p, const Tile& tile, int wg,
                                                      const float (&acc)[BLOCK_N / 128 * BLOCK_M / 2]) {
  if (!swap_ab_active<BLOCK_N>(p, tile, wg)) return;  // rows past n (uniform over the warpgroup)
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const bool odd = (lane / 4) % 2;
  const int col = tile.n_begin + BLOCK_N / 2 * wg + 16 * warp + lane / 4 - (odd ? 1 : 0);  // the pair's first column
  swap_ab_store_bf16_pairs<BLOCK_M, BLOCK_N / 128>(acc, [&](int c, int offset, auto pair) {
    const int token = 8 * c + 2 * (lane % 4) + (odd ? 1 : 0);
    if (token < tile.num_rows)
      *reinterpret_cast<__nv_bfloat162*>(p.d + size_t(tile.row_begin + token) * p.n + col + offset) = pair();
  });
}

// acc: two 64-row sub-tiles (swap_ab_k_loop with BLOCK_N 256); parity: the tile count's parity (amax buffer).
template <int BLOCK_M, int kNumStages, bool kFp4>
__device__ __forceinline__ void swap_ab_epilogue_swiglu_fp8(
    const GemmParams& p, const Tile& tile, int wg, int parity,
    const SwapAbSmemLayout<BLOCK_M, 256, kNumStages, kFp4>& smem, const float (&acc)[BLOCK_M]) {
  constexpr int kNumAcc = BLOCK_M / 2, kCols = BLOCK_M / 4;  // token columns per thread: 8c + 2 (lane % 4) + b
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int inter = p.n / 2, inter_begin = tile.n_begin / 2;
  float h[2][kCols];
  float amax[kCols];
#pragma unroll
  for (int q = 0; q < kCols; ++q) {
    const int token = 8 * (q / 2) + 2 * (lane % 4) + q % 2;
    amax[q] = 0.f;
    const bool valid = token < tile.num_rows;
    // L2-coherent load (no L1 line): in the fused kernel the pool weights are written during the kernel.
    const float weight = valid ? __ldcg(p.row_weights + tile.row_begin + token) : 0.f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int i = kNumAcc * j + 4 * (q / 2) + q % 2;  // gate at h = 0, up at h = 1 (i + 2)
      h[j][q] = valid ? swiglu_weighted(acc[i], acc[i + 2], weight, p.clamp) : 0.f;
      amax[q] = fmt::amax_update(amax[q], h[j][q]);
    }
#pragma unroll
    for (int m = 4; m < 32; m *= 2) amax[q] = fmaxf(amax[q], __shfl_xor_sync(0xffffffffu, amax[q], m));
    if (lane < 4) smem.amax(parity, 4 * wg + warp)[token] = amax[q];
  }
  ptx::named_barrier_sync(kSwapAbAmaxBarrier, 256);
  // Channel of sub-tile j's row pair: (128 wg + 64 j + 16 warp) / 2 + lane / 4 of the tile's 128.
  const int channel0 = inter_begin + 64 * wg + 8 * warp + lane / 4;
#pragma unroll
  for (int q = 0; q < kCols; ++q) {
    const int token = 8 * (q / 2) + 2 * (lane % 4) + q % 2;
    float row_amax = 0.f;
#pragma unroll
    for (int w = 0; w < 8; ++w) row_amax = fmaxf(row_amax, smem.amax(parity, w)[token]);
    const float scale = fmt::scale_for_amax(row_amax, fmt::kE4M3Max, fmt::ScaleFormat::kUe8m0);
    const uint16_t codes = quantize_e4m3x2_pow2(h[0][q], h[1][q], 1.f / scale);  // exact: scale is a power of two
    if (token < tile.num_rows) {
      uint8_t* out = p.out + size_t(tile.row_begin + token) * inter + channel0;
      out[0] = uint8_t(codes & 0xFF);
      out[32] = uint8_t(codes >> 8);
      if (wg == 0 && warp == 0 && lane < 4)
        p.out_scales[size_t(inter_begin / 128) * p.out_scale_stride + tile.row_begin + token] = scale;
    }
  }
}

}  // namespace symmoe::gemm::kernel

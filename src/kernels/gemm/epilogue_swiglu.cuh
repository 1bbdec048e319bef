// L1 epilogue: SwiGLU + top-k weight + FP8 re-quantisation, written as the next GEMM's A operand.
// The CTA tile is BLOCK_M rows x 256 interleaved columns = 128 intermediate channels (chunks of 8 columns
// alternate gate, up), so one tile yields one UE8M0 scale per row.
//   128 x 256: each warpgroup holds whole rows (all 128 channels): the row amax is a 4-lane shuffle.
//    64 x 256 (split N): warpgroup w holds channels [64w, 64w + 64); the two warpgroups exchange their per-row
//              amax through shared memory (double-buffered by tile parity, so a warpgroup that runs one tile
//              ahead never overwrites a value the other has not read).
// Math is ref::l1_epilogue's, element by element: h = swiglu_weighted(g, u, w, clamp) (include/symmoe/swiglu.hpp,
// the formula the golden model uses), scale = fmt::scale_for_amax(amax, 448, kUe8m0), q = e4m3(h * (1 / scale)).
// swiglu_slice and row_scale hold that math for every kernel with this accumulator layout: epilogue_swiglu_fp8 below
// (the two-halves core, the fused kernel on either core: per-warp staging rows and bulk stores) and the one-batch
// core's core_epilogue_swiglu_fp8 (core_epilogue.cuh: a swizzled tile and TMA stores).
#pragma once

#include <cuda_fp8.h>

#include "kernels/gemm/epilogue_staging.cuh"
#include "kernels/gemm/math.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "symmoe/formats.hpp"
#include "symmoe/swiglu.hpp"

namespace symmoe::gemm::kernel {

// Two values -> two e4m3 codes (first in the low byte) with one cvt.rn.satfinite.e4m3x2.f32: the same bits as
// fmt::quantize_e4m3_pow2 (RNE, saturate to +-448), which tests/gpu/test_formats.cu checks over all fp32 inputs.
// NOTES: the software cast cost ~1 ms of 3.6 ms on the 32 x 1536 L1 shape; the hardware cvt is one instruction.
__device__ __forceinline__ uint16_t quantize_e4m3x2_pow2(float first, float second, float inv_pow2_scale) {
  return __nv_cvt_float2_to_fp8x2(make_float2(first * inv_pow2_scale, second * inv_pow2_scale), __NV_SATFINITE,
                                  __NV_E4M3);
}

// SwiGLU + top-k weight of the warpgroup's slice in place, and each thread row's amax over the slice's channels
// (reduced over the quad; split N: also written to the exchange for the other warpgroup, read after a 256-thread
// barrier; Layout: a GemmSmemLayout or a split-N CoreSmemLayout, used only then). h overwrites the gate slot of acc:
// acc[8q + 2r + b] (chunk 2q) holds channel 8q + 2 (lane % 4) + b of thread row r (row slice.row0 + 16 warp + lane / 4
// + 8r of the tile).
template <int BLOCK_M, int BLOCK_N, typename Layout>
__device__ __forceinline__ void swiglu_slice(const GemmParams& p, const Tile& tile, int wg, int parity,
                                             const Layout& smem, const WarpgroupSlice<BLOCK_M, BLOCK_N>& slice,
                                             float (&acc)[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc],
                                             float (&amax)[2]) {
  using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
  static_assert(BLOCK_N == 256, "the SwiGLU tile is 256 interleaved columns");
  constexpr int kPairs = Slice::kWgN / 16;  // (gate chunk, up chunk) pairs per thread row
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row_in_tile = slice.row0 + warp * 16 + lane / 4 + 8 * r;
    amax[r] = 0.f;
    // Rows past the tile's valid rows are neither stored nor part of a valid row's amax: no SwiGLU for them (most
    // of a small-batch tile).
    if (row_in_tile < tile.num_rows) {
      const float weight = p.row_weights[tile.row_begin + row_in_tile];
#pragma unroll
      for (int q = 0; q < kPairs; ++q)
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          float& g = acc[8 * q + 2 * r + b];
          g = swiglu_weighted(g, acc[8 * q + 4 + 2 * r + b], weight, p.clamp);
          amax[r] = fmt::amax_update(amax[r], g);
        }
    }
    amax[r] = fmaxf(amax[r], __shfl_xor_sync(0xffffffffu, amax[r], 1));
    amax[r] = fmaxf(amax[r], __shfl_xor_sync(0xffffffffu, amax[r], 2));
    if constexpr (Slice::kSplitN)
      if (lane % 4 == 0) smem.amax(parity, wg)[row_in_tile] = amax[r];
  }
}

// A thread row's UE8M0 scale from its slice amax: split N, after the exchange barrier, with the other warpgroup's.
template <bool kSplitN, typename Layout>
__device__ __forceinline__ float row_scale(float amax, const Layout& smem, int parity, int wg, int row_in_tile) {
  if constexpr (kSplitN) amax = fmaxf(amax, smem.amax(parity, wg ^ 1)[row_in_tile]);
  return fmt::scale_for_amax(amax, fmt::kE4M3Max, fmt::ScaleFormat::kUe8m0);
}

// The staging path (file header). Layout: a GemmSmemLayout (FP8 or FP4 weights) or the fused kernel's one-batch
// CoreSmemLayout; only the split-N tile (BLOCK_M 64) uses its amax exchange.
// kNamedBarrier: the split-N amax exchange's barrier (256 math threads).
template <int kNamedBarrier, int BLOCK_M, int BLOCK_N, typename Layout>
__device__ __forceinline__ void epilogue_swiglu_fp8(const GemmParams& p, const Tile& tile, int wg, int parity,
                                                    const Layout& smem, const WarpgroupSlice<BLOCK_M, BLOCK_N>& slice,
                                                    float (&acc)[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc],
                                                    const WarpStaging& staging) {
  using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
  constexpr int kPairs = Slice::kWgN / 16;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int inter = p.n / 2, inter_begin = tile.n_begin / 2;
  const int channel0 = Slice::kSplitN ? 64 * wg : 0;
  float amax[2];
  swiglu_slice(p, tile, wg, parity, smem, slice, acc, amax);
  if constexpr (Slice::kSplitN) ptx::named_barrier_sync(kNamedBarrier, 256);
  // FP8 rows: kWgN / 2 channels = 128 (or 64, split N) bytes per row, staged (one bulk store per valid row).
  staging.acquire();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row_in_tile = slice.row0 + warp * 16 + lane / 4 + 8 * r;
    const bool valid = row_in_tile < tile.num_rows;
    const float scale = row_scale<Slice::kSplitN>(amax[r], smem, parity, wg, row_in_tile);
    const float inv_scale = 1.f / scale;  // exact: scale is a power of two
    const int row = tile.row_begin + row_in_tile;
    uint8_t* out = staging.row(lane / 4 + 8 * r) + 2 * (lane % 4);
#pragma unroll
    for (int q = 0; q < kPairs; ++q) {
      *reinterpret_cast<uint16_t*>(out + 8 * q) =
          quantize_e4m3x2_pow2(acc[8 * q + 2 * r], acc[8 * q + 2 * r + 1], inv_scale);
    }
    if (valid && (!Slice::kSplitN || wg == 0) && lane % 4 == 0)
      p.out_scales[size_t(inter_begin / 128) * p.out_scale_stride + row] = scale;
  }
  const int store_row = slice.row0 + warp * 16 + (lane % 16);
  uint8_t* dst = lane < 16 && store_row < tile.num_rows
                     ? p.out + size_t(tile.row_begin + store_row) * inter + inter_begin + channel0
                     : nullptr;
  staging.publish(dst, Slice::kWgN / 2);
}

}  // namespace symmoe::gemm::kernel

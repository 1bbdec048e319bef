// Plain epilogue: the warpgroup's 64 x kWgN fp32 slice -> bf16 D rows (valid rows, columns < n only), straight
// from registers.
// NOTES: each quad of lanes writes 16 contiguous bytes per row per 8-column chunk; a staged TMA store would
// write whole lines (left for later: measure first).
#pragma once

#include <cuda_bf16.h>

#include "kernels/gemm/math.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N>
__device__ __forceinline__ void epilogue_bf16(const GemmParams& p, const Tile& tile,
                                              const WarpgroupSlice<BLOCK_M, BLOCK_N>& slice,
                                              const float (&acc)[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc]) {
  using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
#pragma unroll
  for (int h = 0; h < Slice::kNumHalves; ++h) {
    const int col = tile.n_begin + slice.col0 + 128 * h;
    if (col >= p.n) continue;  // half past n (partial last n-block)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row_in_tile = slice.row0 + warp * 16 + lane / 4 + 8 * r;
      if (row_in_tile >= tile.num_rows) continue;
      uint16_t* row = p.d + size_t(tile.row_begin + row_in_tile) * p.n + col + 2 * (lane % 4);
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const float* v = acc + 64 * h + 4 * c + 2 * r;
        *reinterpret_cast<__nv_bfloat162*>(row + 8 * c) = __floats2bfloat162_rn(v[0], v[1]);
      }
    }
  }
}

}  // namespace symmoe::gemm::kernel

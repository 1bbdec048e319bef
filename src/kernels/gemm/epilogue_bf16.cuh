// Plain epilogue: the warpgroup's 64 x kWgN fp32 slice -> bf16 D rows (valid rows, columns < n only), through the
// warp's staging rows and bulk stores (epilogue_staging.cuh).
#pragma once

#include <cuda_bf16.h>

#include "kernels/gemm/epilogue_staging.cuh"
#include "kernels/gemm/math.cuh"

namespace symmoe::gemm::kernel {

// Per 64-column slab, the warp's 16 rows x 128 B go through its staging rows, one bulk store per row.
template <int BLOCK_M, int BLOCK_N>
__device__ __forceinline__ void epilogue_bf16(const GemmParams& p, const Tile& tile,
                                              const WarpgroupSlice<BLOCK_M, BLOCK_N>& slice,
                                              const float (&acc)[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc],
                                              const WarpStaging& staging) {
  using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  // Lane r < 16 stores row r of the warp's 16 rows.
  const int store_row = slice.row0 + warp * 16 + (lane % 16);
  const bool store_valid = lane < 16 && store_row < tile.num_rows;
#pragma unroll
  for (int h = 0; h < Slice::kNumHalves; ++h) {
    const int col = tile.n_begin + slice.col0 + 128 * h;
    if (col >= p.n) continue;  // half past n (partial last n-block); uniform over the CTA
#pragma unroll
    for (int slab = 0; slab < 2; ++slab) {
      stage_bf16_slab(staging, acc, h, slab);
      uint16_t* dst = store_valid ? p.d + size_t(tile.row_begin + store_row) * p.n + col + 64 * slab : nullptr;
      staging.publish(dst, 128);
    }
  }
}

}  // namespace symmoe::gemm::kernel

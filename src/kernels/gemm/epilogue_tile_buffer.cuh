// bf16 epilogue through a whole-slice buffer (plan::GemmKernelShape::tile_buffer): each math warp converts its 16
// rows x kWgN fp32 accumulators to bf16 into its own 16 staging rows of 2 kWgN + 16 bytes, then 16 lanes issue one
// bulk store per valid row and the warp goes straight on to the next tile's mainloop while the TMA engine drains
// the rows. The warp waits for those stores to have read its rows only at its next epilogue, a whole tile later;
// the slab epilogue (epilogue_bf16.cuh) waits before each of its 4 slabs of a 128 x 256 tile.
// NOTES: rows 2 kWgN + 16 B apart (528 B = 132 words for kWgN 256): the 8 rows one store instruction touches start 4
// banks apart, so a quad's 4 words x 8 rows fall on 32 distinct banks. Cost: the buffer (8 warps x 8.25 KiB) takes
// the shared memory of one pipeline stage (128 x 256: 3 stages instead of 4).
#pragma once

#include <cuda_bf16.h>

#include "kernels/gemm/epilogue_bf16.cuh"
#include "kernels/gemm/epilogue_staging.cuh"
#include "kernels/gemm/math.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N, int kRowBytes>
__device__ __forceinline__ void epilogue_bf16_tile_buffer(const GemmParams& p, const Tile& tile,
                                                          const WarpgroupSlice<BLOCK_M, BLOCK_N>& slice,
                                                          const float (&acc)[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc],
                                                          const StagingRows<kRowBytes>& staging) {
  using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
  static_assert(kRowBytes >= 2 * Slice::kWgN + 16 && kRowBytes % 16 == 0, "a staging row holds the slice's row");
  const int warp = (threadIdx.x % 128) / 32, lane = staging.lane;
  staging.acquire();
  // Fragment order: acc[4 c + 2 r + {0, 1}] is row lane / 4 + 8 r, columns 8 c + 2 (lane % 4) + {0, 1}.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    uint8_t* row = staging.row(lane / 4 + 8 * r) + 4 * (lane % 4);
#pragma unroll
    for (int c = 0; c < Slice::kNumAcc / 4; ++c) {
      const float* v = acc + 4 * c + 2 * r;
      *reinterpret_cast<__nv_bfloat162*>(row + 16 * c) = __floats2bfloat162_rn(v[0], v[1]);
    }
  }
  // Lane r < 16 stores row r; a partial last n-block (n % 256 == 128) stores its first 128 columns.
  const int store_row = slice.row0 + warp * 16 + (lane % 16);
  const int col = tile.n_begin + slice.col0;
  const int num_cols = min(Slice::kWgN, p.n - col);
  const bool store_valid = lane < 16 && store_row < tile.num_rows && num_cols > 0;
  uint16_t* dst = store_valid ? p.d + size_t(tile.row_begin + store_row) * p.n + col : nullptr;
  staging.publish(dst, uint32_t(max(num_cols, 0)) * 2);
}

}  // namespace symmoe::gemm::kernel

// Swap-A/B epilogue: the accumulators hold D transposed (weight rows x tokens), D is token-major. The 8 math warps
// write the tile as bf16 token rows (BLOCK_N weights each, rows 2 BLOCK_N + 16 B apart) into the staging region,
// then math thread t < BLOCK_M bulk-stores token row t when the token is valid (masked and partial tiles need no
// special case). Two barriers of the 256 math threads per tile: buffer free (the storing threads waited for their
// previous stores to read it), buffer full.
// NOTES: the 2-byte stores are conflict-free: a quad's 4 lanes write tokens 2 apart (544 B = 8 banks), its 8 quads
// 8 consecutive weights (16 B) of one token row. Decode tiles are memory-bound: this runs once per 56 K blocks (L1).
#pragma once

#include <cuda_bf16.h>

#include "kernels/gemm/math_swap_ab.cuh"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/tma.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N, int kNumStages, int kBarrier>
__device__ __forceinline__ void epilogue_swap_ab(const GemmParams& p, const Tile& tile, int wg,
                                                 const GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages>& smem,
                                                 const float (&acc)[SwapAbSlice<BLOCK_M>::kNumAcc]) {
  constexpr int kRowBytes = 2 * BLOCK_N + 16;
  static_assert(BLOCK_M * kRowBytes <= plan::kGemmStagingBytes, "the token rows fit the staging region");
  uint8_t* buffer = smem.staging(0);
  const int thread = threadIdx.x;  // 0..255: both math warpgroups
  const int warp = (thread % 128) / 32, lane = thread % 32;
  if (thread < BLOCK_M) ptx::bulk_wait_group_read<0>();
  ptx::named_barrier_sync(kBarrier, 256);
#pragma unroll
  for (int c = 0; c < SwapAbSlice<BLOCK_M>::kNumAcc / 4; ++c)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int token = 8 * c + 2 * (lane % 4) + b;
        const int weight = 64 * wg + 16 * warp + lane / 4 + 8 * r;
        *reinterpret_cast<__nv_bfloat16*>(buffer + token * kRowBytes + weight * 2) =
            __float2bfloat16_rn(acc[4 * c + 2 * r + b]);
      }
  ptx::fence_proxy_async_shared_cta();  // generic smem writes -> visible to the bulk copies
  ptx::named_barrier_sync(kBarrier, 256);
  if (thread < BLOCK_M) {
    const int num_cols = min(BLOCK_N, p.n - tile.n_begin);
    if (thread < tile.num_rows && num_cols > 0)
      ptx::bulk_store_shared_to_global(p.d + size_t(tile.row_begin + thread) * p.n + tile.n_begin,
                                       buffer + thread * kRowBytes, uint32_t(num_cols) * 2);
    ptx::bulk_commit_group();
  }
}

}  // namespace symmoe::gemm::kernel

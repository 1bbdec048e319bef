// Epilogue of the one-batch core: the 128 x BLOCK_N fp32 tile -> bf16 D through one 128B-swizzled shared-memory
// tile (CoreSmemLayout::d_atom). Each math warp writes its 16 rows with stmatrix (two 8-column chunks per
// instruction); then a full tile (128 valid rows) leaves with one TMA store per 64-column atom, issued by math
// threads 0 .. BLOCK_N / 64 - 1; a partial tile (the last m-block of an expert, or a cluster partner past the
// expert's rows) copies its valid rows with 16-byte shared loads and global stores, so rows of the next expert are
// never written. Columns at or past n (a partial last n-block) are not stored: the TMA store clips them at the
// tensor map's bound, the row copy skips them.
// NOTES: the math warps go on to the next tile while the TMA engine reads the D tile; the storing threads wait for
// that read (bulk_wait_group_read) only before the next epilogue's stmatrix, and the epilogue barrier makes every
// math thread wait with them.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/gemm/core_math.cuh"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/stmatrix.cuh"
#include "kernels/ptx/sync.cuh"
#include "kernels/ptx/tma.cuh"

namespace symmoe::gemm::kernel {

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Byte offset of 16-byte chunk `chunk` (8 bf16 columns) of tile row `row` in the D tile.
template <int kAtomBytes>
__device__ __forceinline__ uint32_t core_d_offset(int row, int chunk) {
  return uint32_t((chunk / 8) * kAtomBytes + row * 128 + (((chunk % 8) ^ (row % 8)) * 16));
}

template <int BLOCK_N, int kNumStages>
__device__ __forceinline__ void core_epilogue_bf16(const GemmParams& p, const Tile& tile, int wg,
                                                   const CoreSmemLayout<BLOCK_N, kNumStages>& smem,
                                                   const float (&acc)[BLOCK_N / 2], const CUtensorMap* tmap_d) {
  using Layout = CoreSmemLayout<BLOCK_N, kNumStages>;
  constexpr int kChunks = BLOCK_N / 8;
  const int math_thread = threadIdx.x, warp = (math_thread % 128) / 32, lane = math_thread % 32;
  if (math_thread < Layout::kNumAtoms) ptx::bulk_wait_group_read<0>();  // the previous tile's stores read D
  ptx::named_barrier_sync(kCoreEpilogueBarrier, 256);
  // stmatrix x4 of chunks (c, c + 1): matrix m = lane / 8 is rows 8 (m % 2) .. + 7 of the warp's 16, chunk c + m / 2;
  // the accumulator fragment acc[4c + 2h + b] is row lane / 4 + 8h, column 8c + 2 (lane % 4) + b.
  const int row = 64 * wg + 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
  uint8_t* d = smem.d_atom(0);
#pragma unroll
  for (int c = 0; c < kChunks; c += 2) {
    ptx::stmatrix_x4(d + core_d_offset<Layout::kAtomBytes>(row, c + lane / 16), pack_bf16x2(acc[4 * c], acc[4 * c + 1]),
                     pack_bf16x2(acc[4 * c + 2], acc[4 * c + 3]), pack_bf16x2(acc[4 * c + 4], acc[4 * c + 5]),
                     pack_bf16x2(acc[4 * c + 6], acc[4 * c + 7]));
  }
  ptx::fence_proxy_async_shared_cta();  // generic-proxy writes -> visible to the TMA store
  ptx::named_barrier_sync(kCoreEpilogueBarrier, 256);
  if (tile.num_rows == Layout::BLOCK_M) {
    if (math_thread < Layout::kNumAtoms) {
      const int col = tile.n_begin + 64 * math_thread;
      if (col < p.n) ptx::tma_store_2d(tmap_d, smem.d_atom(math_thread), col, tile.row_begin);
      ptx::bulk_commit_group();
    }
  } else {
    for (int i = math_thread; i < tile.num_rows * kChunks; i += 256) {
      const int r = i / kChunks, chunk = i % kChunks, col = tile.n_begin + 8 * chunk;
      if (col >= p.n) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(d + core_d_offset<Layout::kAtomBytes>(r, chunk));
      *reinterpret_cast<uint4*>(p.d + size_t(tile.row_begin + r) * p.n + col) = v;
    }
  }
}

}  // namespace symmoe::gemm::kernel

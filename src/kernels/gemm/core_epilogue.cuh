// Epilogue of the one-batch core: the 128 x BLOCK_N fp32 tile -> bf16 D through one 128B-swizzled shared-memory
// tile (CoreSmemLayout::d_atom). Each math warpgroup stores its own 64 rows, synchronising only its 128 threads: its
// warps write their 16 rows each with stmatrix (two 8-column chunks per instruction); then a warpgroup whose 64 rows
// are all valid stores them with one TMA store per 64-column atom (box plan::kGemmCoreStoreBoxRows rows), issued by
// its threads 0 .. BLOCK_N / 64 - 1; one with fewer valid rows (an expert's last m-block) copies them with 16-byte
// shared loads and global stores, so rows of the next expert are never written; one without valid rows stores
// nothing. Columns at or past n (a partial last n-block) are not stored: the TMA store clips them at the tensor
// map's bound, the row copy skips them.
// NOTES: the warpgroup goes on to the next tile while the TMA engine reads its half of the D tile; the storing threads
// wait for that read (bulk_wait_group_read) only before the warpgroup's next stmatrix, and the warpgroup's epilogue
// barrier makes its other threads wait with them.
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
  constexpr int kRows = plan::kGemmCoreStoreBoxRows;
  static_assert(kRows == 64 && Layout::BLOCK_M == 2 * kRows, "one box of rows per math warpgroup");
  const int wg_thread = threadIdx.x % 128, warp = wg_thread / 32, lane = wg_thread % 32;
  const int rows = min(max(tile.num_rows - kRows * wg, 0), kRows);  // this warpgroup's valid rows
  if (rows == 0) return;
  if (wg_thread < Layout::kNumAtoms) ptx::bulk_wait_group_read<0>();  // its previous stores have read its rows
  ptx::named_barrier_sync(kCoreEpilogueBarrier + wg, 128);
  // stmatrix x4 of chunks (c, c + 1): matrix m = lane / 8 is rows 8 (m % 2) .. + 7 of the warp's 16, chunk c + m / 2;
  // the accumulator fragment acc[4c + 2h + b] is row lane / 4 + 8h, column 8c + 2 (lane % 4) + b.
  const int row = kRows * wg + 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
  uint8_t* d = smem.d_atom(0);
#pragma unroll
  for (int c = 0; c < kChunks; c += 2) {
    ptx::stmatrix_x4(d + core_d_offset<Layout::kAtomBytes>(row, c + lane / 16), pack_bf16x2(acc[4 * c], acc[4 * c + 1]),
                     pack_bf16x2(acc[4 * c + 2], acc[4 * c + 3]), pack_bf16x2(acc[4 * c + 4], acc[4 * c + 5]),
                     pack_bf16x2(acc[4 * c + 6], acc[4 * c + 7]));
  }
  ptx::fence_proxy_async_shared_cta();  // generic-proxy writes -> visible to the TMA store
  ptx::named_barrier_sync(kCoreEpilogueBarrier + wg, 128);
  if (rows == kRows) {
    if (wg_thread < Layout::kNumAtoms) {
      const int col = tile.n_begin + 64 * wg_thread;
      // The box's rows start at row 64 wg of the atom: 8 KiB in, a multiple of the 1 KiB swizzle period.
      if (col < p.n)
        ptx::tma_store_2d(tmap_d, smem.d_atom(wg_thread) + kRows * wg * 128, col, tile.row_begin + kRows * wg);
      ptx::bulk_commit_group();
    }
  } else {
    for (int i = wg_thread; i < rows * kChunks; i += 128) {
      const int r = kRows * wg + i / kChunks, chunk = i % kChunks, col = tile.n_begin + 8 * chunk;
      if (col >= p.n) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(d + core_d_offset<Layout::kAtomBytes>(r, chunk));
      *reinterpret_cast<uint4*>(p.d + size_t(tile.row_begin + r) * p.n + col) = v;
    }
  }
}

}  // namespace symmoe::gemm::kernel

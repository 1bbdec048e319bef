// Epilogues of the one-batch core: the BLOCK_M x BLOCK_N fp32 tile -> the output through one 128B-swizzled
// shared-memory tile (CoreSmemLayout::d_atom).
//   bf16 D: each math warpgroup stores its own part, synchronising only its 128 threads (named barrier
//     kCoreEpilogueBarrier + wg): its 64 rows (BLOCK_M 128) or, split N (64 x 256), its 128 columns = two column
//     atoms; its warps write their 16 rows each with stmatrix (two 8-column chunks per instruction).
//   SwiGLU + FP8 (BLOCK_N 256): SwiGLU, top-k weight, row amax and UE8M0 scale (epilogue_swiglu.cuh's swiglu_slice
//     and row_scale, the two-halves core's math), the e4m3 codes of the row's 128 channels (one 128-byte atom)
//     written two at a time; the row scales go to p.out_scales straight from the registers. BLOCK_M 128: each
//     warpgroup its own 64 rows (barrier kCoreEpilogueBarrier + wg). Split N: warpgroup w holds channels [64 w, 64 w +
//     64) of the 64 rows; the two exchange their row amax through the layout's amax region (double-buffered by tile
//     parity) and share the one atom, so both meet on kCoreAmaxBarrier (256 threads) after the amax is written (the
//     atom also free by then) and after the codes are written; warpgroup 0's thread 0 stores the atom.
// Then a part whose 64 rows are all valid is stored with one TMA store per 128-byte column atom (box
// plan::kGemmCoreStoreBoxRows rows); one with fewer valid rows (an expert's last m-block) is copied with 16-byte
// shared loads and global stores, so rows of the next expert are never written; one without valid rows stores
// nothing. Columns at or past n (a partial last bf16 n-block) are not stored: the TMA store clips them at the tensor
// map's bound, the row copy skips them.
// NOTES: the warpgroup goes on to the next tile while the TMA engine reads its part of the D tile; the storing threads
// wait for that read (bulk_wait_group_read) only before the part is next written, and the epilogue barrier makes the
// other threads that write it wait with them.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/gemm/core_math.cuh"
#include "kernels/gemm/epilogue_swiglu.cuh"
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

template <int BLOCK_M, int BLOCK_N, int kNumStages>
__device__ __forceinline__ void core_epilogue_bf16(
    const GemmParams& p, const Tile& tile, int wg,
    const CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, plan::GemmCoreOutput::kBf16Tile>& smem,
    const float (&acc)[CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, plan::GemmCoreOutput::kBf16Tile>::kNumAcc],
    const CUtensorMap* tmap_d) {
  using Layout = CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, plan::GemmCoreOutput::kBf16Tile>;
  constexpr bool kSplitN = Layout::kSplitN;
  constexpr int kChunks = Layout::kWgN / 8;  // the warpgroup's 16-byte chunks (8 columns) per row
  constexpr int kRows = plan::kGemmCoreStoreBoxRows;
  constexpr int kWgAtoms = kSplitN ? Layout::kNumAtoms / 2 : Layout::kNumAtoms;  // column atoms the warpgroup stores
  static_assert(kRows == 64 && Layout::BLOCK_M == (kSplitN ? 1 : 2) * kRows, "one box of rows per math warpgroup");
  const int wg_thread = threadIdx.x % 128, warp = wg_thread / 32, lane = wg_thread % 32;
  const int row0 = kSplitN ? 0 : kRows * wg;                  // the warpgroup's first row
  const int chunk0 = kSplitN ? kChunks * wg : 0;              // and first chunk
  const int rows = min(max(tile.num_rows - row0, 0), kRows);  // this warpgroup's valid rows
  if (rows == 0) return;
  if (wg_thread < kWgAtoms) ptx::bulk_wait_group_read<0>();  // its previous stores have read its part
  ptx::named_barrier_sync(kCoreEpilogueBarrier + wg, 128);
  // stmatrix x4 of chunks (c, c + 1): matrix m = lane / 8 is rows 8 (m % 2) .. + 7 of the warp's 16, chunk c + m / 2;
  // the accumulator fragment acc[4c + 2h + b] is row lane / 4 + 8h, column 8c + 2 (lane % 4) + b.
  const int row = row0 + 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
  uint8_t* d = smem.d_atom(0);
#pragma unroll
  for (int c = 0; c < kChunks; c += 2) {
    ptx::stmatrix_x4(d + core_d_offset<Layout::kAtomBytes>(row, chunk0 + c + lane / 16),
                     pack_bf16x2(acc[4 * c], acc[4 * c + 1]), pack_bf16x2(acc[4 * c + 2], acc[4 * c + 3]),
                     pack_bf16x2(acc[4 * c + 4], acc[4 * c + 5]), pack_bf16x2(acc[4 * c + 6], acc[4 * c + 7]));
  }
  ptx::fence_proxy_async_shared_cta();  // generic-proxy writes -> visible to the TMA store
  ptx::named_barrier_sync(kCoreEpilogueBarrier + wg, 128);
  if (rows == kRows) {
    if (wg_thread < kWgAtoms) {
      const int atom = chunk0 / 8 + wg_thread;
      const int col = tile.n_begin + 64 * atom;
      // The box's rows start at row 64 wg of the atom (split N: row 0): 8 KiB in, a multiple of the 1 KiB swizzle
      // period.
      if (col < p.n) ptx::tma_store_2d(tmap_d, smem.d_atom(atom) + row0 * 128, col, tile.row_begin + row0);
      ptx::bulk_commit_group();
    }
  } else {
    for (int i = wg_thread; i < rows * kChunks; i += 128) {
      const int r = row0 + i / kChunks, chunk = chunk0 + i % kChunks, col = tile.n_begin + 8 * chunk;
      if (col >= p.n) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(d + core_d_offset<Layout::kAtomBytes>(r, chunk));
      *reinterpret_cast<uint4*>(p.d + size_t(tile.row_begin + r) * p.n + col) = v;
    }
  }
}

// tmap_out: e4m3 p.out [num_rows_total, n / 2], boxes of 128 B x plan::kGemmCoreStoreBoxRows rows, 128B swizzle.
// parity: the tile's parity (split N: which half of the amax exchange it uses).
// NOTES: the codes are stored as the cvt makes them, two channels (2 B) per st.shared: 4-byte stores would first need
// a quad exchange (per two words a pack, a shuffle and two byte permutes), more instructions than the stores save.
template <int BLOCK_M, int kNumStages>
__device__ __forceinline__ void core_epilogue_swiglu_fp8(
    const GemmParams& p, const Tile& tile, int wg, int parity,
    const CoreSmemLayout<BLOCK_M, 256, kNumStages, plan::GemmCoreOutput::kFp8Tile>& smem,
    float (&acc)[CoreSmemLayout<BLOCK_M, 256, kNumStages, plan::GemmCoreOutput::kFp8Tile>::kNumAcc],
    const CUtensorMap* tmap_out) {
  using Layout = CoreSmemLayout<BLOCK_M, 256, kNumStages, plan::GemmCoreOutput::kFp8Tile>;
  using Slice = WarpgroupSlice<BLOCK_M, 256>;
  constexpr bool kSplitN = Slice::kSplitN;
  constexpr int kRows = plan::kGemmCoreStoreBoxRows;
  constexpr int kPairs = Slice::kWgN / 16;  // (gate chunk, up chunk) pairs per thread row
  static_assert(
      kRows == 64 && Layout::kNumAtoms == 1 && Layout::kOutBytes == Layout::BLOCK_M * 128 && Layout::kSplitN == kSplitN,
      "one 128-byte atom of BLOCK_M rows; one box of rows per math warpgroup, or one shared (split N)");
  const int wg_thread = threadIdx.x % 128, warp = wg_thread / 32, lane = wg_thread % 32;
  const int row0 = kSplitN ? 0 : kRows * wg;                  // the warpgroup's first row
  const int rows = min(max(tile.num_rows - row0, 0), kRows);  // this warpgroup's valid rows
  if (rows == 0) return;                                      // split N: both warpgroups alike
  // The threads that store the atom's rows: warpgroup 0's thread 0 with split N, else thread 0 of each warpgroup.
  const bool stores = kSplitN ? threadIdx.x == 0 : wg_thread < Layout::kNumAtoms;
  const Slice slice(wg);
  const int inter = p.n / 2, inter_begin = tile.n_begin / 2;
  float amax[2];
  swiglu_slice(p, tile, wg, kSplitN ? parity : 0, smem, slice, acc, amax);
  if (stores) ptx::bulk_wait_group_read<0>();  // its previous store has read the rows
  if constexpr (kSplitN)
    ptx::named_barrier_sync(kCoreAmaxBarrier, 256);  // both amaxes written; the atom free
  else
    ptx::named_barrier_sync(kCoreEpilogueBarrier + wg, 128);
  // Chunk j (16 channels) of tile row R sits at R * 128 + (j ^ R % 8) * 16. Thread row r is R = row0 + 16 warp +
  // lane / 4 + 8r, so R % 8 = lane / 4; its channels 8q + 2 (lane % 4) + {0, 1} of the warpgroup's slice (split N: the
  // slice starts at channel 64 wg, chunk 4 wg) are bytes 8 (q % 2) + 2 (lane % 4) of chunk q / 2 of the slice.
  const int chunk0 = kSplitN ? 4 * wg : 0;
  uint8_t* const out_tile = smem.d_atom(0);
  uint8_t* const thread_row = out_tile + (slice.row0 + warp * 16 + lane / 4) * 128 + 2 * (lane % 4);
  const int swz = lane / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row_in_tile = slice.row0 + warp * 16 + lane / 4 + 8 * r;
    const float scale = row_scale<kSplitN>(amax[r], smem, parity, wg, row_in_tile);
    const float inv_scale = 1.f / scale;  // exact: scale is a power of two
#pragma unroll
    for (int q = 0; q < kPairs; ++q) {
      *reinterpret_cast<uint16_t*>(thread_row + 8 * 128 * r + ((chunk0 + q / 2) ^ swz) * 16 + 8 * (q % 2)) =
          quantize_e4m3x2_pow2(acc[8 * q + 2 * r], acc[8 * q + 2 * r + 1], inv_scale);
    }
    if (row_in_tile < tile.num_rows && lane % 4 == 0 && (!kSplitN || wg == 0))
      p.out_scales[size_t(inter_begin / 128) * p.out_scale_stride + tile.row_begin + row_in_tile] = scale;
  }
  ptx::fence_proxy_async_shared_cta();  // generic-proxy writes -> visible to the TMA store
  if constexpr (kSplitN)
    ptx::named_barrier_sync(kCoreAmaxBarrier, 256);  // both warpgroups' codes written
  else
    ptx::named_barrier_sync(kCoreEpilogueBarrier + wg, 128);
  if (rows == kRows) {
    if (stores) {
      // The box's rows start at row 64 wg of the tile (split N: row 0): 8 KiB in, a multiple of the 1 KiB swizzle
      // period.
      ptx::tma_store_2d(tmap_out, out_tile + row0 * 128, inter_begin, tile.row_begin + row0);
      ptx::bulk_commit_group();
    }
  } else {
    constexpr int kCopyThreads = kSplitN ? 256 : 128;  // split N: both warpgroups copy the shared rows
    for (int i = threadIdx.x % kCopyThreads; i < rows * 8; i += kCopyThreads) {
      const int r = row0 + i / 8, chunk = i % 8;
      const uint4 v = *reinterpret_cast<const uint4*>(out_tile + r * 128 + ((chunk ^ (r % 8)) * 16));
      *reinterpret_cast<uint4*>(p.out + size_t(tile.row_begin + r) * inter + inter_begin + 16 * chunk) = v;
    }
  }
}

}  // namespace symmoe::gemm::kernel

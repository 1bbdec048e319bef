// Tile scheduler of the fused kernel: waves of experts, within a wave first every L1 tile of its experts, then
// every L2 tile. Wave w holds the experts whose actual L1 tiles start in [w, w + 1) x MegaParams::wave_l1_tiles
// (load_expert_counts computes the wave ends from the received counts) (docs/design.md §8.4: L2 of wave w overlaps L1
// of wave w + 1 on other SMs). Within an expert the m-blocks are outer and the n-blocks inner, so the n-blocks that
// complete one pool block's L2 input (the L2 arrival mask) run at about the same time, and one pulled block feeds
// all its L1 tiles at once.
// Persistent: CTA c takes tiles c, c + num_ctas, ... of this linear order. Block counts come from the device-side
// counts in shared memory (ExpertCounts), so the host never synchronises.
// The order in closed form: segments are BLOCK_M-aligned and back to back, so the pool blocks before a wave number
// seg_start[first expert] / BLOCK_M, and the wave starts at linear tile (those blocks) x (L1 + L2 n-blocks); inside
// the wave a tile index splits into (block, n-block) by one division and the block's expert is a binary search
// over the segment starts. NOTES: closed form because walking the experts one by one costs ~0.11 us each, empty
// ones included, before a CTA's first tile (docs/notes/mega.md).
// NOTES: the producer thread and the math warpgroups each run their own copy; they agree because the walk is a
// pure function of (blockIdx, the counts). Deadlock freedom: a tile waits only on tiles earlier in the linear
// order (L2 on L1 of the same wave, L1 on the pull, which waits on nothing local), every CTA walks in increasing
// order and all CTAs are co-resident.
#pragma once

#include "kernels/gemm/scheduler.cuh"
#include "kernels/mega/params.hpp"
#include "layout/mega_smem.hpp"

namespace symmoe::mega::kernel {

// Per local expert, in shared memory after the count barrier: the pointers of layout::MegaSmemCounts (which says
// what each array holds), resolved once.
struct ExpertCounts {
  int32_t* chunk_start;  // [El][R]
  int32_t* seg_start;    // [El + 1]
  int32_t* num_rows;     // [El]
  uint32_t* wave_last;   // [ceil(El / 32)]
  __device__ static ExpertCounts from(const layout::MegaSmemCounts& c) {
    return {c.chunk_start(), c.seg_start(), c.num_rows(), c.wave_last()};
  }
};

// One past the last expert of the wave that starts at `begin` (the next set wave_last bit at or after it).
__device__ __forceinline__ int wave_end_from(const uint32_t* wave_last, int begin) {
  int word = begin / 32;
  uint32_t bits = wave_last[word] & (~0u << (begin % 32));
#pragma unroll 1
  while (bits == 0) bits = wave_last[++word];  // load_expert_counts sets the last expert's bit: terminates
  return word * 32 + __ffs(bits);              // __ffs is 1-based: the last expert + 1
}

struct MegaTile {
  gemm::kernel::Tile tile;  // expert_idx = local expert, row_begin = pool row, n_begin = output column
  bool l2;                  // false: L1 (SwiGLU) tile, true: L2 (bf16, write-back) tile
  int pool_block;           // row_begin / BLOCK_M: the arrival counter / mask index
};

// NOTES: registers: the producer runs at the data warpgroup's few registers (MegaRoles::kDataRegisters) and the math
// warpgroups keep this object live through the mainloop, so it holds one shared-memory pointer and a few ints
// (num_ctas is gridDim.x), not a reference to the kernel parameters (that spilled more).
template <int BLOCK_M, int BLOCK_N>
struct MegaScheduler {
  const int32_t* seg_start;  // ExpertCounts::seg_start; num_rows and wave_last follow (layout::MegaSmemCounts)
  int num_local_experts;
  // L1: 2I / BLOCK_N; L2: ceil(H / BLOCK_N) (a partial last block stores its valid half only). Two scalars, not an
  // array: a dynamically indexed array would put the scheduler in local memory.
  int l1_n_blocks, l2_n_blocks;
  int next_tile;
  int wave_end = 0;                              // one past the current wave's last expert
  int wave_block_begin = 0, wave_block_end = 0;  // the current wave's pool blocks

  __device__ MegaScheduler(const MegaParams& p, const ExpertCounts& c, int cta)
      : seg_start(c.seg_start),
        num_local_experts(p.ws.dims().num_local_experts()),
        l1_n_blocks(2 * p.ws.dims().intermediate / BLOCK_N),
        l2_n_blocks((p.ws.dims().hidden + BLOCK_N - 1) / BLOCK_N),
        next_tile(cta) {}

  __device__ int num_rows(int e) const {
    return seg_start[layout::MegaSmemCounts::num_rows_from_seg_start(num_local_experts) + e];
  }

  // Next tile of this CTA; false when every wave is done (then the object must not be used again).
  __device__ bool next(MegaTile& t) {
    const int tiles_per_block = l1_n_blocks + l2_n_blocks;
#pragma unroll 1
    while (next_tile >= wave_block_end * tiles_per_block) {
      if (wave_end >= num_local_experts) return false;
      wave_end = wave_end_from(reinterpret_cast<const uint32_t*>(
                                   seg_start + layout::MegaSmemCounts::wave_last_from_seg_start(num_local_experts)),
                               wave_end);
      wave_block_begin = wave_block_end;
      wave_block_end = seg_start[wave_end] / BLOCK_M;
    }
    int local = next_tile - wave_block_begin * tiles_per_block;
    next_tile += gridDim.x;
    const int l1_tiles = (wave_block_end - wave_block_begin) * l1_n_blocks;
    t.l2 = local >= l1_tiles;
    if (t.l2) local -= l1_tiles;
    const int n_blocks = t.l2 ? l2_n_blocks : l1_n_blocks;
    const int block = wave_block_begin + local / n_blocks;
    // The block's expert: the last e with seg_start[e] <= its first row (empty experts share their successor's start,
    // and the last of equal starts is the one whose rows follow).
    const int row_begin = block * BLOCK_M;
    int lo = 0, hi = wave_end - 1;
#pragma unroll 1
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (seg_start[mid] <= row_begin)
        lo = mid;
      else
        hi = mid - 1;
    }
    t.tile.expert_idx = lo;
    t.tile.row_begin = row_begin;
    t.tile.num_rows = min(num_rows(lo) - (row_begin - seg_start[lo]), BLOCK_M);
    t.tile.n_begin = (local % n_blocks) * BLOCK_N;
    t.tile.shares_b = false;  // single CTAs
    t.pool_block = block;
    return true;
  }
};

}  // namespace symmoe::mega::kernel

// Tile scheduler of the fused kernel: waves of experts, within a wave first every L1 tile of its experts, then
// every L2 tile. Wave w holds the experts whose actual L1 tiles start in [w, w + 1) x MegaParams::wave_l1_tiles
// (load_expert_counts computes the wave ends from the received counts) (seed 000 section 5: L2 of wave w overlaps L1 of wave w + 1 on other SMs). Within an expert the
// m-blocks are outer and the n-blocks inner, so the n-blocks that complete one pool block's L2 input (the L2
// arrival mask) run at about the same time, and one pulled block feeds all its L1 tiles at once.
// Persistent: CTA c takes tiles c, c + num_ctas, ... of this linear order. Block counts come from the device-side
// counts in shared memory (ExpertCounts), so the host never synchronises.
// NOTES: the producer thread and the math warpgroups each run their own copy; they agree because the walk is a
// pure function of (blockIdx, the counts). Deadlock freedom: a tile waits only on tiles earlier in the linear
// order (L2 on L1 of the same wave, L1 on the pull, which waits on nothing local), every CTA walks in increasing
// order and all CTAs are co-resident.
#pragma once

#include "kernels/gemm/scheduler.cuh"
#include "kernels/mega/params.hpp"

namespace symmoe::mega::kernel {

// Per local expert, in shared memory after the count barrier.
struct ExpertCounts {
  int32_t* chunk_start;  // [El][R]: first pool row of the pairs src rank s sent to local expert e (index e * R + s);
                         // nondecreasing over the index, so a pool row's (expert, source) is a binary search
  int32_t* seg_start;  // [El + 1]: first pool row of expert e's segment (multiple of BLOCK_M); [El] = rows used
  int32_t* num_rows;   // [El]: valid rows of expert e
  uint32_t* wave_last;  // [El / 32] bits: expert e is the last of its wave (bit e % 32 of word e / 32)
};

// One past the last expert of the wave that starts at `begin` (the next set wave_last bit at or after it).
__device__ __forceinline__ int wave_end_from(const uint32_t* wave_last, int begin) {
  int word = begin / 32;
  uint32_t bits = wave_last[word] & (~0u << (begin % 32));
#pragma unroll 1
  while (bits == 0) bits = wave_last[++word];  // load_expert_counts sets the last expert's bit: terminates
  return word * 32 + __ffs(bits);  // __ffs is 1-based: the last expert + 1
}

struct MegaTile {
  gemm::kernel::Tile tile;  // expert_idx = local expert, row_begin = pool row, n_begin = output column
  bool l2;                  // false: L1 (SwiGLU) tile, true: L2 (bf16, write-back) tile
  int pool_block;           // row_begin / BLOCK_M: the arrival counter / mask index
};

// NOTES: registers: the producer runs at 40 registers and the math warpgroups keep this object live through the
// mainloop, so it holds one shared-memory pointer and a few ints (num_ctas is gridDim.x). Holding a reference to
// the kernel parameters instead of the shape ints measured worse (more spills).
template <int BLOCK_M, int BLOCK_N>
struct MegaScheduler {
  const int32_t* seg_start;  // ExpertCounts::seg_start; num_rows and wave_last follow (El + 1 and 2 El + 1 after)
  int num_local_experts, wave_end = 0;
  // L1: 2I / BLOCK_N; L2: ceil(H / BLOCK_N) (a partial last block stores its valid half only). Two scalars, not an
  // array: a dynamically indexed array would put the scheduler in local memory.
  int l1_n_blocks, l2_n_blocks;
  int next_tile;
  int wave_begin = -1, phase = 1, expert_idx = -1;  // expert_idx = wave_begin + index in the wave
  int seg_tile_begin = 0, seg_tile_end = 0;

  __device__ MegaScheduler(const MegaParams& p, const ExpertCounts& c, int cta)
      : seg_start(c.seg_start), num_local_experts(p.ws.dims().num_local_experts()),
        l1_n_blocks(2 * p.ws.dims().intermediate / BLOCK_N),
        l2_n_blocks((p.ws.dims().hidden + BLOCK_N - 1) / BLOCK_N), next_tile(cta) {}

  __device__ int num_rows(int e) const { return seg_start[num_local_experts + 1 + e]; }

  // Next tile of this CTA; false when every wave is done (then the object must not be used again).
  __device__ bool next(MegaTile& t) {
    while (next_tile >= seg_tile_end) {
      if (wave_begin < 0 || ++expert_idx == wave_end) {
        if (phase == 0) {
          phase = 1;  // the same wave's L2 tiles
        } else {
          phase = 0;  // the next wave's L1 tiles
          wave_begin = wave_begin < 0 ? 0 : wave_end;
          if (wave_begin >= num_local_experts) return false;
          wave_end = wave_end_from(reinterpret_cast<const uint32_t*>(seg_start + 2 * num_local_experts + 1), wave_begin);
        }
        expert_idx = wave_begin;
      }
      const int m_blocks = (num_rows(expert_idx) + BLOCK_M - 1) / BLOCK_M;
      seg_tile_begin = seg_tile_end;
      seg_tile_end += m_blocks * (phase ? l2_n_blocks : l1_n_blocks);
    }
    const int local = next_tile - seg_tile_begin;
    next_tile += gridDim.x;
    const int n_blocks = phase ? l2_n_blocks : l1_n_blocks;
    const int m_block = local / n_blocks, n_block = local % n_blocks;
    t.l2 = phase == 1;
    t.tile.expert_idx = expert_idx;
    t.tile.row_begin = seg_start[expert_idx] + m_block * BLOCK_M;
    t.tile.num_rows = min(num_rows(expert_idx) - m_block * BLOCK_M, BLOCK_M);
    t.tile.n_begin = n_block * BLOCK_N;
    t.pool_block = t.tile.row_begin / BLOCK_M;
    return true;
  }
};

}  // namespace symmoe::mega::kernel

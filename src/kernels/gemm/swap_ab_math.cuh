// Math role of the swap-AB core (plan::GemmCore::kSwapAB): the operands of the grouped GEMM swapped, so the WGMMA's
// M is the weights and its N the tokens. Math warpgroup wg computes weight rows [n_begin + BLOCK_N / 2 wg,
// + BLOCK_N / 2) (output columns; 64 for 128-row tiles, 128 = two independent 64-row sub-tiles for 256-row tiles)
// x the tile's BLOCK_M token rows; the accumulator fragment holds D transposed (swap_ab_epilogue.cuh stores it). Per
// 128-wide K block: one batch of 4 m64nBLOCK_Mk32 WGMMAs per sub-tile into its partial accumulator; while they run,
// the next block's stage is waited for (FP4: and converted); then wait, release the stage, promote
// acc = fmaf(sa[token] * sb, partial, acc) (the kernels' and ref::gemm_faithful's order: the token's scale
// times the weight block's scale, then one fmaf). sb: the weight rows of a warpgroup lie in one 128-row scale block
// (bf16) or one interleaved 256-row tile whose gate and up rows have their own scale (SwiGLU).
// Weights:
//   FP8  the WGMMA reads the weight tile from shared memory (descriptor, 128B-swizzled by TMA);
//   FP4  each thread loads its A fragments of the K block with one 16-byte ld.shared per row (rows g and g + 8 of
//        its warp's 16: fp4_word_layout.hpp puts fragments (t, 0..3) of a row in 16 contiguous bytes), converts
//        each word to two E4M3 registers (fp4_upconvert.hpp: element = e2m1 * 2^(code - base), exact) and feeds
//        them to the WGMMA as register operands: no E4M3 tile in shared memory, no conversion barrier (the registers
//        of the block in flight are fenced until its WGMMAs completed). The base code
//        is the exponent of the fold's base scale, which is also sb (weight_transform_fp4.hpp), so the promotion
//        is the FP8 path's on the expanded weights, bit for bit.
// NOTES: each warp reads the 8 B of its two rows' scale codes and 8 shift tables (15 x 8 B in shared memory) per K
// block; the conversion is 7 integer ops per 8 weights.
#pragma once

#include "kernels/gemm/fp4_upconvert.hpp"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/gemm/swap_ab_smem_layout.hpp"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/wgmma.cuh"

namespace symmoe::gemm::kernel {

// The A registers of k32 step s for this thread from its fragments of rows g (lo) and g + 8 (hi) of the K block:
// a[0] / a[2] row g columns 4t + 0..3 / 16 + 4t + 0..3 of the step, a[1] / a[3] the same of row g + 8.
__device__ __forceinline__ void swap_ab_fp4_fragment(uint32_t (&a)[4], uint32_t word_lo, uint32_t word_hi,
                                                     const Fp4ShiftTable& t_lo, const Fp4ShiftTable& t_hi) {
  const Fp4E4m3x8 lo = fp4x8_to_e4m3x8(word_lo, t_lo), hi = fp4x8_to_e4m3x8(word_hi, t_hi);
  a[0] = lo.lo, a[1] = hi.lo, a[2] = lo.hi, a[3] = hi.hi;
}

// The weight block scales of the tile's K block kb for warpgroup wg's BLOCK_N / 2 rows: (gate, up) of the SwiGLU
// tile's interleaved rows (rows with r % 16 < 8 are gate rows: a thread's row g, rows g + 8 are up rows); (s, s) for
// bf16, s of the 128-row scale block holding the warpgroup's rows.
template <int BLOCK_N, EpilogueKind kEpilogue>
__device__ __forceinline__ float2 swap_ab_b_scales(const GemmParams& p, const Tile& tile, int wg, int kb) {
  const int num_k_blocks = p.k / 128;
  if constexpr (kEpilogue == EpilogueKind::kSwigluFp8) {
    return __ldg(reinterpret_cast<const float2*>(p.sfb) +
                 (size_t(tile.expert_idx) * (p.n / 256) + tile.n_begin / 256) * num_k_blocks + kb);
  } else {
    const int block = (tile.n_begin + BLOCK_N / 2 * wg) / 128;
    const float s = __ldg(p.sfb + (size_t(tile.expert_idx) * (p.n / 128) + block) * num_k_blocks + kb);
    return make_float2(s, s);
  }
}

// Whether warpgroup wg's weight rows of the tile lie inside n (always, but for the 256-row bf16 tile's second half).
template <int BLOCK_N>
__device__ __forceinline__ bool swap_ab_active(const GemmParams& p, const Tile& tile, int wg) {
  return BLOCK_N == 128 || tile.n_begin + BLOCK_N / 2 * wg < p.n;
}

// The K loop of one tile for math warpgroup wg (warp-uniform); acc holds the promoted fp32 result on return:
// acc[kNumAcc j + 4c + 2h + b] is weight row BLOCK_N / 2 wg + 64 j + 16 warp + lane / 4 + 8h of the tile (sub-tile j
// of the warpgroup, j < BLOCK_N / 128), token 8c + 2 (lane % 4) + b. A 256-row bf16 tile whose second half lies past n
// (n % 256 == 128) leaves warpgroup 1 inactive: it passes the stages on without reading them (swap_ab_active).
template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kFp4, EpilogueKind kEpilogue>
__device__ __forceinline__ void swap_ab_k_loop(const GemmParams& p,
                                               const SwapAbSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kFp4>& smem,
                                               const Tile& tile, int wg, PipelineState<kNumStages>& pipe,
                                               float (&acc)[BLOCK_N / 128 * BLOCK_M / 2]) {
  using Layout = SwapAbSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kFp4>;
  constexpr int kNumAcc = BLOCK_M / 2, kSubTiles = BLOCK_N / 128;
  static_assert(kEpilogue == EpilogueKind::kBf16 || BLOCK_N == 256, "SwiGLU tiles are 256 rows");
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int num_k_blocks = p.k / 128;
#pragma unroll
  for (int i = 0; i < kSubTiles * kNumAcc; ++i) acc[i] = 0.f;
  // This thread's token columns 8c + 2 (lane % 4) + b in the stage's scale box (which starts at row_begin & ~3).
  const float* sfa0 = smem.sfa(0) + 2 * (lane % 4) + (tile.row_begin & (kSfaBoxPad - 1));
  const int row0 = BLOCK_N / 2 * wg + 16 * warp + lane / 4;  // weight row of sub-tile 0 (and row0 + 8)
  // FP4: this thread's fragments of row r start at r * 64 + fragment_offset (fp4_word_layout.hpp).
  [[maybe_unused]] const int fragment_offset = 16 * ((lane % 4) ^ ((row0 / 2) % 4));
  [[maybe_unused]] const Fp4ShiftTable* tables = smem.fp4_tables();
  const uint32_t b_lo0 = ptx::wgmma_desc_k128b_lo(ptx::smem_addr(smem.a(0)));  // tokens: the WGMMA's B operand
  [[maybe_unused]] const uint32_t w_lo0 = ptx::wgmma_desc_k128b_lo(ptx::smem_addr(smem.b(0) + BLOCK_N / 2 * wg * 128));
  // FP4: the A registers of K block kb (stage `st`) for every sub-tile, converted from the stage's FP4 tile.
  [[maybe_unused]] auto convert = [&](int st, int kb, uint32_t(&a)[kSubTiles][4][4]) {
    const float2 sb = swap_ab_b_scales<BLOCK_N, kEpilogue>(p, tile, wg, kb);
    const int base_gate = fmt::fold_base_code(sb.x), base_up = fmt::fold_base_code(sb.y);
#pragma unroll
    for (int j = 0; j < kSubTiles; ++j) {
      const int row = row0 + 64 * j;
      const uint8_t* w = smem.b_fp4(st) + row * 64 + fragment_offset;
      const uint4 frag_lo = *reinterpret_cast<const uint4*>(w);
      const uint4 frag_hi = *reinterpret_cast<const uint4*>(w + 8 * 64);
      const uint32_t code_lo = smem.codes(st)[row], code_hi = smem.codes(st)[row + 8];
      const uint32_t words_lo[4] = {frag_lo.x, frag_lo.y, frag_lo.z, frag_lo.w};
      const uint32_t words_hi[4] = {frag_hi.x, frag_hi.y, frag_hi.z, frag_hi.w};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const Fp4ShiftTable t_lo = tables[fp4_table_index(int((code_lo >> (8 * s)) & 0xFFu) - base_gate)];
        const Fp4ShiftTable t_hi = tables[fp4_table_index(int((code_hi >> (8 * s)) & 0xFFu) - base_up)];
        swap_ab_fp4_fragment(a[j][s], words_lo[s], words_hi[s], t_lo, t_hi);
      }
    }
  };
  float partial[kSubTiles][kNumAcc];  // overwritten by each K block's first WGMMA
#pragma unroll
  for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
    for (int i = 0; i < kNumAcc; ++i) partial[j][i] = 0.f;
  // FP4: a_cur holds K block kb's A registers (read by its WGMMAs until they complete), a_next receives kb + 1's
  // while they run. The tile's first block is converted before the loop.
  [[maybe_unused]] uint32_t a_cur[kSubTiles][4][4], a_next[kSubTiles][4][4];
  const bool active = swap_ab_active<BLOCK_N>(p, tile, wg);
  if (!active) {  // uniform over the warpgroup: pass the tile's stages on
#pragma unroll 1
    for (int kb = 0; kb < num_k_blocks; ++kb) {
      ptx::mbarrier_wait_parity(smem.full(pipe.stage), pipe.phase);
      release_stage<1>(smem.empty(pipe.stage), lane);
      pipe.advance();
    }
    return;
  }
  ptx::mbarrier_wait_parity(smem.full(pipe.stage), pipe.phase);
  if constexpr (kFp4) convert(pipe.stage, 0, a_cur);
#pragma unroll 1
  for (int kb = 0; kb < num_k_blocks; ++kb) {
    const float2 sb = swap_ab_b_scales<BLOCK_N, kEpilogue>(p, tile, wg, kb);
    const uint32_t b_lo = b_lo0 + pipe.stage * (Layout::kABytes / 16);
    ptx::wgmma_fence();
    if constexpr (kFp4) {
#pragma unroll
      for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
        for (int s = 0; s < 4; ++s)
          ptx::wgmma_m64nk32_e4m3_rs<BLOCK_M>(partial[j], a_cur[j][s], ptx::wgmma_desc_k128b_from_lo(b_lo + 2 * s),
                                              s > 0);
    } else {
      const uint32_t w_lo = w_lo0 + pipe.stage * (Layout::kBBytes / 16);
#pragma unroll
      for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
        for (int s = 0; s < 4; ++s)
          ptx::wgmma_m64nk32_e4m3_narrow<BLOCK_M>(partial[j], ptx::wgmma_desc_k128b_from_lo(w_lo + 64 * 8 * j + 2 * s),
                                                  ptx::wgmma_desc_k128b_from_lo(b_lo + 2 * s), s > 0);
    }
    ptx::wgmma_commit_group();
    PipelineState<kNumStages> next = pipe;
    next.advance();
    if (kb + 1 < num_k_blocks) {  // the next block's stage while the WGMMAs run (FP4: and its conversion)
      ptx::mbarrier_wait_parity(smem.full(next.stage), next.phase);
      if constexpr (kFp4) convert(next.stage, kb + 1, a_next);
    }
#pragma unroll
    for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
      for (int i = 0; i < kNumAcc; ++i) ptx::fence_operand(partial[j][i]);
    ptx::wgmma_wait_group<0>();
#pragma unroll
    for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
      for (int i = 0; i < kNumAcc; ++i) ptx::fence_operand(partial[j][i]);  // read only after the wait
    if constexpr (kFp4) {  // a_cur's registers stay a_cur's until the WGMMAs reading them completed
#pragma unroll
      for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
          for (int r = 0; r < 4; ++r) ptx::fence_operand(a_cur[j][s][r]);
    }
    const float* sfa = sfa0 + pipe.stage * (Layout::kSfaBytes / 4);
    float sa[kNumAcc / 2];  // the scale of token column 8c + 2 (lane % 4) + b: sa[2c + b]
#pragma unroll
    for (int c = 0; c < kNumAcc / 4; ++c) sa[2 * c] = sfa[8 * c], sa[2 * c + 1] = sfa[8 * c + 1];
    release_stage<1>(smem.empty(pipe.stage), lane);
#pragma unroll
    for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
      for (int i = 0; i < kNumAcc; ++i) {
        const float scale = sa[(i / 4) * 2 + i % 2] * ((i / 2) % 2 ? sb.y : sb.x);  // h = (i / 2) % 2: row g + 8h
        acc[kNumAcc * j + i] = fmaf(scale, partial[j][i], acc[kNumAcc * j + i]);
      }
    if constexpr (kFp4) {
#pragma unroll
      for (int j = 0; j < kSubTiles; ++j)
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
          for (int r = 0; r < 4; ++r) a_cur[j][s][r] = a_next[j][s][r];
    }
    pipe = next;
  }
}

}  // namespace symmoe::gemm::kernel

// Math role with FP4 weights and BLOCK_M 64, shared by the FP4 grouped GEMM (grouped_gemm_fp4_kernel.cuh) and the
// fused kernel's 64 x 256 instantiation (kernels/mega/mega_kernel.cuh, kMixedPhases): math.cuh's mainloop (issue
// turns, per-128-K promotion with the fp32 base scales, same epilogues) with the E2M1 -> E4M3 upconversion of the
// weight tile done by the math warpgroups themselves, one K block ahead, into a ring of two E4M3 tiles
// (smem_layout.hpp). In the 64 x 256 tile (split N) warpgroup w's WGMMAs read only B rows [128w, 128w + 128), so it
// converts exactly those and syncs only its own 128 threads (named barrier kBarrier0 + w: the GEMM's
// kConvertBarrier0, the fused kernel's MegaRoles::kWarpgroupBarrier0).
// Per K block j of a tile (E4M3 tile j % 2 of the running block count, Fp4ConvState):
//   sync -> issue the WGMMAs of block j (issue turn) -> wait raw_full of block j + 1, convert its rows into the other
//   E4M3 tile, fence.proxy.async (the WGMMA reads through the async proxy) -> wgmma wait -> release the raw stage
//   (empty: A read by the WGMMAs, FP4 tile and codes one block earlier) -> promote.
// The first block of a tile is converted before the loop, not overlapped.
// NOTES: two E4M3 tiles suffice: tile (j + 1) % 2 was last read by the WGMMAs of block j - 1, and every warp of the
// warpgroup passed the sync at the top of block j only after its wait of block j - 1. The sync also makes block j's
// converted rows visible (every converting thread fenced before it). The WGMMAs of block j and the loads in flight
// run while block j + 1 is converted.
// NOTES: the base codes of the fold are the exponent bits of the B block scales the promotion uses
// (load_b_scales; kMixedPhases: of the tile's phase, load_b_scales_of_phase), so no producer-written slot is needed.
// Every thread of the warpgroup waits raw_full itself before reading the stage (FP4 tile, codes, A scales), which
// acquires the TMA writes.
// NOTES: 128 x 256 is not converted here: with both warpgroups reading all 256 rows, the conversion has to sit next to
// 128 accumulators + the 64-register partial and spilled under ptxas in every placement tried (kernel header).
#pragma once

#include "kernels/gemm/fp4_upconvert.hpp"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/params.hpp"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"
#include "kernels/ptx/wgmma.cuh"

namespace symmoe::gemm::kernel {

// Named barrier ids 4, 5 of the FP4 GEMM's conversion, one per math warpgroup (0: __syncthreads, 1: the L1
// epilogue exchange, grouped_gemm_kernel.cuh; 2-3: issue turns, math.cuh).
constexpr int kConvertBarrier0 = 4;
static_assert(kConvertBarrier0 >= kIssueBarrier0 + 2, "the conversion barriers must not reuse the issue-turn ids");

// The fold's base codes (fp32 exponent bits) of the 128 B rows of one warpgroup in K block kb: (gate, up) of the
// SwiGLU tile (rows interleaved by 8, weight_transform_fp4.hpp), (s, s) for bf16 tiles; 0 for rows past n.
// kMixedPhases: the tile's phase picks the layout (bf16_tile: an L2 tile).
template <EpilogueKind kEpilogue, bool kMixedPhases = false>
__device__ __forceinline__ int2 load_fp4_base_codes(const GemmParams& p, const Tile& tile, int row0, int kb,
                                                    bool bf16_tile = false) {
  const float2 s = load_b_scales_of_phase<kEpilogue, kMixedPhases>(p, tile, row0, kb, bf16_tile);
  return make_int2(fmt::fold_base_code(s.x), fmt::fold_base_code(s.y));
}

// Converts steps [first, first + kCount) of this thread's kStepsPerWarp over the warpgroup's 8 kStepsPerWarp rows
// from row0: thread t takes the 32-column scale group t % 4 of rows row0 + 8 kStepsPerWarp (t / 32) + 8 i +
// (t % 32) / 4 (i: the step), writing its two 16-column E4M3 chunks.
// NOTES: per step a warp reads the four words t = 0..3 of its group in 8 rows (fp4_word_layout.hpp: 32 different
// banks) and writes 2 x 16 B per lane into the swizzled E4M3 tile (chunk c of row r at r * 128 + ((c ^ r % 8) * 16):
// 4 wavefronts per 512 B); the code word is a broadcast within 4 lanes and the 15 tables (120 B) sit in distinct
// banks. All loads of the kCount steps are issued before the first conversion.
template <EpilogueKind kEpilogue, int kStepsPerWarp, int kCount>
__device__ __forceinline__ void convert_fp4_rows(const uint8_t* src, const uint32_t* codes, const Fp4ShiftTable* tables,
                                                 uint8_t* dst, int row0, int first, int2 base) {
  const int thread = threadIdx.x % 128, lane = thread % 32, group = lane % 4;
  const int r0 = row0 + 8 * kStepsPerWarp * (thread / 32) + 8 * first + lane / 4;  // step i: row r0 + 8 i
  // Rows r0 + 8 i share r % 8 and (r / 2) % 4 when row0 % 8 == 0: one slot order and one swizzle for all steps.
  const int swizzle = r0 % 8;
  uint32_t word[kCount][4];
  uint32_t code[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
#pragma unroll
    for (int t = 0; t < 4; ++t)
      word[i][t] = *reinterpret_cast<const uint32_t*>(src + (r0 + 8 * i) * 64 + 4 * fp4_slot(r0, t, group));
    code[i] = codes[r0 + 8 * i];
  }
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    // SwiGLU tiles: rows with r % 16 >= 8 are up rows.
    const bool up = kEpilogue == EpilogueKind::kSwigluFp8 && ((r0 + 8 * i) % 16) >= 8;
    const Fp4ShiftTable table = tables[fp4_table_index(int((code[i] >> (8 * group)) & 0xFFu) - (up ? base.y : base.x))];
    Fp4E4m3x8 e[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) e[t] = fp4x8_to_e4m3x8(word[i][t], table);
    uint8_t* row = dst + (r0 + 8 * i) * 128;
    *reinterpret_cast<uint4*>(row + ((2 * group) ^ swizzle) * 16) = make_uint4(e[0].lo, e[1].lo, e[2].lo, e[3].lo);
    *reinterpret_cast<uint4*>(row + ((2 * group + 1) ^ swizzle) * 16) = make_uint4(e[0].hi, e[1].hi, e[2].hi, e[3].hi);
  }
}

// One 64 x 128 x 128 WGMMA batch into `partial` in this warpgroup's issue turn, as math.cuh's issue_batch, but the
// first WGMMA overwrites `partial` (output only): between the promotion and the next issue its registers are free
// for the conversion.
__device__ __forceinline__ void issue_batch_overwrite(int wg, float (&partial)[64], uint64_t desc_a, uint64_t desc_b) {
  wait_issue_turn(wg);
  ptx::wgmma_fence();
  ptx::wgmma_m64n128k32_e4m3_overwrite(partial, desc_a, desc_b);
#pragma unroll
  for (int k = 1; k < 4; ++k) ptx::wgmma_m64n128k32_e4m3(partial, desc_a + 2 * k, desc_b + 2 * k, true);
  ptx::wgmma_commit_group();
  pass_issue_turn(wg);
}

// The E4M3 ring position of the running K block count (continues across tiles).
struct Fp4ConvState {
  int tile = 0;
  __device__ void advance() { tile ^= 1; }
};

// Runs the K loop of one tile for this warpgroup (acc: the promoted fp32 result). kBarrier0: the first of the
// kernel's two conversion barrier ids (one per math warpgroup). kMixedPhases (the fused kernel): p is the tile's
// phase's GemmParams and bf16_tile says which phase (the B scales' layout; kEpilogue unused). The conversion is the
// SwiGLU one for both phases there: a bf16 tile's base codes are (s, s), so its gate and up rows read the same code.
template <int BLOCK_M, int BLOCK_N, int kNumStages, EpilogueKind kEpilogue, int kBarrier0 = kConvertBarrier0,
          bool kMixedPhases = false>
__device__ __forceinline__ void math_mainloop_fp4(const GemmParams& p,
                                                  const GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, true>& smem,
                                                  const Tile& tile, const WarpgroupSlice<BLOCK_M, BLOCK_N>& slice,
                                                  int wg, PipelineState<kNumStages>& pipe, Fp4ConvState& conv,
                                                  float (&acc)[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc],
                                                  [[maybe_unused]] bool bf16_tile = false) {
  constexpr EpilogueKind kConvKind = kMixedPhases ? EpilogueKind::kSwigluFp8 : kEpilogue;
  using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
  static_assert(Slice::kSplitN && Slice::kNumHalves == 1 &&
                    GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, true>::kNumBStages == 2,
                "FP4 math conversion: 64 x 256 tiles (warpgroup w reads and converts B rows [128w, 128w + 128)), a "
                "ring of two E4M3 tiles");
  constexpr int kSteps = 4;  // per thread and K block: 128 rows x 4 scale groups / 128 threads, all loads in flight
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int sfa_row = slice.row0 + warp * 16 + lane / 4 + (tile.row_begin & (kSfaBoxPad - 1));
  const int num_k_blocks = p.k / 128;
  const Fp4ShiftTable* tables = smem.fp4_tables();
  // Converts this warpgroup's rows of the block in raw stage s into E4M3 tile t (base: the block's base codes).
  auto convert = [&](int s, int t, int2 base) {
    convert_fp4_rows<kConvKind, kSteps, kSteps>(smem.b_fp4(s), smem.codes(s), tables, smem.b(t), slice.col0, 0, base);
    ptx::fence_proxy_async_shared_cta();  // the stores -> visible to the WGMMA (async proxy)
  };
#pragma unroll
  for (int i = 0; i < Slice::kNumAcc; ++i) acc[i] = 0.f;

  // The tile's first block, before the loop.
  {
    const int2 base = load_fp4_base_codes<kEpilogue, kMixedPhases>(p, tile, slice.col0, 0, bf16_tile);
    ptx::mbarrier_wait_parity(smem.raw_full(pipe.stage), pipe.phase);
    convert(pipe.stage, conv.tile, base);
  }

  float partial[64];  // written by the first WGMMA of each batch
  for (int kb = 0; kb < num_k_blocks; ++kb) {
    const float2 sb = load_b_scales_of_phase<kEpilogue, kMixedPhases>(p, tile, slice.col0, kb, bf16_tile);
    const bool has_next = kb + 1 < num_k_blocks;
    PipelineState<kNumStages> next = pipe;
    next.advance();
    int2 next_base = make_int2(0, 0);
    if (has_next) next_base = load_fp4_base_codes<kEpilogue, kMixedPhases>(p, tile, slice.col0, kb + 1, bf16_tile);
    ptx::named_barrier_sync(kBarrier0 + wg, 128);  // block kb converted; WGMMAs of kb - 1 done
    const float sa0 = smem.sfa(pipe.stage)[sfa_row];
    const float sa1 = smem.sfa(pipe.stage)[sfa_row + 8];
    const uint64_t desc_a = ptx::wgmma_desc_k128b(ptx::smem_addr(smem.a(pipe.stage) + slice.row0 * 128));
    issue_batch_overwrite(wg, partial, desc_a,
                          ptx::wgmma_desc_k128b(ptx::smem_addr(smem.b(conv.tile) + slice.col0 * 128)));
    if (has_next) {  // block kb + 1 while the WGMMAs of block kb run
      ptx::mbarrier_wait_parity(smem.raw_full(next.stage), next.phase);
      convert(next.stage, conv.tile ^ 1, next_base);
    }
    ptx::wgmma_wait_group<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) ptx::fence_operand(partial[i]);
    release_stage<1>(smem.empty(pipe.stage), lane);
    const float s_gate[2] = {sa0 * sb.x, sa1 * sb.x};
    const float s_up[2] = {sa0 * sb.y, sa1 * sb.y};
    promote(acc, partial, s_gate, s_up);
    pipe.advance();
    conv.advance();
  }
}

}  // namespace symmoe::gemm::kernel

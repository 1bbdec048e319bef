// The compiled fused MoE kernels (internal: src/, not installed). plan_mega_moe picks one (MegaPlan::block_m,
// num_stages, smem_bytes), src/kernels/mega/launch.cuh launches it; a retune changes this table, not the API.
#pragma once

#include "layout/mega_smem.hpp"
#include "plan/gemm_kernels.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {

// The fused kernels that exist (src/kernels/mega/mega_kernel*.cu instantiate exactly these), one tile shape for L1
// and L2 alike (one stage ring), 256 weight rows (L1: 128 channels of gate/up) per tile; FP8 weights at every
// mega_block_m_candidates BLOCK_M, then FP4 weights. The GEMM core is mega_core(block_m, weights):
//   16, 32   the swap-AB core's tiles (kernels/gemm/swap_ab_*.cuh: the tokens are the WGMMA's N, each math warpgroup
//            runs 128 weight rows as two 64-row chains; FP4 converted in registers), the stage counts of its SwiGLU
//            entries in kGemmKernels where the per-expert counts still fit (FP8 BLOCK_M 32: one fewer);
//   64       FP8: the one-batch core's split-N 64 x 256 tile (kernels/gemm/core_math.cuh: math warpgroup w takes
//            columns [128 w, 128 w + 128) of the 64 rows, one n128 batch per K block, no issue turns, the tile's B
//            scales staged in shared memory), 4 stages: at 5 the staged B scales and the L1 amax exchange leave no
//            room for 384 experts' counts on one rank. FP4: the two-halves core's split-N tile (kernels/gemm/math.cuh,
//            issue turns) with the stage count of the matching kGemmKernels entry (num_stages counts the raw stages of
//            packed FP4 tiles, + kGemmFp4ConvStages E4M3 tiles, as in the FP4 grouped GEMM; the math warpgroups
//            convert);
//   128      the one-batch core's 128 x 256 tile (kernels/gemm/core_math.cuh: each math warpgroup 64 rows x 256
//            columns as two n128 batches per K block, no issue turns, the tile's B scales staged in shared memory),
//            FP8 only, with the 4 stages of the one-batch SwiGLU entry.
// The one-batch tiles' epilogues write through the staging rows (GemmCoreOutput::kStagingRows), not the standalone
// kernel's output tile.
// Shared memory = the GEMM core's (mega_core_fixed_smem_bytes + stages x gemm_stage_smem_bytes) + the per-expert
// counts (layout::MegaSmemCounts): mega_smem_bytes below; src/kernels/mega/smem_layout.hpp stacks the two.
struct MegaKernelShape {
  int block_m, block_n, num_stages;
  GemmWeights weights = GemmWeights::kFp8;
};
inline constexpr MegaKernelShape kMegaKernels[] = {{16, 256, 6},
                                                   {32, 256, 5},
                                                   {64, 256, 4},
                                                   {128, 256, 4},
                                                   {16, 256, 11, GemmWeights::kFp4},
                                                   {32, 256, 10, GemmWeights::kFp4},
                                                   {64, 256, 5, GemmWeights::kFp4}};
inline constexpr int kNumMegaKernels = static_cast<int>(sizeof(kMegaKernels) / sizeof(kMegaKernels[0]));
// kMegaKernels is FP8 then FP4, each over mega_block_m_candidates in order.
constexpr bool mega_kernels_follow_candidates() {
  const GemmWeights formats[] = {GemmWeights::kFp8, GemmWeights::kFp4};
  int i = 0;
  for (const GemmWeights w : formats) {
    const MegaBlockMs c = mega_block_m_candidates(w);
    for (int j = 0; j < c.count; ++j, ++i)
      if (i >= kNumMegaKernels || kMegaKernels[i].block_m != c.values[j] || kMegaKernels[i].weights != w) return false;
  }
  return i == kNumMegaKernels;
}
static_assert(mega_kernels_follow_candidates(),
              "the fused kernels: FP8 then FP4, each over mega_block_m_candidates in order");
// Index in kMegaKernels of the fused kernel with BLOCK_M block_m and these weights (-1: none compiled).
constexpr int mega_kernel_index(int block_m, GemmWeights weights) {
  for (int i = 0; i < kNumMegaKernels; ++i)
    if (kMegaKernels[i].block_m == block_m && kMegaKernels[i].weights == weights) return i;
  return -1;
}
// Fixed shared memory of a fused kernel's GEMM core: the standalone core's, except that the one-batch core (FP8 BLOCK_M
// 64 and 128) has the staging rows as its output region (GemmCoreOutput::kStagingRows; at 64 with the L1 amax
// exchange).
constexpr int mega_core_fixed_smem_bytes(int block_m, int block_n, GemmWeights weights = GemmWeights::kFp8) {
  const GemmCore core = mega_core(block_m, weights);
  return core == GemmCore::kOneBatch
             ? gemm_core_fixed_smem_bytes(block_m, block_n, GemmCoreOutput::kStagingRows)
             : gemm_fixed_smem_bytes(block_n, false, weights, gemm_b_scales_in_smem(weights, true), core);
}
// Dynamic shared memory of a fused kernel: the GEMM core's + the per-expert counts.
constexpr int mega_smem_bytes(int block_m, int block_n, int num_stages, int num_experts, int num_local_experts,
                              GemmWeights weights = GemmWeights::kFp8) {
  return mega_core_fixed_smem_bytes(block_m, block_n, weights) +
         num_stages * gemm_stage_smem_bytes(block_m, block_n, weights) +
         layout::MegaSmemCounts::num_bytes(num_experts, num_local_experts);
}
// The fused kernel's one-batch core stages a tile's B scales for at most kGemmCoreFusedMaxKBlocks K blocks; its K is
// H (L1) or I (L2), which the planner bounds (plan_mega_moe refuses larger shapes).
static_assert(kMegaMaxHidden <= gemm_core_max_k_blocks(GemmCoreOutput::kStagingRows) * hopper::kBlockK &&
                  layout::kMegaMaxIntermediate <=
                      gemm_core_max_k_blocks(GemmCoreOutput::kStagingRows) * hopper::kBlockK,
              "the fused one-batch core's staged B scales must cover the largest H and I the planner accepts");
// The one-batch core runs FP8 weights only, 256-column tiles of 64 or 128 rows.
constexpr bool mega_one_batch_kernels_are_fp8() {
  for (const MegaKernelShape& k : kMegaKernels)
    if (mega_core(k.block_m, k.weights) == GemmCore::kOneBatch &&
        (k.weights != GemmWeights::kFp8 || k.block_n != 256 || (k.block_m != 64 && k.block_m != 128)))
      return false;
  return true;
}
static_assert(mega_one_batch_kernels_are_fp8(), "the fused one-batch core: FP8 weights, 64 x 256 and 128 x 256 tiles");

}  // namespace symmoe::plan

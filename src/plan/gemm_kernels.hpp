// The compiled grouped-GEMM kernels and their shared-memory model (internal: src/, not installed). plan_grouped_gemm
// picks one (GemmPlan's block, stages, cluster, core), src/kernels/gemm/launch.cuh and grouped_gemm_core.cu launch
// it, src/kernels/gemm/smem_layout.hpp and core_smem_layout.hpp check their layouts against these formulas; a retune
// changes this table, not the API.
#pragma once

#include "symmoe/plan.hpp"

namespace symmoe::plan {

// The grouped-GEMM kernels that exist: src/kernels/gemm/*.cu instantiate exactly these entries (and nothing else),
// and plan_grouped_gemm picks among them (each is its choice for some problem or pin: tests/cpu/test_plan.cpp).
// Two math warpgroups + one producer warpgroup each; the two-halves core (GemmCore::kTwoHalves) at cluster 1:
//   128 x 128: the warpgroups split the token rows (64 x 128 each)
//    64 x 256: they split the channels (64 x 128 each)
//   128 x 256: they split the token rows (64 x 256 each, two m64n128 WGMMA passes sharing one partial accumulator)
// Stages: as many as fit next to the epilogue staging (gemm_smem_bytes). Its cluster-2 kernels (TMA multicast of the
// weight tile to 2 CTAs) were slower and are not compiled (docs/notes/gemm.md).
// tile_buffer: the epilogue stages the warp's whole slice (16 rows x block_n bf16) in shared memory and bulk-stores
// it while the warps go on with the next tile, instead of 64-column slabs through 16 staging rows (each slab waits
// for the previous slab's stores to read the rows); it costs a pipeline stage (kernels/gemm/epilogue_tile_buffer.cuh).
// weights kFp4: num_stages counts the stages of packed FP4 tiles (+ A); the E4M3 tiles the WGMMA reads are a
// second ring of kGemmFp4ConvStages tiles, written at BLOCK_M 64 by the math warpgroups one K block ahead
// (kernels/gemm/math_fp4.cuh), at BLOCK_M 128 by converter warps (kernels/gemm/fp4_converter.cuh; grouped GEMM
// only: the fused kernel has no FP4 kernel at BLOCK_M 128, mega_block_m_candidates).
// The cores (GemmCore, symmoe/plan.hpp):
//   kTwoHalves: the tiles above; a 64 x 256 warpgroup tile is two m64n128 passes sharing one partial accumulator,
//               the warpgroups take issue turns, the epilogue goes through staging rows and bulk stores
//               (kernels/gemm/math.cuh, epilogue_*.cuh).
//   kOneBatch:  BLOCK_M 128; each warpgroup's 64 x block_n per K block into its own partial accumulator, no issue
//               turns: bf16 output at block_n 128 / 192 in one m64nN batch; the SwiGLU + FP8 tile (block_n 256) as
//               two m64n128 batches into one 64-register partial (gemm_core_num_halves). BLOCK_M 64 (split N, 64 x
//               256, bf16 and SwiGLU + FP8): warpgroup w takes columns [128 w, 128 w + 128) of the 64 rows, one
//               m64n128 batch per K block; the SwiGLU row amax crosses the warpgroups through shared memory (the
//               planner's 64-row FP8 tiles: 0.89-1.00x the two-halves core's 64 x 256 time, docs/notes/gemm.md). The
//               tile's B scales staged in shared memory once per tile; the epilogue writes the warpgroup's rows into
//               one 128B-swizzled shared-memory tile (bf16 with stmatrix; e4m3 codes) and stores them with one TMA
//               store per 128-byte column atom (kernels/gemm/core_*.cuh). cluster_size 2: the two CTAs take
//               neighbouring m-blocks of one n-block and each multicasts half of the weight tile to both. The fused
//               kernel's BLOCK_M 128 tiles (L1 SwiGLU and L2 bf16, both 128 x 256) run this core's mainloop too, and so
//               do its FP8 BLOCK_M 64 tiles as the split-N 64 x 256 tile (warpgroup w: columns [128 w, 128 w + 128) of
//               the 64 rows, one m64n128 batch per K block; src/plan/mega_kernels.hpp).
//   kSwapAB:    block_m tokens (16 / 32 / 64, the WGMMA's N) x block_n weight rows (the WGMMA's M: 128 = 64 per
//               math warpgroup, or 256 = two independent 64-row WGMMA tiles per warpgroup; bf16 output stored
//               straight from the accumulators; the SwiGLU tile is 256 rows = 128 channels, one output scale block
//               per token); FP8 weights are read
//               by the WGMMA from shared memory, FP4 weights are loaded by each thread in its A-fragment order
//               (kernels/gemm/fp4_word_layout.hpp) and converted to E4M3 in registers. As many stages as fit.
struct GemmKernelShape {
  int block_m, block_n, num_stages, cluster_size;
  GemmEpilogue epilogue;
  bool tile_buffer = false;
  GemmWeights weights = GemmWeights::kFp8;
  GemmCore core = GemmCore::kTwoHalves;
};
inline constexpr GemmKernelShape kGemmKernels[] = {
    {128, 128, 6, 1, GemmEpilogue::kBf16},
    {64, 256, 5, 1, GemmEpilogue::kBf16},
    {128, 256, 4, 1, GemmEpilogue::kBf16},
    {128, 256, 3, 1, GemmEpilogue::kBf16, true},
    {64, 256, 5, 1, GemmEpilogue::kSwigluFp8},
    {128, 256, 4, 1, GemmEpilogue::kSwigluFp8},
    {64, 256, 5, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4},
    {128, 256, 4, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4},
    {64, 256, 5, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp4},
    {128, 256, 4, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp4},
    {128, 192, 4, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kOneBatch},
    {128, 192, 4, 2, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kOneBatch},
    {128, 128, 5, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kOneBatch},
    {128, 128, 5, 2, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kOneBatch},
    {16, 128, 12, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {32, 128, 11, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {64, 128, 9, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {16, 128, 21, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {32, 128, 17, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {64, 128, 13, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {16, 256, 6, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {32, 256, 6, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {64, 256, 5, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {16, 256, 11, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {32, 256, 10, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {64, 256, 8, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {16, 256, 6, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {32, 256, 6, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {64, 256, 5, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp8, GemmCore::kSwapAB},
    {16, 256, 11, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {32, 256, 10, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {64, 256, 8, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp4, GemmCore::kSwapAB},
    {128, 256, 4, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp8, GemmCore::kOneBatch},
    {64, 256, 4, 1, GemmEpilogue::kBf16, false, GemmWeights::kFp8, GemmCore::kOneBatch},
    {64, 256, 5, 1, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp8, GemmCore::kOneBatch},
    {128, 256, 4, 2, GemmEpilogue::kSwigluFp8, false, GemmWeights::kFp8, GemmCore::kOneBatch},
};
inline constexpr int kNumGemmKernels = static_cast<int>(sizeof(kGemmKernels) / sizeof(kGemmKernels[0]));

// Shared memory of one grouped-GEMM kernel (src/kernels/gemm/smem_layout.hpp places the regions and
// static_asserts that its total equals gemm_smem_bytes).
//   per stage: A tile block_m x 128 B + B tile block_n x 128 B + A scales (block_m + 4 fp32, TMA box padded to
//              128 B) + full/empty mbarriers (16 B)
//   fixed:     L1 amax exchange (1 KiB) + epilogue staging (8 warps x 16 rows x 144 B: 64 bf16 / 128 e4m3 per row +
//              16 B pad against bank conflicts; with tile_buffer 8 warps x 16 rows x (2 block_n + 16) B: the warp's
//              whole bf16 slice) + with b_scales_smem the tile's B-scale chunk (gemm_sfb_smem_bytes) + 1 KiB to
//              align the base to 1024 B (128B swizzle)
//   FP4 weights, per stage: the A tile, its scales, the packed B tile block_n x 64 B and its scale codes
//              block_n x 4 B, 2 mbarriers (no E4M3 B tile: the upconversion writes it into a separate ring of
//              kGemmFp4ConvStages E4M3 tiles + 2 mbarriers each, counted as fixed); fixed also the upconversion
//              tables and the converter warps' per-stage slots, 8 B per raw stage (kGemmFp4TableBytes)
constexpr int kGemmSfaBoxPad = 4;
constexpr int kGemmFp4TableBytes = 256;
constexpr int kGemmFp4ConvStages = 2;
constexpr int gemm_stage_smem_bytes(int block_m, int block_n, GemmWeights weights = GemmWeights::kFp8) {
  return block_m * 128 + ((block_m + kGemmSfaBoxPad) * 4 + 127) / 128 * 128 + 16 +
         (weights == GemmWeights::kFp4 ? block_n * 64 + block_n * 4 : block_n * 128);
}
constexpr int kGemmStagingRowBytes = 144;
constexpr int kGemmStagingBytes = 8 * 16 * kGemmStagingRowBytes;
constexpr int gemm_tile_buffer_row_bytes(int block_n) { return 2 * block_n + 16; }
constexpr int gemm_staging_bytes(int block_n, bool tile_buffer) {
  return tile_buffer ? 8 * 16 * gemm_tile_buffer_row_bytes(block_n) : kGemmStagingBytes;
}
// Where the two-halves core's math warps read the weight tile's B block scales. The standalone FP8 grouped GEMM
// kernels stage them in shared memory (kernels/gemm/math.cuh): per tile, chunks of kGemmSfbChunkKBlocks K blocks, one
// float2 (gate, up; bf16: (s, s)) per K block and 128-column block of the tile, one float per math thread for
// block_n 256; the K loop reads them with ld.shared. The FP4 kernels and the fused kernel (its two-halves core, FP4
// BLOCK_M 64) load them per K block from global memory: staging spilled the FP4 kernels (docs/notes/gemm.md). The one
// place that decides: the kernel entries' shared-memory layouts and the planner ask it. (The one-batch core, standalone
// or fused, always stages a tile's B scales: kGemmCoreMaxKBlocks below.)
constexpr bool gemm_b_scales_in_smem(GemmWeights weights, bool fused) { return weights == GemmWeights::kFp8 && !fused; }
constexpr int kGemmSfbChunkKBlocks = 64;
constexpr int gemm_sfb_smem_bytes(int block_n, bool b_scales_smem) {
  return b_scales_smem ? kGemmSfbChunkKBlocks * (block_n / 128) * 8 : 0;
}
// One-batch core (GemmCore::kOneBatch), fixed: the output region (GemmCoreOutput) + the split-N SwiGLU tile's row-amax
// exchange (gemm_core_amax_bytes) + the tile's B scales for every K block (gemm_core_sfb_bytes) + 1 KiB to align the
// base; per stage as gemm_stage_smem_bytes. The standalone kernels stage up to kGemmCoreMaxKBlocks K blocks (k <=
// 16384; the grouped-GEMM planner takes the two-halves core above), the fused kernel up to kGemmCoreFusedMaxKBlocks
// (k <= 8192: its H and I, bounded by plan_mega_moe; mega_kernels.hpp checks), which keeps its shared memory within
// the limit at 960 experts on one rank.
constexpr int kGemmCoreMaxKBlocks = 128;
constexpr int kGemmCoreFusedMaxKBlocks = 64;
// The one-batch core's output tensor map boxes: 128 bytes (one 128B swizzle row: 64 bf16 columns or the SwiGLU tile's
// 128 e4m3 channels) x one math warpgroup's 64 rows; each warpgroup stores its own half of the tile.
constexpr int kGemmCoreStoreBoxRows = 64;
// m64n128 WGMMA batches per K block of a one-batch warpgroup tile: two for the 128 x 256 tile (SwiGLU + FP8, or the
// fused kernel's bf16 L2 tile; a 64 x 256 partial would not fit next to its 128 accumulators), one otherwise (128 x
// 128 / 192 in one m64nN batch; the split-N 64 x 256 tile, whose warpgroups take 128 columns each).
constexpr int gemm_core_num_halves(int block_m, int block_n) { return block_m == 128 && block_n == 256 ? 2 : 1; }
// The one-batch core's output region (kernels/gemm/core_smem_layout.hpp): the standalone kernel's 128B-swizzled tile
// that its epilogue TMA-stores (bf16: block_m x block_n x 2 B; SwiGLU: the 128 channels' e4m3 codes, block_m x 128
// B), or the fused kernel's staging rows (kGemmStagingBytes: 8 math warps x 16 rows,
// kernels/gemm/epilogue_staging.cuh), through which both of its epilogues bulk-store rows.
enum class GemmCoreOutput { kBf16Tile, kFp8Tile, kStagingRows };
constexpr GemmCoreOutput gemm_core_tile_output(GemmEpilogue epilogue) {
  return epilogue == GemmEpilogue::kSwigluFp8 ? GemmCoreOutput::kFp8Tile : GemmCoreOutput::kBf16Tile;
}
constexpr int gemm_core_out_bytes(int block_m, int block_n, GemmCoreOutput output) {
  return output == GemmCoreOutput::kStagingRows ? kGemmStagingBytes
         : output == GemmCoreOutput::kFp8Tile   ? block_m * (block_n / 2)
                                                : block_m * block_n * 2;
}
// The split-N tile (block_m 64) with a SwiGLU epilogue (kFp8Tile, and kStagingRows: the fused kernel's L1): each
// warpgroup holds 64 of a row's 128 channels, so the two exchange their per-row amax through shared memory, [2 tile
// parities][2 warpgroups][64 rows] fp32 (kernels/gemm/epilogue_swiglu.cuh).
constexpr int gemm_core_amax_bytes(int block_m, GemmCoreOutput output) {
  return block_m == 64 && output != GemmCoreOutput::kBf16Tile ? 2 * 2 * 64 * 4 : 0;
}
// K blocks of B scales one tile may stage: the fused kernel's layout (kStagingRows) fewer than the standalone one's.
constexpr int gemm_core_max_k_blocks(GemmCoreOutput output) {
  return output == GemmCoreOutput::kStagingRows ? kGemmCoreFusedMaxKBlocks : kGemmCoreMaxKBlocks;
}
// The tile's B scales, a copy per math warpgroup and tile parity (kernels/gemm/core_math.cuh stage_core_b_scales),
// two per K block (the 128-column scale blocks a 192- or 256-column bf16 tile spans; SwiGLU: gate and up), fp32:
// [2 warpgroups][2 parities][2][gemm_core_max_k_blocks].
constexpr int gemm_core_sfb_bytes(GemmCoreOutput output) { return 2 * 2 * 2 * gemm_core_max_k_blocks(output) * 4; }
constexpr int gemm_core_fixed_smem_bytes(int block_m, int block_n, GemmCoreOutput output) {
  return gemm_core_out_bytes(block_m, block_n, output) + gemm_core_amax_bytes(block_m, output) +
         gemm_core_sfb_bytes(output) + 1024;
}
// Swap-AB core (GemmCore::kSwapAB), per stage: as gemm_stage_smem_bytes (the token tile block_m x 128 B + its
// scales + 2 mbarriers + the weight tile of block_n rows: FP8 block_n x 128 B; FP4 block_n x 64 B + its scale codes
// block_n x 4 B); fixed: the FP4 upconversion tables + 1 KiB to align the base + the SwiGLU tile's (block_n 256)
// per-token amax exchange, 2 parities x 8 math warps x kGemmSwapAbMaxBlockM fp32.
constexpr int kGemmSwapAbMaxBlockM = 64;
constexpr int gemm_swap_ab_fixed_smem_bytes(int block_n) {
  return kGemmFp4TableBytes + 1024 + (block_n == 256 ? 2 * 8 * kGemmSwapAbMaxBlockM * 4 : 0);
}
// epilogue and block_m: only the one-batch core's output tile and amax exchange depend on them (the standalone kernels'
// tiles: the fused kernel's one-batch layout is plan::mega_core_fixed_smem_bytes).
constexpr int gemm_fixed_smem_bytes(int block_n = 0, bool tile_buffer = false, GemmWeights weights = GemmWeights::kFp8,
                                    bool b_scales_smem = false, GemmCore core = GemmCore::kTwoHalves,
                                    GemmEpilogue epilogue = GemmEpilogue::kBf16, int block_m = 128) {
  if (core == GemmCore::kOneBatch) return gemm_core_fixed_smem_bytes(block_m, block_n, gemm_core_tile_output(epilogue));
  if (core == GemmCore::kSwapAB) return gemm_swap_ab_fixed_smem_bytes(block_n);
  return 2 * 2 * 64 * 4 + gemm_staging_bytes(block_n, tile_buffer) + gemm_sfb_smem_bytes(block_n, b_scales_smem) +
         1024 + (weights == GemmWeights::kFp4 ? kGemmFp4TableBytes + kGemmFp4ConvStages * (block_n * 128 + 16) : 0);
}
constexpr int gemm_smem_bytes(int block_m, int block_n, int num_stages, bool tile_buffer = false,
                              GemmWeights weights = GemmWeights::kFp8, bool b_scales_smem = false,
                              GemmCore core = GemmCore::kTwoHalves, GemmEpilogue epilogue = GemmEpilogue::kBf16) {
  return gemm_fixed_smem_bytes(block_n, tile_buffer, weights, b_scales_smem, core, epilogue, block_m) +
         num_stages * gemm_stage_smem_bytes(block_m, block_n, weights);
}

}  // namespace symmoe::plan

// Shared-memory layout of the one-batch grouped GEMM core (plan::GemmCore::kOneBatch): the one place that knows its
// offsets and sizes (the host reads kDynamicBytes to launch; plan::gemm_core_fixed_smem_bytes and
// plan::gemm_stage_smem_bytes must agree, checked below). BLOCK_M 128 (math warpgroup w: rows [64 w, 64 w + 64)) or
// 64 (split N, BLOCK_N 256: warpgroup w takes columns [128 w, 128 w + 128) of the 64 rows). kOutput
// (plan::GemmCoreOutput) is the output region:
//   out         standalone kernel (kBf16Tile, kFp8Tile): the output tile, [kNumAtoms column atoms][BLOCK_M rows][128
//               bytes], 128B-swizzled (16-byte chunk j of row r at byte 16 (j ^ r % 8)), read by the TMA store
//               (core_epilogue.cuh): bf16, BLOCK_N / 64 atoms written by stmatrix; SwiGLU + FP8 (BLOCK_N 256), one
//               atom: the e4m3 codes of the tile's 128 channels. Fused kernel (kStagingRows, BLOCK_N 256): the 8 math
//               warps' staging rows (epilogue_staging.cuh), 16 rows x plan::kGemmStagingRowBytes each, for both of its
//               epilogues (kernels/mega/epilogue.cuh)
//   amax        split N with a SwiGLU epilogue (kFp8Tile, kStagingRows at BLOCK_M 64): the row-amax exchange between
//               the two warpgroups, [2 tile parities][2 warpgroups][64 rows] fp32 (plan::gemm_core_amax_bytes)
//   per stage   A tile [BLOCK_M, 128] e4m3, B tile [BLOCK_N, 128] e4m3 (both 128B-swizzled by TMA), A scales
//               [BLOCK_M + kSfaBoxPad] fp32 (params.hpp)
//   B scales    per math warpgroup (each stages its own copy: core_math.cuh stage_core_b_scales) and tile parity,
//               the tile's fp32 B block scales for every K block: [2 warpgroups][2 parities][2][kMaxKBlocks]
//               (plan::gemm_core_sfb_bytes), the 128-column scale block of the tile's first column, then the next one
//               (a 192- or 256-column bf16 tile spans two); SwiGLU: gate, then up
//   barriers    full[kNumStages], empty[kNumStages]
#pragma once

#include <cstdint>

#include "kernels/gemm/params.hpp"
#include "kernels/gemm/stage_barriers.hpp"
#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M_, int BLOCK_N, int kNumStages, plan::GemmCoreOutput kOutput>
struct CoreSmemLayout {
  static constexpr int BLOCK_M = BLOCK_M_;
  static constexpr int kBlockK = 128;
  static constexpr bool kStagingRows = kOutput == plan::GemmCoreOutput::kStagingRows;
  // Split N: both warpgroups take the 64 rows, warpgroup w columns [128 w, 128 w + 128) (kWgN each).
  static constexpr bool kSplitN = BLOCK_M == 64;
  static constexpr int kWgN = kSplitN ? BLOCK_N / 2 : BLOCK_N;
  static constexpr int kNumAcc = kWgN / 2;  // fp32 accumulators per math thread
  // m64n128 WGMMA batches per K block (plan::gemm_core_num_halves): 2 for the 128 x 256 tiles.
  static constexpr int kNumHalves = plan::gemm_core_num_halves(BLOCK_M, BLOCK_N);
  // 128-byte swizzle rows of the output tile: 64 bf16 columns each, or the SwiGLU tile's 128 e4m3 channels.
  static constexpr int kNumAtoms = kStagingRows ? 0 : kOutput == plan::GemmCoreOutput::kFp8Tile ? 1 : BLOCK_N / 64;
  static constexpr int kAtomBytes = BLOCK_M * 128;
  static constexpr int kStagingWarpBytes = 16 * plan::kGemmStagingRowBytes;
  static constexpr int kOutBytes = kStagingRows ? 8 * kStagingWarpBytes : kNumAtoms * kAtomBytes;
  static constexpr int kABytes = BLOCK_M * kBlockK;
  static constexpr int kBBytes = BLOCK_N * kBlockK;
  static constexpr int kSfaBoxBytes = (BLOCK_M + kSfaBoxPad) * 4;
  static constexpr int kSfaBytes = (kSfaBoxBytes + 127) / 128 * 128;
  static constexpr int kAmaxBytes = plan::gemm_core_amax_bytes(BLOCK_M, kOutput);
  static constexpr int kOutOffset = 0;
  static constexpr int kAmaxOffset = kOutOffset + kOutBytes;
  static constexpr int kAOffset = kAmaxOffset + kAmaxBytes;
  static constexpr int kBOffset = kAOffset + kNumStages * kABytes;
  static constexpr int kSfaOffset = kBOffset + kNumStages * kBBytes;
  static constexpr int kSfbOffset = kSfaOffset + kNumStages * kSfaBytes;
  static constexpr int kMaxKBlocks = plan::gemm_core_max_k_blocks(kOutput);  // B scales staged per tile
  static constexpr int kSfbBytes = plan::gemm_core_sfb_bytes(kOutput);
  static constexpr int kBarrierOffset = kSfbOffset + kSfbBytes;
  static constexpr int kBytes = kBarrierOffset + 2 * kNumStages * 8;
  static constexpr int kDynamicBytes = kBytes + 1024;  // slack to align the base to 1024 bytes
  static constexpr int kStageTxBytes = kABytes + kBBytes + kSfaBoxBytes;
  static_assert(BLOCK_M == 128
                    ? (kOutput == plan::GemmCoreOutput::kBf16Tile ? BLOCK_N == 128 || BLOCK_N == 192 : BLOCK_N == 256)
                    : BLOCK_M == 64 && BLOCK_N == 256,
                "one-batch tiles: 128 x 128 or 128 x 192 bf16, 128 x 256 SwiGLU + FP8, the fused kernel's 128 x 256; "
                "split N: 64 x 256");
  static_assert(kOutBytes == plan::gemm_core_out_bytes(BLOCK_M, BLOCK_N, kOutput), "the output region");
  static_assert(kOutBytes % 1024 == 0 && kAmaxBytes % 1024 == 0 && kABytes % 1024 == 0 && kBBytes % 1024 == 0,
                "swizzled tiles keep 1024-byte alignment");
  static_assert(kSfaOffset % 128 == 0 && kSfbOffset % 16 == 0 && kBarrierOffset % 8 == 0 &&
                    plan::kGemmStagingRowBytes % 16 == 0,
                "alignment (bulk-store sources 16 bytes)");
  static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KiB per-block limit: fewer stages");
  static_assert(kDynamicBytes ==
                    plan::gemm_core_fixed_smem_bytes(BLOCK_M, BLOCK_N, kOutput) +
                        kNumStages * plan::gemm_stage_smem_bytes(BLOCK_M, BLOCK_N, plan::GemmWeights::kFp8),
                "the planner's shared-memory model (plan::gemm_core_fixed_smem_bytes) disagrees with this layout");

  uint8_t* base;
  // Column atom `atom` of the output tile: row r at r * 128 bytes, swizzled.
  __device__ uint8_t* d_atom(int atom) const {
    static_assert(!kStagingRows, "d_atom: the output-tile layouts only");
    return base + kOutOffset + atom * kAtomBytes;
  }
  // kStagingRows: the 16 staging rows of math warp w (0..7) of the CTA.
  __device__ uint8_t* staging(int w) const {
    static_assert(kStagingRows, "staging: the staging-rows layout only");
    return base + kOutOffset + w * kStagingWarpBytes;
  }
  // Split N with a SwiGLU epilogue: warpgroup wg's row amaxes of tiles of parity `parity` (64 fp32).
  __device__ float* amax(int parity, int wg) const {
    static_assert(kAmaxBytes > 0, "amax: the split-N SwiGLU layouts only");
    return reinterpret_cast<float*>(base + kAmaxOffset) + (parity * 2 + wg) * 64;
  }
  __device__ uint8_t* a(int s) const { return base + kAOffset + s * kABytes; }
  __device__ uint8_t* b(int s) const { return base + kBOffset + s * kBBytes; }
  __device__ float* sfa(int s) const { return reinterpret_cast<float*>(base + kSfaOffset + s * kSfaBytes); }
  // Math warpgroup wg's B scales for tiles of parity `parity`, indexed by K block: second = the tile's second
  // 128-column scale block (SwiGLU: up).
  __device__ float* sfb(int wg, int parity, int second) const {
    return reinterpret_cast<float*>(base + kSfbOffset) + ((wg * 2 + parity) * 2 + second) * kMaxKBlocks;
  }
  __device__ StageBarriers<kNumStages> stage_barriers() const {
    return {reinterpret_cast<uint64_t*>(base + kBarrierOffset)};
  }
  __device__ uint64_t* full(int s) const { return stage_barriers().full(s); }
  __device__ uint64_t* empty(int s) const { return stage_barriers().empty(s); }
  __device__ void init_stage_barriers(uint32_t consumer_arrivals) const { stage_barriers().init(consumer_arrivals); }
};

}  // namespace symmoe::gemm::kernel
